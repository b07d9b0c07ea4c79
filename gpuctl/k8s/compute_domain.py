"""Multi-node NVLink (GB200/GB300 NVL72 racks) through NVIDIA's DRA driver
(kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu): a job's
ComputeDomain and each worker's IMEX channel claim. Pure.

- The ComputeDomain (resource.nvidia.com/v1beta1; api/nvidia.com/resource/v1beta1/
  computedomain.go) names the ResourceClaimTemplate of its channel; the driver's controller
  makes that template (class compute-domain-default-channel.nvidia.com) and an IMEX daemon
  on every node a worker lands on. `numNodes` is the workers: with the driver's default
  IMEXDaemonsWithDNSNames it only sets when the domain reports Ready, without it (drivers
  before 25.8) the daemons wait for that many nodes.
- Each worker lists the template in `spec.resourceClaims` and its container claims it
  (`resources.claims`), beside its GPUs (a device plugin's limit or a DRA claim).
- The workers stay within one NVLink clique: nodes carry `nvidia.com/gpu.clique`
  (`<cluster UUID>.<clique id>`, from GPU Feature Discovery or the driver's kubelet plugin),
  and a required pod affinity on that key keeps them together, as the driver's install guide
  and EKS's P6e-GB200 guide do. Issue 40's `topology: {within: nvlink}` names the same
  key; on a cluster that serves the ComputeDomain it means a ComputeDomain too."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuctl.gpus import topology
from gpuctl.k8s import apis
from gpuctl.k8s.fit import FitReport, NodeFit
from gpuctl.k8s.labels import JOB_LABEL
from gpuctl.k8s.objects import labels_of, name_of

API_VERSION = apis.COMPUTE_DOMAIN_API_VERSION
KIND = "ComputeDomain"
DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
CLIQUE_LABEL = topology.CLIQUE
CHANNEL_CLAIM = "compute-domain-channel"  # the pod's claim of the channel
INSTALL = (
    "install NVIDIA's DRA driver with ComputeDomains (helm chart dra-driver-nvidia-gpu, "
    "resources.computeDomains.enabled=true)"
)


def channel_template(job: str) -> str:
    """The ResourceClaimTemplate the driver makes for JOB's ComputeDomain."""
    return f"{job}-channel"


def domain(job: str, workers: int, metadata: dict[str, Any]) -> dict[str, Any]:
    """JOB's ComputeDomain (named as the job, with METADATA's namespace and labels)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {**metadata, "name": job},
        "spec": {
            "numNodes": workers,
            "channel": {"resourceClaimTemplate": {"name": channel_template(job)}},
        },
    }


def join(pod: dict[str, Any], job: str) -> None:
    """Make POD (a worker of JOB) claim its IMEX channel and stay within the NVLink clique
    of the job's other workers, on nodes that are in one."""
    pod.setdefault("resourceClaims", []).append(
        {"name": CHANNEL_CLAIM, "resourceClaimTemplateName": channel_template(job)}
    )
    for c in pod.get("containers") or []:
        c.setdefault("resources", {}).setdefault("claims", []).append({"name": CHANNEL_CLAIM})
    affinity = pod.setdefault("affinity", {})
    in_clique = {"key": CLIQUE_LABEL, "operator": "Exists"}
    required = affinity.setdefault("nodeAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", {}
    )
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        term.setdefault("matchExpressions", []).append(dict(in_clique))
    together = {"labelSelector": {"matchLabels": {JOB_LABEL: job}}, "topologyKey": CLIQUE_LABEL}
    affinity.setdefault("podAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", []
    ).append(together)


def channel_templates(domains: list[dict[str, Any]]) -> dict[str, str]:
    """Each channel ResourceClaimTemplate the DOMAINS (ComputeDomains of one namespace) name
    → the ComputeDomain's name."""
    out = {}
    for d in domains:
        channel = ((d.get("spec") or {}).get("channel") or {}).get("resourceClaimTemplate") or {}
        if channel.get("name"):
            out[str(channel["name"])] = str((d.get("metadata") or {}).get("name") or "")
    return out


def within_one_clique(report: FitReport, nodes: list[dict[str, Any]]) -> FitReport:
    """REPORT under a ComputeDomain's rule, all workers within one NVLink clique: only the
    nodes of one clique count (the one with room for the job now, else the one with the
    most room on empty nodes); a node in no clique never does."""
    clique = {name_of(n): labels_of(n).get(CLIQUE_LABEL) for n in nodes}
    cliques: dict[str, list[NodeFit]] = {}
    for n in report.nodes:
        if c := clique.get(n.name):
            cliques.setdefault(c, []).append(n)
    room = {c: (sum(n.slots_now for n in fits), sum(n.slots_ever for n in fits)) for c, fits in cliques.items()}  # fmt: skip
    chosen = max(room, key=lambda c: (room[c][0] >= report.workers, room[c][1], room[c][0]), default=None)  # fmt: skip
    out = []
    for n in report.nodes:
        c = clique.get(n.name)
        if c == chosen or not n.slots_ever:
            out.append(n)
            continue
        why = f"in clique {c}, not {chosen}" if c else f"in no NVLink clique (no {CLIQUE_LABEL})"
        out.append(replace(n, slots_now=0, slots_ever=0, reason=why))
    refusal = report.refusal
    if chosen is None or room[chosen][1] < report.workers:
        rule = f"a ComputeDomain's workers stay within one NVLink clique ({CLIQUE_LABEL})"
        if chosen is None:
            found = f"{rule}, and no GPU node is in one"
        else:
            each = ", ".join(f"{c}: {ever}" for c, (_, ever) in sorted(room.items(), key=lambda kv: -kv[1][1]))  # fmt: skip
            found = f"{rule}; workers per clique at most: {each}"
        refusal = f"{refusal}; {found}" if refusal else found
    return replace(report, nodes=tuple(out), refusal=refusal)


def in_words(domain: dict[str, Any], template_exists: bool) -> list[str]:
    """What DOMAIN (a ComputeDomain as the API returns it) says of the workers that wait on
    it: its state and its IMEX daemons (status.nodes), and its channel's
    ResourceClaimTemplate when the driver's controller has not made it."""
    name = name_of(domain)
    status = domain.get("status") or {}
    joined = [n for n in status.get("nodes") or [] if isinstance(n, dict)]
    ready = sum(1 for n in joined if n.get("status") == "Ready")
    daemons = f"{ready} of {len(joined)} nodes' IMEX daemons ready" if joined else "no node's IMEX daemon has joined it yet"  # fmt: skip
    out = [f"ComputeDomain {name}: {status.get('status') or 'NotReady'}, {daemons}"]
    if not template_exists:
        template = channel_templates([domain]).keys()
        out.append(
            f"ComputeDomain {name}: its channel ResourceClaimTemplate {', '.join(template)} does "
            "not exist, and the workers wait for it: the DRA driver's compute-domain controller "
            "makes it (is it running?)"
        )
    return out
