"""The job spec (``apiVersion: gpuctl/v1``): parse and validate into a plain record.

Every error names the file, the line and the field (see gpuctl.common.specfile).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.common import k8s_names
from gpuctl.common.k8s_names import DNS1123_SUBDOMAIN, ENV_VAR, LABEL_KEY, LABEL_VALUE
from gpuctl.common.quantity import POSITIVE
from gpuctl.common.quantity import parse as parse_quantity
from gpuctl.common.spec_fields import (
    DURATION,
    FLAG,
    INTEGER,
    MAPPING,
    MAPPINGS,
    NAME,
    QUANTITY,
    RESOURCES,
    STRING_MAP,
    STRINGS,
    TEXT,
    Field,
    Refusal,
    Rule,
    Table,
)
from gpuctl.common.specfile import MAX_SECONDS, Doc, Fields
from gpuctl.gpus.topology import NAMES as TOPOLOGY_NAMES
from gpuctl.gpus.topology import Constraint
from gpuctl.jobs.core import service_spec, vendor_spec, volumes
from gpuctl.jobs.core.service_spec import Serving
from gpuctl.jobs.core.volumes import SecretUse, Volume
from gpuctl.k8s.labels import QUEUE_LABEL
from gpuctl.k8s.placement import GpuRequest
from gpuctl.k8s.vendor_placement import AcceleratorRequest

API_VERSION = "gpuctl/v1"
KINDS = ("Job", "Pod", "Service")
JOBSET, INDEXED_JOB = "jobset", "indexed-job"
MULTINODE = (JOBSET, INDEXED_JOB)  # how a multi-node job is made
JOBSET_WORKERS = "workers"  # the name of a JobSet job's one replicatedJob
MAX_GPUS_PER_WORKER = 64
MAX_NODES = 1024
MAX_NEURON_CORES = 1024
MAX_TPU_SLICES = 64
TPU_TOPOLOGY = r"[1-9][0-9]{0,2}(x[1-9][0-9]{0,2}){1,2}"
AMD_PARTITIONS = tuple(
    f"{c}_nps{m}" for c in ("spx", "dpx", "qpx", "cpx") for m in (1, 2, 4, 8)
)  # ROCm/k8s-device-plugin docs/user-guide/configuration.md, the mixed naming strategy
MAX_EXTRA_RESOURCE = 1_000_000
# Asked for with gpus / mig / shared, never as extra_resources.
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")
# The key of an extra resource: hugepages-SIZE, or an extended resource (domain/name) outside
# kubernetes.io that is not a GPU (_extra_resource_refusal says which rule a key breaks).
_GPU_RESOURCES = "|".join(p.replace(".", r"\.") for p in GPU_RESOURCE_PREFIXES)
EXTRA_RESOURCE_KEY = (
    rf"hugepages-{POSITIVE}"
    rf"|(?!hugepages-)(?!([-a-z0-9.]*\.)?kubernetes\.io/)(?!({_GPU_RESOURCES}))(?=[^/]+/)"
    + LABEL_KEY
)
DEFAULT_MASTER_PORT = 29500


def _extra_resource_refusal(name: str) -> Refusal | None:
    if name.startswith("hugepages-"):
        return Refusal("not a huge page size (e.g. hugepages-2Mi, hugepages-1Gi)")
    domain, _, _ = name.rpartition("/")
    if not domain or not k8s_names.label_key(name):
        return Refusal("not an extended resource name (domain/name, e.g. vpc.amazonaws.com/efa)")
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return Refusal("a Kubernetes resource is not an extra (extended) resource")
    if name.startswith(GPU_RESOURCE_PREFIXES):
        return Refusal("GPUs are asked for with gpus, mig or shared")
    return None


def _label_key_refusal(key: str) -> Refusal | None:
    if not k8s_names.label_key(key):
        return None  # the noun says it
    if key == QUEUE_LABEL:
        return Refusal(f"{key!r} is set by gpuctl: give the LocalQueue as queue:")
    owner = k8s_names.reserved_label(key)
    return Refusal(f"{key!r} is set by {owner}; a job spec may not set it") if owner else None


LABEL_VALUE_RULE = Rule(LABEL_VALUE, "a valid label value")

# Set by gpuctl on every worker of a multi-node job; a spec may not set them itself.
TORCHRUN_ENV = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    "NNODES",
    "NPROC_PER_NODE",
    "NODE_RANK",
)

TOLERATIONS = Table(
    Field("key", TEXT, "The taint's key (required with operator Equal).",
          pattern=Rule(LABEL_KEY, "a valid taint key")),
    Field("operator", TEXT, "Equal (key and value match) or Exists.", default="Equal",
          choices=("Exists", "Equal")),
    Field("value", TEXT, "The taint's value (operator Equal).",
          pattern=Rule(LABEL_VALUE, "a valid taint value")),
    Field("effect", TEXT, "The taint's effect; none: every effect.",
          choices=("NoSchedule", "PreferNoSchedule", "NoExecute")),
    Field("tolerationSeconds", INTEGER, "Effect NoExecute: how long the pod stays once tainted.",
          minimum=0, maximum=MAX_SECONDS),
)  # fmt: skip
TOPOLOGY = Table(
    Field("within", TEXT, "A name (" + ", ".join(TOPOLOGY_NAMES) + ": resolved from the labels "
          "the nodes carry) or a node label key.", required=True,
          pattern=Rule(LABEL_KEY, "a topology name (" + ", ".join(TOPOLOGY_NAMES) + ") or a "
                       "node label key")),
    Field("required", FLAG, "true: the pods wait for one domain with room for all of them; "
          "false: one domain is preferred.", default=True),
)  # fmt: skip
JOB = Table(
    Field("apiVersion", TEXT, "The job spec's version.", required=True, choices=(API_VERSION,)),
    Field("kind", TEXT, "Job (a batch Job: retries, a TTL, Kueue), Pod (a bare Pod) or "
          "Service (replicas behind a Service, autoscaled).", default="Job", choices=KINDS),
    Field("name", NAME, "The job's name; a multi-node job's starts with a letter.", required=True),
    Field("namespace", NAME, "Default: -n, the settings, else the kubeconfig context's."),
    Field("image", TEXT, "The container image.", required=True),
    Field("command", STRINGS, "The container's command (default: the image's entrypoint)."),
    Field("args", STRINGS, "Arguments to the command."),
    Field("env", STRING_MAP, "Environment variables; numbers and booleans are sent as text.",
          keys=Rule(ENV_VAR, "a valid environment variable name")),
    Field("gpus", INTEGER, "Devices per worker: whole GPUs, TPU chips, Neuron devices, Gaudis "
          "(default 1; 0 if mig is given; a TPU host's chips with tpu_topology).",
          minimum=0, maximum=MAX_GPUS_PER_WORKER),
    Field("accelerator", STRINGS, "The accelerator model(s) the nodes must have: an NVIDIA GPU "
          "(h100, a100-80gb), mi300x, trainium2, inferentia2, tpu-v5e, tpu-v6e, gaudi2, …",
          single=True, non_empty=True, pattern=Rule(LABEL_VALUE, "a valid node label value")),
    Field("gpu_type", STRINGS, "The same as accelerator (its older name).",
          single=True, non_empty=True, pattern=Rule(LABEL_VALUE, "a valid node label value")),
    Field("neuron_cores", INTEGER, "Instead of gpus, on Trainium or Inferentia: NeuronCores per "
          "worker (aws.amazon.com/neuroncore).", minimum=1, maximum=MAX_NEURON_CORES),
    Field("tpu_topology", TEXT, "A TPU slice's topology, e.g. 2x4 or 2x2x2: one worker per TPU "
          "host of the slice, each asking for its host's chips.",
          pattern=Rule(TPU_TOPOLOGY, "a TPU topology (2x4, 4x4, 2x2x2)")),
    Field("tpu_slices", INTEGER, "With tpu_topology: this many slices of it as one job "
          "(multislice: a JobSet, one Job per slice, with the MEGASCALE_* environment).",
          minimum=1, maximum=MAX_TPU_SLICES),
    Field("partition", TEXT, "AMD Instinct: one compute/memory partition per device asked for, "
          "e.g. cpx_nps4.", choices=AMD_PARTITIONS),
    Field("mig", TEXT, "Instead of gpus: one MIG slice of this profile, e.g. 1g.10gb."),
    Field("shared", FLAG, "Time-sliced GPUs (nvidia.com/gpu.shared).", default=False),
    Field("nodes", INTEGER, "Workers; more than 1 makes a multi-node data-parallel job.",
          default=1, minimum=1, maximum=MAX_NODES),
    Field("nproc_per_node", INTEGER, "torchrun processes per worker (default: gpus, or 1).",
          minimum=1, maximum=MAX_GPUS_PER_WORKER),
    Field("master_port", INTEGER, "The rendezvous port of a multi-node job.",
          default=DEFAULT_MASTER_PORT, minimum=1, maximum=65535),
    Field("cpu", QUANTITY, "CPU per worker (requests = limits), e.g. 8 or 500m."),
    Field("memory", QUANTITY, "Memory per worker (requests = limits), e.g. 64Gi."),
    Field("shm", QUANTITY, "Size of /dev/shm (in memory), e.g. 16Gi."),
    Field("ttl_after_finished", DURATION, "Job only: delete it this long after it finished."),
    Field("deadline", DURATION, "Stop it after this long (90s, 30m, 24h, 1h30m, 2d)."),
    Field("retries", INTEGER, "Job only: reruns after a failure (backoffLimit).",
          default=0, minimum=0, maximum=1000),
    Field("priority", TEXT, "A PriorityClass name.",
          pattern=Rule(DNS1123_SUBDOMAIN, "a valid PriorityClass name")),
    Field("scheduler", TEXT, "The pods' schedulerName, e.g. gpuctl-binpack.",
          pattern=Rule(DNS1123_SUBDOMAIN, "a valid scheduler name",
                       hint="the schedulerName of a kube-scheduler profile, e.g. gpuctl-binpack "
                       "(`gpuctl sched render`)")),
    Field("labels", STRING_MAP, "Labels added to every object.",
          keys=Rule(k8s_names.not_reserved_label((QUEUE_LABEL,)) + LABEL_KEY, "a valid label key",
                    why=_label_key_refusal),
          pattern=LABEL_VALUE_RULE),
    Field("tolerations", MAPPINGS, "Added to the default GPU toleration.", fields=TOLERATIONS),
    Field("service_account", TEXT, "A ServiceAccount name.",
          pattern=Rule(DNS1123_SUBDOMAIN, "a valid ServiceAccount name")),
    Field("image_pull_secrets", STRINGS, "Secrets to pull the image with.",
          pattern=Rule(DNS1123_SUBDOMAIN, "a valid Secret name")),
    Field("topology", MAPPING, "Keep a multi-node job's workers (a service's replicas) within "
          "one network domain: {within: block, required: true} (docs/topology.md).",
          fields=TOPOLOGY),
    Field("volumes", MAPPINGS, "Volumes mounted in the container.", fields=volumes.VOLUME),
    Field("secrets", MAPPINGS, "Secrets as variables or files.", fields=volumes.SECRET),
    Field("working_dir", TEXT, "The container's working directory (an absolute path)."),
    Field("node_selector", STRING_MAP, "The pods' nodeSelector: label -> value.",
          keys=Rule(LABEL_KEY, "a valid label key"), pattern=LABEL_VALUE_RULE, at_entry=True),
    Field("extra_resources", RESOURCES, "Devices beside GPUs (vpc.amazonaws.com/efa: 32) and "
          "huge pages (hugepages-2Mi: 1Gi).", maximum=MAX_EXTRA_RESOURCE,
          keys=Rule(EXTRA_RESOURCE_KEY, "an extra resource name", why=_extra_resource_refusal)),
    Field("template", TEXT, "A site template by name, or a path."),
    Field("queue", TEXT, "A Kueue LocalQueue (default: the namespace's only one).",
          pattern=Rule(DNS1123_SUBDOMAIN, "a valid LocalQueue name")),
    Field("multinode", TEXT, "How a multi-node job is made (default: jobset where the cluster "
          "has JobSet).", choices=MULTINODE),
    *service_spec.SERVICE,
)  # fmt: skip
FIELDS = JOB.names()


@dataclass(frozen=True)
class JobSpec:
    name: str
    image: str
    kind: str = "Job"
    namespace: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    gpus: int = 0
    gpu_type: tuple[str, ...] = ()  # NVIDIA GPU types (accelerator: or gpu_type:)
    accelerator: AcceleratorRequest | None = None  # another vendor's, instead of gpus
    mig: str | None = None
    shared: bool = False
    nodes: int = 1
    nproc_per_node: int | None = None
    master_port: int = DEFAULT_MASTER_PORT
    cpu: str | None = None
    memory: str | None = None
    shm: str | None = None
    ttl_after_finished: int | None = None
    deadline: int | None = None
    retries: int = 0
    priority: str | None = None
    scheduler: str | None = None  # the pods' schedulerName; None: the default scheduler
    labels: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()
    service_account: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    volumes: tuple[Volume, ...] = ()
    secrets: tuple[SecretUse, ...] = ()
    working_dir: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    # devices beside GPUs, e.g. ("vpc.amazonaws.com/efa", "32"), and huge pages
    extra_resources: tuple[tuple[str, str], ...] = ()
    queue: str | None = None  # Kueue LocalQueue; None: the namespace's only one, if any
    multinode: str | None = None  # jobset | indexed-job; None: decided by the cluster
    serving: Serving | None = None  # kind Service: ports, replicas, probes, autoscale
    topology: Constraint | None = None  # its pods within one network domain
    source: str = field(default="<input>", compare=False)

    @property
    def pods(self) -> int:
        """Pods at the start: a job's workers, a service's first replicas."""
        return self.serving.initial_replicas if self.serving else self.nodes

    @property
    def gpu_request(self) -> GpuRequest:
        """What each worker asks for, before the cluster says how it is offered."""
        return GpuRequest(self.gpus, self.mig, self.shared, self.gpu_type, self.accelerator)


def parse_job(doc: Doc) -> JobSpec:
    """The job spec DOC; its fields keep their rows' rules as they are read (Fields.read),
    and what spans several fields is checked here."""
    f = doc.root()
    kind = _kind(f)
    name, nodes = f.read(JOB["name"]), f.read(JOB["nodes"])
    image = f.read(JOB["image"])
    if any(ch.isspace() for ch in image):
        raise f.error("image", f"{image!r} contains white space")
    odd = next((ch for ch in image if not (ch.isascii() and ch.isprintable())), None)
    if odd is not None:  # an image reference is ASCII (distribution/reference's grammar)
        raise f.error(
            "image", f"{image!r} holds {odd!r} (U+{ord(odd):04X}): an image name is plain ASCII"
        )
    gpus = _gpus(f)
    nodes = gpus.pop("nodes", nodes)
    efa = gpus.pop("efa", 0)
    if kind == "Pod":
        _job_only(f, nodes)
    serving = service_spec.parse(f, name) if kind == "Service" else None
    if serving is None:
        service_spec.refuse_service_fields(f, kind)
    multinode = _multinode(f, name, nodes)
    if (accelerator := gpus.get("accelerator")) is not None and accelerator.slices > 1:
        multinode = vendor_spec.multislice_form(f, multinode, JOBSET)
    topology = _topology(f, nodes, serving, accelerator.slices if accelerator else 1)
    queue = f.read(JOB["queue"])
    extra, env = vendor_spec.with_efa(_extra_resources(f), _env(f, nodes), efa)
    job_volumes, job_secrets = volumes.parse(f, env, TORCHRUN_ENV if nodes > 1 else ())
    working_dir = f.read(JOB["working_dir"])
    if working_dir is not None and (problem := volumes.mount_problem(working_dir)):
        raise f.error("working_dir", problem)
    labels = f.read(JOB["labels"], {})
    namespace = f.read(JOB["namespace"])
    f.read(JOB["template"])  # already applied: gpuctl.jobs.core.templates merges it in before this
    return JobSpec(
        name=name,
        image=image,
        kind=kind,
        namespace=namespace,
        priority=f.read(JOB["priority"]),
        scheduler=f.read(JOB["scheduler"]),
        image_pull_secrets=tuple(f.read(JOB["image_pull_secrets"], [])),
        service_account=f.read(JOB["service_account"]),
        command=tuple(f.read(JOB["command"], [])),
        args=tuple(f.read(JOB["args"], [])),
        env=tuple(env.items()),
        **gpus,
        nodes=nodes,
        nproc_per_node=f.read(JOB["nproc_per_node"]),
        master_port=f.read(JOB["master_port"]),
        cpu=f.read(JOB["cpu"]),
        memory=f.read(JOB["memory"]),
        shm=f.read(JOB["shm"]),
        ttl_after_finished=f.read(JOB["ttl_after_finished"]),
        deadline=f.read(JOB["deadline"]),
        retries=f.read(JOB["retries"]),
        labels=tuple(labels.items()),
        tolerations=tuple(_tolerations(f)),
        volumes=job_volumes,
        secrets=job_secrets,
        working_dir=working_dir,
        node_selector=tuple(f.read(JOB["node_selector"], {}).items()),
        extra_resources=extra,
        queue=queue,
        multinode=multinode,
        serving=serving,
        topology=topology,
        source=doc.file,
    )


def _kind(f: Fields) -> str:
    """Job or Pod. What the document is comes first: a Kubernetes manifest or a cluster spec
    is said to be one, not refused for its first unknown field."""
    api = f.text("apiVersion")
    if api is not None and api != API_VERSION:
        raise f.error(
            "apiVersion",
            f"unsupported version {api!r}; this gpuctl reads {API_VERSION}",
            hint=None
            if api.startswith("gpuctl/")
            else "a job spec starts with apiVersion: gpuctl/v1; Kubernetes manifests go to "
            "kubectl apply",
        )
    kind: str = f.read(JOB["kind"])
    f.reject_unknown(JOB)
    f.read(JOB["apiVersion"])
    return kind


def _gpus(f: Fields) -> dict[str, Any]:
    """What each worker asks for: whole GPUs (time-shared or not) or one MIG slice, and of
    which GPU type; or another vendor's accelerators."""
    key, typed = _typed(f)
    vendor, models = _vendor(f, key, typed)
    if vendor is not None:
        return vendor_spec.parse(f, JOB, key, vendor, models)
    for name, owner in vendor_spec.VENDOR_FIELDS.items():
        if f.has(name):
            raise f.error(name, f"applies to {vendor_spec.VENDOR_WORDS[owner]} only")
    mig = f.read(JOB["mig"])
    shared = f.read(JOB["shared"])
    if mig is not None and f.has("gpus"):
        raise f.error("mig", "give either 'gpus' (whole GPUs) or 'mig' (one MIG slice), not both")
    if mig is not None and shared:
        raise f.error("shared", "a MIG slice cannot also be a time-shared GPU")
    if mig is not None and mig not in _mig_profile_names():
        raise f.error(
            "mig",
            f"{mig!r} is not a MIG profile of any known GPU",
            hint="e.g. 1g.10gb, 2g.20gb, 3g.40gb (see `gpuctl mig profiles`)",
        )
    gpus = f.read(JOB["gpus"], 0 if mig is not None else 1)
    if shared and gpus == 0:
        raise f.error("shared", "a shared GPU needs gpus ≥ 1")
    gpu_type = typed
    if mig is not None and gpu_type:
        _check_mig_on_gpu_type(f, mig, gpu_type)
    return {"mig": mig, "shared": shared, "gpus": gpus, "gpu_type": gpu_type}


