"""make-room: the fewest pod evictions after which a waiting job's workers fit, each evicted
pod fitting elsewhere too. Pure: nodes, pods, PodDisruptionBudgets and owners in, a plan out.

The model is the fit check's (gpuctl.k8s.fit): per node the job's GPU resource (allocatable
minus what running pods request), taints and tolerations, node selectors, cordons. A unit of
eviction is a pod, or a whole gang (a JobSet's pods, an Indexed Job's, a Kueue pod group):
a gang is never split. A gang kept within one topology domain (required pod affinity on a
topology key to its own pods: gpuctl's `topology:`, JobSet's exclusive placement) keeps it:
the waiting job's workers all fit in one domain, and an evicted pod of such a gang fits
again only in the domain it was in (where the rest of its gang is). A pod is never evicted when nothing would recreate it (no
controller), when it keeps data on the node (emptyDir or hostPath volumes), when it is a
DaemonSet's, when gpuctl.k8s.marks says to leave it alone (marked gpuctl.io/evict: never or
gpuctl.io/reclaim: never, itself or an owner up its chain; an owner that could not be read),
or when a PodDisruptionBudget would not allow it (its status.disruptionsAllowed, counted
over all the plan's evictions).

Search: eviction sets by increasing number of pods evicted, the first whose job workers and
evicted pods can all be placed (an exact bin-packing check) wins, so the plan is the fewest
evictions; past a budget of sets tried it falls back to a greedy choice and says so.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from gpuctl.common.plan import Plan, Step
from gpuctl.common.quantity import count
from gpuctl.gpus.resources import DONE_PHASES, requested
from gpuctl.k8s import marks
from gpuctl.k8s.fit import tolerates
from gpuctl.k8s.nodes import GPU, allocatable, is_gpu_node, taints
from gpuctl.k8s.objects import Ref, controller_of, labels_of, name_of, namespace_of, uid_of
from gpuctl.k8s.pod_affinity import gang_keys
from gpuctl.k8s.selectors import label_selector_matches, may_run_on, required_terms
from gpuctl.reclaim.core.workloads import Obj

GANG_LABELS = ("jobset.sigs.k8s.io/jobset-name", "kueue.x-k8s.io/pod-group-name")
BUDGET = 20000  # eviction sets tried before the greedy fallback


@dataclass(frozen=True)
class Want:
    """What the waiting job needs: WORKERS pods of PER_WORKER of RESOURCE, on nodes whose
    labels match NODE_SELECTOR and NODE_TERMS (its required node affinity) and whose taints
    TOLERATIONS tolerate."""

    workers: int
    per_worker: int
    resource: str = GPU
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()
    what: str = ""
    node_terms: tuple[dict[str, Any], ...] | None = None  # required node affinity; None: none
    # topology keys all workers must share one value of (their required pod affinity)
    within: tuple[str, ...] = ()


@dataclass
class Unit:
    pods: list[Obj]
    name: str
    budgets: tuple[str, ...]  # the PDBs (namespace/name) its pods count against, one per pod
    frees: dict[int, int] = field(default_factory=dict)  # node index -> GPUs its eviction frees

    @property
    def size(self) -> int:
        return len(self.pods)


@dataclass
class RoomPlan:
    want: Want
    plan: Plan
    fits_now: bool
    found: bool
    proven: bool  # the fewest evictions (exact search finished)
    evicted: list[str] = field(default_factory=list)
    placement: dict[str, int] = field(default_factory=dict)  # node -> job workers
    moves: dict[str, str] = field(default_factory=dict)  # evicted pod -> node it fits on
    freed: dict[str, int] = field(default_factory=dict)  # node -> GPUs freed
    tried: int = 0
    unmovable: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "want": {"workers": self.want.workers, "per_worker": self.want.per_worker,
                     "resource": self.want.resource, "what": self.want.what},
            "fits_now": self.fits_now, "found": self.found, "fewest_proven": self.proven,
            "evictions": len(self.evicted), "evict": self.evicted, "placement": self.placement,
            "moves": self.moves, "freed": self.freed, "sets_tried": self.tried,
            "not_evictable": self.unmovable, "plan": self.plan.to_dict(),
        }  # fmt: skip


def _name(pod: Obj) -> str:
    return f"{namespace_of(pod) or 'default'}/{name_of(pod) or '?'}"


def _labels(pod: Obj) -> dict[str, str]:
    return dict(labels_of(pod))


def schedulable(
    node: Obj,
    node_selector: dict[str, str],
    tolerations: list[dict[str, Any]],
    node_terms: list[dict[str, Any]] | None = None,
) -> bool:
    """Whether a pod with NODE_SELECTOR, TOLERATIONS and the required node affinity
    NODE_TERMS (None: none) may go to NODE."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    if not may_run_on(node, node_selector, node_terms):
        return False
    return all(
        tolerates(t, tolerations) for t in taints(node) if t.get("effect") != "PreferNoSchedule"
    )


