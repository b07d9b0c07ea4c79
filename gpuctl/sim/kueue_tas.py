"""Kueue's Topology Aware Scheduling, simulated for `gpuctl sandbox --kueue` enough to keep a
gang together: a pod set whose template asks `kueue.x-k8s.io/podset-required-topology` (or
`-preferred-topology`) a topology level is admitted only when one domain of that level (the
nodes sharing its label's value, among the flavor's nodes) has room for all its pods; the
smallest such domain is chosen (Kueue's BestFit), the assignment written as Kueue v1beta2
writes it (hostname level), and the job's pods pinned to the domain by a nodeSelector on the
level's label (Kueue's topology ungater pins each pod to its host instead). A preferred level
with no domain large enough admits the pods anywhere they fit. The flavor must name a
Topology listing the level (kubernetes-sigs/kueue pkg/cache/scheduler/tas_flavor_snapshot.go
words the refusals). Not simulated: slices, pod set groups, unconstrained, the levels between."""

from __future__ import annotations

from dataclasses import dataclass

from gpuctl.k8s.selectors import pod_may_run_on
from gpuctl.sim import cluster

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
HOSTNAME = "kubernetes.io/hostname"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"


def topology_request(template: dict) -> dict | None:
    """The pod set's spec.topologyRequest from its template's annotations (None: no TAS)."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    for annotation, field in ((REQUIRED, "required"), (PREFERRED, "preferred")):
        if annotations.get(annotation):
            return {field: annotations[annotation], "podIndexLabel": JOB_INDEX}
    return None


@dataclass(frozen=True)
class Placement:
    """Where a pod set goes: the level's label and domain it is pinned to (None: anywhere)
    and the pods per node."""

    key: str
    domain: str | None
    pods: dict[str, int]

    def assignment(self) -> dict:
        """Its status.admission.podSetAssignments[].topologyAssignment (v1beta2)."""
        names = sorted(self.pods)
        counts = [self.pods[n] for n in names]
        one = len(names) == 1
        return {
            "levels": [HOSTNAME],
            "slices": [
                {
                    "domainCount": len(names),
                    "podCounts": {"universal": counts[0]} if one else {"individual": counts},
                    "valuesPerLevel": [
                        {"universal": names[0]} if one else {"individual": {"roots": names}}
                    ],
                }
            ],
        }


def flavor_refusal(request: dict | None, flavor: dict, group_flavors: list[dict]) -> str | None:
    """Why Kueue skips FLAVOR (one of a resource group's GROUP_FLAVORS) for a pod set with
    REQUEST (tas_flavorassigner.go): a TAS request needs a flavor with a topology; a pod set
    without one may use a TAS flavor only when every flavor of the group has a topology."""
    name = (flavor.get("metadata") or {}).get("name")
    has = bool((flavor.get("spec") or {}).get("topologyName"))
    if request is not None and not has:
        return f'Flavor "{name}" does not support TopologyAwareScheduling'
    every = all((f.get("spec") or {}).get("topologyName") for f in group_flavors)
    if request is None and has and not every:
        return f'Flavor "{name}" supports only TopologyAwareScheduling'
    return None


def place(
    request: dict,
    count: int,
    template: dict,
    flavor: dict,
    topologies: dict[str, dict],
    nodes: list[dict],
    free: dict[str, dict[str, int]],
) -> Placement | str:
    """Where COUNT pods of TEMPLATE go under REQUEST on FLAVOR's nodes, whose FREE resources
    are given per node; or why they cannot (Kueue's words)."""
    spec = flavor.get("spec") or {}
    name = str(spec.get("topologyName"))
    key = str(request.get("required") or request.get("preferred"))
    flavor_name = (flavor.get("metadata") or {}).get("name")
    levels = [lv.get("nodeLabel") for lv in ((topologies.get(name) or {}).get("spec") or {}).get("levels") or []]  # fmt: skip
    if key not in levels:
        return f'Flavor "{flavor_name}" does not contain the requested level'
    per_pod = {r: n for r, n in cluster.requests({"spec": template.get("spec") or {}}).items() if n}
    fits: dict[str, dict[str, int]] = {}  # domain -> node -> pods that fit there
    wanted = spec.get("nodeLabels") or {}
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        if key not in labels or any(labels.get(k) != v for k, v in wanted.items()):
            continue
        if (node.get("spec") or {}).get("unschedulable") or not pod_may_run_on(template.get("spec") or {}, node):  # fmt: skip
            continue
        room = free.get(node["metadata"]["name"], {})
        n = min((room.get(r, 0) // a for r, a in per_pod.items()), default=count)
        if n > 0:
            fits.setdefault(labels[key], {})[node["metadata"]["name"]] = n
    sizes = {d: sum(f.values()) for d, f in fits.items()}
    enough = sorted((size, d) for d, size in sizes.items() if size >= count)
    if enough:
        domain = enough[0][1]
        return Placement(key, domain, _fill(fits[domain], count))
    everywhere = {n: k for f in fits.values() for n, k in f.items()}
    if "preferred" in request and sum(everywhere.values()) >= count:
        return Placement(key, None, _fill(everywhere, count))
    most = max(sizes.values(), default=0)
    if most == 0:
        return f'topology "{name}" doesn\'t allow to fit any of {count} pod(s)'
    return f'topology "{name}" allows to fit only {most} out of {count} pod(s)'


def _fill(fits: dict[str, int], count: int) -> dict[str, int]:
    """COUNT pods on as few of these nodes as they fit on (the roomiest first)."""
    out: dict[str, int] = {}
    for node, room in sorted(fits.items(), key=lambda nr: (-nr[1], nr[0])):
        if count <= 0:
            break
        out[node] = min(room, count)
        count -= out[node]
    return out


def free_resources(nodes: list[dict], pods: list[dict]) -> dict[str, dict[str, int]]:
    """Per node, its allocatable less what its unfinished pods request."""
    used = cluster.in_use(pods)
    out = {}
    for node in nodes:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        mine = used.get(node["metadata"]["name"], {})
        out[node["metadata"]["name"]] = {r: cluster.amount(v, r) - mine.get(r, 0) for r, v in alloc.items()}  # fmt: skip
    return out


def take(free: dict[str, dict[str, int]], placement: Placement, template: dict) -> None:
    """Count the placement's pods against FREE (pods admitted in the same tick)."""
    per_pod = cluster.requests({"spec": template.get("spec") or {}})
    for node, n in placement.pods.items():
        room = free.setdefault(node, {})
        for r, a in per_pod.items():
            room[r] = room.get(r, 0) - a * n
