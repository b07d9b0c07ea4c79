"""A job spec's accelerators when they are not NVIDIA's GPUs: `accelerator:` naming an AMD,
AWS Neuron, Google TPU or Intel Gaudi model, `gpus:` counting that vendor's devices per worker,
and the fields only one vendor has. Pure.

- `neuron_cores: N` (AWS): NeuronCores instead of whole Neuron devices.
- `tpu_topology: 2x4` (Google): a slice of that topology, one worker per TPU host, each asking
  for its host's chips: `gpus:` when given (a single-host 2x4 VM has 8), else 4 per host as
  GKE's multi-host machine types have (xpk's compute_chips_per_vm); workers = chips ÷ that.
  More than one worker is an Indexed Job or a JobSet with a subdomain, which is what GKE's
  webhook needs to give each pod TPU_WORKER_ID and TPU_WORKER_HOSTNAMES.
- `partition: cpx_nps4` (AMD): each device asked for is one compute/memory partition.
- A multi-node Neuron job gets the instance's EFA devices (`vpc.amazonaws.com/efa`) and the
  libfabric environment AWS's Neuron EKS samples set (aws-neuron-eks-samples
  dp_bert_hf_pretrain/lib/trn1_dist_ddp.py: FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1,
  FI_EFA_FORK_SAFE=1); the spec's own values win.
- MIG and time-sharing are NVIDIA's: asked of another vendor, they are refused, as is a
  variable the vendor's device plugin sets (HABANA_VISIBLE_DEVICES)."""

from __future__ import annotations

from typing import Any

from gpuctl.common.spec_fields import Table
from gpuctl.common.specfile import Fields
from gpuctl.gpus import vendor_models as vm
from gpuctl.k8s.vendor_placement import AcceleratorRequest

VENDOR_WORDS = {
    "amd": "AMD Instinct GPUs (accelerator: mi300x, …)",
    "aws": "AWS Trainium and Inferentia (accelerator: trainium2, inferentia2, …)",
    "google": "Google TPUs (accelerator: tpu-v5e, tpu-v6e, …)",
    "intel": "Intel Gaudi (accelerator: gaudi2, …)",
}
VENDOR_FIELDS = {
    "neuron_cores": "aws",
    "tpu_topology": "google",
    "tpu_slices": "google",
    "partition": "amd",
}
# What a vendor's device plugin sets in each container for the devices it allocated
# (HabanaAI/habanalabs-k8s-device-plugin server.go, Allocate): a spec's own would override it.
PLUGIN_ENV = {"intel": ("HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES")}
EFA = "vpc.amazonaws.com/efa"
EFA_ENV = (("FI_PROVIDER", "efa"), ("FI_EFA_USE_DEVICE_RDMA", "1"), ("FI_EFA_FORK_SAFE", "1"))


def parse(
    f: Fields, table: Table, key: str, vendor: str, models: tuple[str, ...]
) -> dict[str, Any]:
    """The JobSpec fields of a worker's VENDOR accelerators (MODELS, named under KEY): gpus,
    accelerator, and, where the accelerator decides them, nodes and efa (per worker)."""
    what = " or ".join(models) or VENDOR_WORDS[vendor]
    for name, owner in VENDOR_FIELDS.items():
        if f.has(name) and owner != vendor:
            raise f.error(name, f"applies to {VENDOR_WORDS[owner]} only, not to {what}")
    for name in ("mig", "shared"):
        if f.has(name):
            raise f.error(name, f"MIG slices and time-shared GPUs are NVIDIA's, not {what}")
    for name in f.read(table["env"], {}):
        if name in PLUGIN_ENV.get(vendor, ()):
            raise f.doc.error(
                f.path + ("env", name),
                f"{name} is set by the device plugin to the devices it gives the worker",
            )
    cores = f.read(table["neuron_cores"])
    if cores is not None and f.has("gpus"):
        raise f.error("neuron_cores", "give either gpus (Neuron devices) or neuron_cores, not both")
    gpus = f.read(table["gpus"])
    topology = f.read(table["tpu_topology"])
    slices = f.read(table["tpu_slices"], 1)
    if f.has("tpu_slices") and not topology:
        raise f.error("tpu_slices", "needs tpu_topology: the topology of each slice")
    out: dict[str, Any] = {}
    if topology:
        gpus, hosts = _tpu_hosts(f, table, topology, gpus, slices)
        out["nodes"] = hosts * slices
    count = cores if cores is not None else (1 if gpus is None else gpus)
    if count == 0:
        raise f.error("gpus", f"asks for no device: {key} {', '.join(models)} needs gpus ≥ 1")
    unit = "neuroncore" if cores is not None else f.read(table["partition"])
    nodes = out.get("nodes") or f.read(table["nodes"])
    if vendor == "aws" and nodes > 1:
        out["efa"] = efa_per_worker(models)
    request = AcceleratorRequest(vendor, models, count, unit, topology, slices)
    return {**out, "gpus": count, "accelerator": request, "mig": None, "shared": False,
            "gpu_type": ()}  # fmt: skip


def _tpu_hosts(
    f: Fields, table: Table, topology: str, gpus: int | None, slices: int
) -> tuple[int, int]:
    """(chips per host, hosts) of a slice of TOPOLOGY; SLICES of them make the workers."""
    chips = vm.slice_chips(topology)
    per_host = gpus or vm.chips_per_host(topology)
    if chips % per_host:
        raise f.error(
            "gpus",
            f"{per_host} chips per TPU host do not divide a {topology} slice's {chips} chips",
        )
    hosts = chips // per_host
    if hosts * slices > 1 and f.read(table["kind"]) != "Job":
        raise f.error(
            "tpu_topology",
            f"a {topology} slice of {per_host}-chip hosts spans {hosts} hosts: a multi-host "
            "slice is a kind Job's, one worker per host",
        )
    if f.has("nodes") and f.read(table["nodes"]) != hosts * slices:
        each = f" × {slices} slices" if slices > 1 else ""
        raise f.error(
            "nodes",
            f"a {topology} TPU slice of {per_host}-chip hosts is {hosts} worker"
            f"{'s' if hosts != 1 else ''}{each}, one per host: leave nodes out",
        )
    return per_host, hosts


def multislice_form(f: Fields, multinode: str | None, jobset: str) -> str:
    """A multislice job's form: a JobSet (one Job per slice), whatever else was asked."""
    if multinode not in (None, jobset):
        raise f.error(
            "multinode",
            f"{multinode}: TPU slices (tpu_slices) run as a JobSet, one Job per slice",
        )
    return jobset


def efa_per_worker(models: tuple[str, ...]) -> int:
    """EFA devices a multi-node worker asks for: the fewest any instance type of MODELS that
    has EFA offers (trn1.32xlarge 8, trn1n.32xlarge 16, trn2.48xlarge 16), so it fits each;
    0 where none has EFA (Inferentia2)."""
    counts = [
        row[3] for m in models for size in vm.instance_types(m) if (row := vm.instance({
            vm.INSTANCE_TYPE: size})) and row[3]
    ]  # fmt: skip
    return min(counts, default=0)


def with_efa(
    extra: tuple[tuple[str, str], ...], env: dict[str, str], efa: int
) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
    """EXTRA resources and ENV with a multi-node Neuron worker's EFA devices and libfabric
    environment added, where the spec did not set them itself."""
    if not efa:
        return extra, env
    if not any(name == EFA for name, _ in extra):
        extra = (*extra, (EFA, str(efa)))
    return extra, {**dict(EFA_ENV), **env}