def why_not_evictable(pod: Obj, owners: dict[Ref, Obj]) -> str | None:
    ref = controller_of(pod)
    if ref is None:
        return marks.never(pod, owners) or "no controller would recreate it"
    if ref.get("kind") == "DaemonSet":
        return "a DaemonSet's pod"
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if "emptyDir" in v or "hostPath" in v:
            return f"keeps data on the node (volume {v.get('name')})"
    return marks.never(pod, owners)


def _budgets(pod: Obj, pdbs: list[Obj]) -> list[str]:
    """The PodDisruptionBudgets of the pod's namespace whose selector selects it (policy/v1:
    an empty selector every pod, a null one none)."""
    ns = namespace_of(pod) or "default"
    labels = _labels(pod)
    out = []
    for b in pdbs:
        if (namespace_of(b) or "default") != ns:
            continue
        if label_selector_matches((b.get("spec") or {}).get("selector"), labels):
            out.append(f"{ns}/{name_of(b)}")
    return out


def _gang(pod: Obj, owners: dict[Ref, Obj]) -> str | None:
    ns = namespace_of(pod) or "default"
    labels = _labels(pod)
    for key in GANG_LABELS:
        if labels.get(key):
            return f"{key}={ns}/{labels[key]}"
    ref = controller_of(pod) or {}
    if ref.get("kind") == "Job":
        job = owners.get(("Job", ns, ref.get("name", "")))
        if job and (job.get("spec") or {}).get("completionMode") == "Indexed":
            return f"Job {ns}/{ref.get('name')}"
    return None


def _node_selector(pod: Obj) -> dict[str, str]:
    return dict((pod.get("spec") or {}).get("nodeSelector") or {})


def _node_terms(pod: Obj) -> list[dict[str, Any]] | None:
    return required_terms(pod.get("spec") or {})


def _tolerations(pod: Obj) -> list[dict[str, Any]]:
    return list((pod.get("spec") or {}).get("tolerations") or [])