def _typed(f: Fields) -> tuple[str, tuple[str, ...]]:
    """(the key, the accelerator types it names): accelerator, or its synonym gpu_type."""
    if f.has("accelerator") and f.has("gpu_type"):
        raise f.error("gpu_type", "is the same as accelerator: give one of them")
    key = "gpu_type" if f.has("gpu_type") else "accelerator"
    return key, tuple(f.read(JOB[key], ()))


def _vendor(f: Fields, key: str, typed: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """The vendor other than NVIDIA whose models TYPED names (None: NVIDIA's GPUs, or names
    gpuctl does not know, matched as label values), else the vendor a vendor-only field
    (neuron_cores, tpu_topology, partition) implies."""
    from gpuctl.gpus.vendor_models import models, models_named

    by_vendor: dict[str, list[str]] = {}
    found: list[str] = []
    for value in typed:
        named = models_named(value)
        vendor = models()[named[0]] if named else "nvidia"
        by_vendor.setdefault(vendor, []).append(value)
        found += named
    if len(by_vendor) > 1:
        words = "; ".join(f"{v}: {', '.join(names)}" for v, names in by_vendor.items())
        raise f.error(
            key,
            f"names accelerators of more than one vendor ({words}): a worker asks for one "
            "vendor's devices",
        )
    only = next(iter(by_vendor), None)
    if only not in (None, "nvidia"):
        return only, tuple(dict.fromkeys(found))
    implied = [(n, v) for n, v in vendor_spec.VENDOR_FIELDS.items() if f.has(n)]
    if implied and not typed:
        return implied[0][1], ()
    return None, ()


def _job_only(f: Fields, nodes: int) -> None:
    """What a bare Pod (kind Pod) cannot have."""
    for key in ("ttl_after_finished", "retries"):
        if f.has(key):
            raise f.error(key, "applies to kind Job only (a bare Pod has no retries or TTL)")
    if f.has("queue"):
        raise f.error("queue", "applies to kind Job only (Kueue admits Jobs and JobSets)")
    if nodes > 1:
        raise f.error("nodes", "a multi-node job must be kind Job")


def _multinode(f: Fields, name: str, nodes: int) -> str | None:
    """How a multi-node job is made, and whether its name can name its workers."""
    if nodes > 1 and not k8s_names.dns1035_label(name):
        raise f.error(
            "name",
            "a multi-node job's name must start with a letter "
            "(it also names the workers' headless Service)",
        )
    if nodes > 1 and len(name) + 1 + len(str(nodes - 1)) > 63:
        raise f.error(
            "name",
            f"too long for {nodes} workers: '{name}-{nodes - 1}' must fit "
            "in 63 characters (it is a worker's host name)",
        )
    # a single-node job has no multi-node form: a site template may set multinode for all
    multinode: str | None = f.read(JOB["multinode"])
    if nodes > 1 and multinode == JOBSET and (problem := jobset_name_problem(name, nodes)):
        raise f.error("name", problem, hint="a shorter name, or multinode: indexed-job")
    return multinode


def _topology(f: Fields, nodes: int, serving: Serving | None, slices: int) -> Constraint | None:
    """Where the pods must be together: only a job of several workers, or a service of
    several replicas, has pods to keep together."""
    t = f.child("topology")
    if t is None:
        return None
    if slices > 1:
        raise f.error(
            "topology",
            "a multislice TPU job already keeps each slice on a node pool of its own "
            "(JobSet's exclusive placement on cloud.google.com/gke-nodepool)",
        )
    t.reject_unknown(TOPOLOGY)
    constraint = Constraint(t.read(TOPOLOGY["within"]), t.read(TOPOLOGY["required"]))
    pods = serving.peak_replicas if serving is not None else nodes
    if pods < 2:
        what = "replica" if serving is not None else "worker (nodes: 1)"
        raise f.error(
            "topology",
            f"keeps several pods within one domain, and this {'service' if serving else 'job'}"
            f" has one {what}",
            hint="more replicas" if serving is not None else "nodes: N, or remove topology",
        )
    return constraint


def _env(f: Fields, nodes: int) -> dict[str, str]:
    env: dict[str, str] = f.read(JOB["env"], {})
    for key in env:
        if nodes > 1 and key in TORCHRUN_ENV:
            raise f.doc.error(
                f.path + ("env", key),
                f"{key} is set by gpuctl on every worker of a multi-node job",
            )
    return env


def jobset_name_problem(name: str, nodes: int) -> str | None:
    """Why NAME cannot name a JobSet of NODES workers (JobSet's webhook: the longest pod
    name, `<name>-workers-0-<last index>-<5 random characters>`, is a DNS-1035 label)."""
    longest = f"{name}-{JOBSET_WORKERS}-0-{nodes - 1}-xxxxx"
    if len(longest) <= 63:
        return None
    return (
        f"too long for a JobSet of {nodes} workers: its pods are named {longest!r}, "
        "which must fit in 63 characters"
    )


def _tolerations(f: Fields) -> list[dict[str, Any]]:
    out = []
    for t in f.list_of_maps("tolerations"):
        t.reject_unknown(TOLERATIONS)
        t.read(TOLERATIONS["operator"])  # an operator of neither kind is said first
        tol = {row.name: t.read(row) for row in TOLERATIONS}
        if tol["operator"] == "Exists" and tol["value"] is not None:
            raise t.error("value", "must be empty when operator is Exists")
        if tol["operator"] == "Equal" and tol["key"] is None:
            raise t.error("key", "is required when operator is Equal")
        if tol["tolerationSeconds"] is not None and tol["effect"] != "NoExecute":
            raise t.error("tolerationSeconds", "applies only with effect NoExecute")
        out.append({k: v for k, v in tol.items() if v is not None})
    return out


def _extra_resources(f: Fields) -> tuple[tuple[str, str], ...]:
    """Devices beside GPUs and huge pages. A count of 0 asks for none: a job can drop what a
    template adds."""
    amounts: dict[str, str] = f.read(JOB["extra_resources"], {})
    for name in amounts:
        if name.startswith("hugepages-") and not (f.has("cpu") or f.has("memory")):
            raise f.doc.error(
                f.path + ("extra_resources", name),
                "huge pages need cpu or memory set too (a Kubernetes rule)",
            )
    return tuple((name, amount) for name, amount in amounts.items() if parse_quantity(amount))


def _check_mig_on_gpu_type(f: Fields, mig: str, gpu_type: tuple[str, ...]) -> None:
    """A MIG profile that no GPU of the job's gpu_type has never schedules: the device plugin
    advertises only its own GPU's profiles. Judged only when every value names GPUs gpuctl
    knows (`h100` names both H100s)."""
    from gpuctl.gpus import geometry, names

    known: list[names.Named] = [*geometry.models(), *names.WITHOUT_MIG]
    meant = [names.candidates(v, known) for v in gpu_type]
    if not all(meant):
        return
    gpus = list(dict.fromkeys(m for found in meant for m in found))
    mig_gpus = [m for m in gpus if isinstance(m, geometry.GpuModel) and m.profiles]
    if any(m.has_profile(mig) for m in mig_gpus):
        return
    raise f.error(
        "mig",
        f"{mig!r} is not a MIG profile of {' or '.join(m.short_name for m in gpus)} "
        f"(gpu_type {', '.join(gpu_type)}): no such node offers it",
        hint="; ".join(
            f"{m.short_name} profiles: {', '.join(p.name for p in m.profiles)}" for m in mig_gpus
        )
        or "these GPUs have no MIG: ask for whole GPUs (gpus: N)",
    )


def gpu_type_warnings(doc: Doc, spec: JobSpec, label_key: str) -> list[str]:
    """For each gpu_type value that may match no node (gpuctl.gpus.names.gpu_type_warning):
    where it is, and why."""
    if not spec.gpu_type:
        return []
    from gpuctl.gpus import geometry, identity, names

    listed = isinstance(doc.data.get("gpu_type"), list)
    out = []
    for i, value in enumerate(spec.gpu_type):
        translated = label_key in (
            identity.GFD_PRODUCT,
            identity.KARPENTER_NAME,
            identity.GKE_ACCELERATOR,
            identity.INSTANCE_TYPE,
        )
        if translated and identity.models_for(value):
            why = None  # rendered as the values that scheme writes for the model
        elif label_key == "auto":
            why = (
                None
                if identity.models_for(value)
                else f"{value!r} matches no GPU gpuctl knows: the job only runs on nodes whose "
                f"GPU label ({identity.GFD_PRODUCT} or {identity.GPUCTL_TYPE}) is {value} exactly"
            )
        else:
            why = names.gpu_type_warning(value, label_key, geometry.models())
        if why:
            out.append(f"{doc.where(('gpu_type', i) if listed else ('gpu_type',))}: {why}")
    return out


def _mig_profile_names() -> frozenset[str]:
    # The geometry table is 86 KB of JSON: read it only for specs that ask for MIG.
    from gpuctl.gpus import geometry

    return geometry.all_profile_names()