def _domain(node: Obj, keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """NODE's values of KEYS (None: it lacks one)."""
    labels = labels_of(node)
    return tuple(labels[k] for k in keys) if all(k in labels for k in keys) else None


def _same_domain(nodes: list[Obj], allowed: tuple[int, ...], home: int, keys: tuple[str, ...]) -> tuple[int, ...]:  # fmt: skip
    """Of ALLOWED, the nodes in the domain of KEYS node HOME is in: where an evicted pod of a
    gang kept within a domain may go back to (its gang's other pods stay there)."""
    if not keys:
        return allowed
    here = _domain(nodes[home], keys)
    return tuple(i for i in allowed if here is not None and _domain(nodes[i], keys) == here)


def plan(
    nodes: list[Obj], pods: list[Obj], pdbs: list[Obj], owners: dict[Ref, Obj], want: Want
) -> RoomPlan:
    r = want.resource
    gpu_nodes = [n for n in nodes if is_gpu_node(n) and count(allocatable(n).get(r, 0)) > 0]
    names = [name_of(n) or "?" for n in gpu_nodes]
    index = {name: i for i, name in enumerate(names)}
    free = [count(allocatable(n).get(r, 0)) for n in gpu_nodes]
    running = [p for p in pods if (p.get("spec") or {}).get("nodeName") in index
               and (p.get("status") or {}).get("phase") not in DONE_PHASES]  # fmt: skip
    for p in running:
        free[index[p["spec"]["nodeName"]]] -= requested(p, r)
    job_nodes = tuple(
        i for i, n in enumerate(gpu_nodes)
        if schedulable(n, dict(want.node_selector), list(want.tolerations),
                       None if want.node_terms is None else list(want.node_terms))
        and count(allocatable(n).get(r, 0)) >= want.per_worker
    )  # fmt: skip
    units, unmovable = _units(
        [p for p in running if requested(p, r) > 0], pdbs, owners, index, job_nodes, r
    )
    allowed = {
        _name(p): _same_domain(gpu_nodes, tuple(i for i, n in enumerate(gpu_nodes) if schedulable(n, _node_selector(p), _tolerations(p), _node_terms(p))), index[p["spec"]["nodeName"]], gang_keys(p))
        for u in units for p in u.pods
    }  # fmt: skip
    # the job's workers all in one domain of want.within (every node one domain without)
    domains: dict[tuple[str, ...], tuple[int, ...]] = {}
    for i in job_nodes:
        d = _domain(gpu_nodes[i], want.within)
        if d is not None:
            domains[d] = (*domains.get(d, ()), i)
    limits = {f"{namespace_of(b)}/{name_of(b)}":
              int((b.get("status") or {}).get("disruptionsAllowed") or 0) for b in pdbs}  # fmt: skip

    def attempt(chosen: tuple[Unit, ...]) -> tuple[list[int], dict[str, int]] | None:
        used: dict[str, int] = {}
        for u in chosen:
            for b in u.budgets:
                used[b] = used.get(b, 0) + 1
                if used[b] > limits.get(b, 0):
                    return None
        caps = list(free)
        evicted = [p for u in chosen for p in u.pods]
        for p in evicted:
            caps[index[p["spec"]["nodeName"]]] += requested(p, r)
        moved: list[tuple[int, tuple[int, ...], str | None]]
        moved = [(requested(p, r), allowed[_name(p)], _name(p)) for p in evicted]
        for _, members in sorted(domains.items()):
            workers: list[tuple[int, tuple[int, ...], str | None]]
            workers = [(want.per_worker, members, None)] * want.workers
            found = _pack(caps, workers + moved)
            if found is not None:
                return found
        return None

    result = RoomPlan(want, Plan(""), False, False, False, unmovable=unmovable)
    found = attempt(())
    if found is not None:
        result.fits_now = result.found = result.proven = True
        return _finish(result, (), found, names, index, r)

    def greedy() -> tuple[Unit, ...] | None:
        return _greedy(units, attempt, free, job_nodes, want.per_worker)

    chosen, proven, tried = _search(units, attempt, greedy)
    result.tried = tried
    if chosen is None:
        result.plan = Plan(f"make room for {want.what}", (), ("no set of evictions makes room",))
        result.proven = proven
        return result
    result.found, result.proven = True, proven
    placed = attempt(chosen)
    assert placed is not None
    return _finish(result, chosen, placed, names, index, r)


def _units(pods: list[Obj], pdbs: list[Obj], owners: dict[Ref, Obj], index: dict[str, int],
           job_nodes: tuple[int, ...], resource: str) -> tuple[list[Unit], list[str]]:  # fmt: skip
    """Eviction units that free the job's resource on a node it may use."""
    gangs: dict[str, list[Obj]] = {}
    unmovable = []
    for p in pods:
        key = _gang(p, owners) or f"pod {_name(p)}"
        gangs.setdefault(key, []).append(p)
    units = []
    for key, members in sorted(gangs.items()):
        if not any(index[p["spec"]["nodeName"]] in job_nodes for p in members):
            continue  # frees nothing the job could use
        why = next(filter(None, (why_not_evictable(p, owners) for p in members)), None)
        if why:
            unmovable.append(f"{key}: {why}")
            continue
        budgets = tuple(b for p in members for b in _budgets(p, pdbs))
        frees: dict[int, int] = {}
        for p in members:
            n = index[p["spec"]["nodeName"]]
            frees[n] = frees.get(n, 0) + requested(p, resource)
        units.append(Unit(members, key, budgets, frees))
    return units, unmovable


def _search(
    units: list[Unit], attempt: Any, greedy: Any
) -> tuple[tuple[Unit, ...] | None, bool, int]:
    """The eviction set of fewest pods that attempt() accepts: every set with k pods is
    tried before any with k + 1 (units of several pods count each pod). Sets looked at,
    tried or not, count against the budget, so a large cluster ends in the greedy plan."""
    tried = looked = 0
    total = sum(u.size for u in units)
    for pods in range(1, total + 1):
        for n in range(1, min(pods, len(units)) + 1):  # each unit holds a pod at least
            for chosen in itertools.combinations(units, n):
                looked += 1
                if looked > 20 * BUDGET:
                    return greedy(), False, tried
                if sum(u.size for u in chosen) != pods:
                    continue
                tried += 1
                if tried > BUDGET:
                    return greedy(), False, tried
                if attempt(chosen) is not None:
                    return chosen, True, tried
    return None, True, tried


def _greedy(
    units: list[Unit], attempt: Any, free: list[int], job_nodes: tuple[int, ...], per_worker: int
) -> tuple[Unit, ...] | None:
    """Past the budget: empty the nodes that need the fewest evictions for a worker first
    (on each, the units that free the most GPUs first), until attempt() accepts."""

    def on(n: int) -> list[Unit]:
        return sorted(
            (u for u in units if n in u.frees), key=lambda u: (-u.frees[n] / u.size, u.name)
        )

    def cost(n: int) -> tuple[int, int]:
        need, pods = per_worker - free[n], 0
        for u in on(n):
            if need <= 0:
                break
            need, pods = need - u.frees[n], pods + u.size
        return (pods if need <= 0 else 10**9, n)

    chosen: list[Unit] = []
    for n in sorted(job_nodes, key=cost):
        need = per_worker - free[n]
        for u in on(n):
            if need <= 0:
                break
            if u not in chosen:
                chosen.append(u)
            need -= u.frees[n]
        if attempt(tuple(chosen)) is not None:
            return tuple(chosen)
    return None


def _pack(
    caps: list[int], items: list[tuple[int, tuple[int, ...], str | None]]
) -> tuple[list[int], dict[str, int]] | None:
    """Place every item (size, nodes it may go to, name) within the nodes' free CAPS, or
    None: an exact search (largest first; equal capacities tried once)."""
    items = sorted(items, key=lambda it: -it[0])

    @lru_cache(maxsize=100000)
    def place(i: int, left: tuple[int, ...]) -> tuple[int, ...] | None:
        if i == len(items):
            return ()
        size, nodes, _ = items[i]
        for n in nodes:
            if left[n] < size:
                continue
            rest = list(left)
            rest[n] -= size
            tail = place(i + 1, tuple(rest))
            if tail is not None:
                return (n, *tail)
        return None

    found = place(0, tuple(caps))
    if found is None:
        return None
    moves = {name: n for (_, _, name), n in zip(items, found) if name is not None}
    jobs = [n for (_, _, name), n in zip(items, found) if name is None]
    return jobs, moves


def _finish(result: RoomPlan, chosen: tuple[Unit, ...], placed: tuple[list[int], dict[str, int]],
            names: list[str], index: dict[str, int], r: str) -> RoomPlan:  # fmt: skip
    jobs, moves = placed
    for n in jobs:
        result.placement[names[n]] = result.placement.get(names[n], 0) + 1
    steps = []
    for u in chosen:
        for p in u.pods:
            node, name = p["spec"]["nodeName"], _name(p)
            gpus = requested(p, r)
            result.freed[node] = result.freed.get(node, 0) + gpus
            result.evicted.append(name)
            result.moves[name] = names[moves[name]]
            why = f"frees {gpus} {r} on {node}; fits again on {names[moves[name]]}"
            if u.size > 1:
                why += f" (gang {u.name}: all {u.size} pods go)"
            ns, pod = name.split("/", 1)
            detail = {"namespace": ns, "name": pod, "node": node, "uid": uid_of(p)}
            steps.append(Step("evict", f"pod {name}", why, detail))
    where = ", ".join(f"{n} ×{k}" for n, k in sorted(result.placement.items()))
    notes = [f"the job's workers then fit on: {where}"]
    if not result.proven:
        notes.append(
            f"search stopped after {result.tried} sets: a greedy plan, maybe not the fewest"
        )
    result.plan = Plan(f"make room for {result.want.what}", tuple(steps), tuple(notes))
    return result


def parse_shape(text: str, resource: str) -> Want:
    """`2x8`: 2 workers of 8 GPUs each; `8`: one worker of 8."""
    from gpuctl.common.errors import UsageError
    from gpuctl.common.numbers import whole_number

    workers, _, per = text.lower().partition("x") if "x" in text.lower() else ("1", "", text)
    w, g = whole_number(workers.strip()), whole_number(per.strip())
    if not w or not g or w > 10000 or g > 1024:
        raise UsageError(f"--for: {text!r} is not a shape NxG (e.g. 2x8: 2 workers of 8 GPUs)")
    return Want(w, g, resource, what=f"{w}×{g} {resource}")


JOB_LABELS = ("batch.kubernetes.io/job-name", "job-name", "jobset.sigs.k8s.io/jobset-name")


def want_of_pods(name: str, pending: list[Obj]) -> Want | None:
    """The shape of a waiting job from its pending pods (the first GPU resource they ask
    for); None when it has none pending."""
    from gpuctl.gpus.resources import gpu_resources
    from gpuctl.k8s.nodes import is_gpu_resource

    mine = [p for p in pending if any(_labels(p).get(k) == name for k in JOB_LABELS)
            and not (p.get("spec") or {}).get("nodeName")]  # fmt: skip
    if not mine:
        return None
    first = mine[0]
    resources = sorted(r for r in gpu_resources(first) if is_gpu_resource(r))
    if not resources:
        return None
    r = resources[0]
    return Want(
        len(mine), requested(first, r), r, tuple(sorted(_node_selector(first).items())),
        tuple(_tolerations(first)), what=f"{name}: {len(mine)}×{requested(first, r)} {r}"
        + (f" within one {', '.join(keys)} domain" if (keys := gang_keys(first)) else ""),
        node_terms=None if (terms := _node_terms(first)) is None else tuple(terms),
        within=keys,
    )  # fmt: skip
