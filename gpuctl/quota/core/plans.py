"""What `gpuctl quota set` will do, from what the cluster holds: which engine carries the
quota, the objects created or updated (a ResourceQuota, or Kueue's ResourceFlavors,
ClusterQueue and LocalQueue) with the fields that change, and the question to ask before
replacing a quota. Each plan offers its steps as a gpuctl.common.plan.Plan. Pure: what the
cluster holds comes in as the API returns it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.plan import Plan, Step
from gpuctl.gpus import topology
from gpuctl.k8s import apis
from gpuctl.k8s.labels import managed_by_gpuctl
from gpuctl.k8s.nodes import is_accelerator_node
from gpuctl.k8s.objects import labels_of, name_of, namespace_of
from gpuctl.quota.core import kueue, kueue_topology
from gpuctl.quota.core import rules as core

Change = tuple[str, str | None, str | None]

KUEUE, RESOURCE_QUOTA = "kueue", "resourcequota"
INSTALL_KUEUE = (
    "install Kueue (kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/"
    "releases/download/v0.19.2/manifests.yaml) or use --engine resourcequota"
)


def no_kueue() -> GpuctlError:
    return GpuctlError(
        "this cluster has no Kueue (it serves no kueue.x-k8s.io API)", hint=INSTALL_KUEUE
    )


_KUEUE_OFFLINE = (
    "engine: kueue, as no cluster says which (--engine resourcequota for a ResourceQuota)"
)
_NO_KUEUE_YET = "Kueue is not installed: these objects could not be created yet"


@dataclass(frozen=True)
class Engine:
    """Which engine carries the quota, the Kueue version spoken, and what to say about it."""

    name: str
    version: str | None = None
    notes: tuple[str, ...] = ()


def choose_engine(
    asked: str | None, online: bool, version: str | None, kueue_options: list[str], dry_run: bool
) -> Engine:
    """The engine ASKED for, else Kueue where the cluster serves it (VERSION), else a
    ResourceQuota; without a cluster (not ONLINE) Kueue, said so. KUEUE_OPTIONS are the
    Kueue-only options given, which need Kueue. Only a dry run may plan Kueue objects for a
    cluster without Kueue."""
    if not online:
        return Engine(asked or KUEUE, None, () if asked else (_KUEUE_OFFLINE,))
    name = asked or (KUEUE if version else RESOURCE_QUOTA)
    if asked is None and name == RESOURCE_QUOTA and kueue_options:
        raise UsageError(
            f"{', '.join(kueue_options)} need Kueue, which this cluster does not have",
            hint=INSTALL_KUEUE,
        )
    if name == KUEUE and version is None:
        if not dry_run:
            raise no_kueue()
        return Engine(name, None, (_NO_KUEUE_YET,))
    return Engine(name, version)


# --- the ResourceQuota engine ------------------------------------------------------------


@dataclass(frozen=True)
class QuotaPlan:
    """A namespace's ResourceQuota: the namespace created if missing, the quota created or
    its hard limits replaced."""

    team: str
    create_namespace: bool
    current: dict[str, str] | None  # the existing quota's spec.hard, None if there is none
    desired: dict[str, str]
    notes: tuple[str, ...] = ()

    @property
    def changes(self) -> list[Change]:
        return core.diff(self.current, self.desired)

    @property
    def quota_action(self) -> str:
        if self.current is None:
            return "create"
        return "update" if self.changes else "unchanged"

    @property
    def quota_name(self) -> str:
        return f"{self.team}/{core.QUOTA_NAME}"

    def objects(self) -> list[dict[str, Any]]:
        """What gpuctl creates or updates (an existing namespace is left as it is)."""
        ns = [core.namespace_object(self.team)] if self.create_namespace else []
        return ns + [core.quota_object(self.team, self.desired)]

    @property
    def question(self) -> str | None:
        """What to ask before carrying it out (None: nothing is replaced, no question)."""
        if self.quota_action != "update":
            return None
        return f"Replace the hard limits of ResourceQuota {self.quota_name}?"

    @property
    def plan(self) -> Plan:
        steps = []
        if self.create_namespace:
            steps.append(
                Step(
                    "create",
                    f"Namespace {self.team}",
                    "the team's namespace does not exist",
                    {"object": core.namespace_object(self.team)},
                )
            )
        quota = core.quota_object(self.team, self.desired)
        if self.quota_action == "create":
            steps.append(
                Step(
                    "create",
                    f"ResourceQuota {self.quota_name}",
                    "the team's GPU quota",
                    {"object": quota},
                )
            )
        elif self.quota_action == "update":
            steps.append(
                Step(
                    "patch",
                    f"ResourceQuota {self.quota_name}",
                    "its hard limits are replaced",
                    {"object": quota, "changes": [list(c) for c in self.changes]},
                )
            )
        return Plan(f"quota of team {self.team}", tuple(steps), self.notes)


def plan_resource_quota(
    team: str,
    gpus: int,
    mig: dict[str, int],
    namespace_exists: bool,
    current_hard: dict[str, str] | None,
    dra_classes: tuple[str, ...] = (),
    others: tuple[str, ...] = (),
) -> QuotaPlan:
    """The plan for a namespace that exists or not, whose quota has CURRENT_HARD (None: no
    quota), on a cluster whose DRA_CLASSES have devices and whose nodes offer OTHERS (other
    vendors' device resources). Without a cluster, neither exists."""
    desired = core.hard(gpus, mig, dra_classes, others)
    return QuotaPlan(team, not namespace_exists, current_hard, desired)


def change_text(change: Change) -> str:
    """`requests.nvidia.com/gpu: 4 → 8`; `(none)` before a new field, `(removed)` after one
    that goes."""
    key, old, new = change
    was = old if old is not None else "(none)"
    now = new if new is not None else "(removed)"
    return f"{key}: {was} → {now}"


# --- the Kueue engine ------------------------------------------------------------------


@dataclass
class ObjectStep:
    """One object of a Kueue plan: what is wanted, and what is done about it."""

    obj: dict[str, Any]
    action: str  # create | update | unchanged | reused
    changes: list[Change] = field(default_factory=list)
    current: dict[str, Any] | None = None  # the object as it was, for an update

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        ns, name = namespace_of(self.obj), name_of(self.obj)
        return f"{ns}/{name}" if ns else name

    @property
    def changing(self) -> bool:
        return self.action in ("create", "update")

    def step(self) -> Step:
        """The plan's step for this object (only for one that changes)."""
        target = f"{self.kind} {self.name}"
        if self.action == "create":
            return Step("create", target, _WHY[self.kind], {"object": self.obj})
        return Step(
            "patch",
            target,
            f"{len(self.changes)} field(s) gpuctl manages change",
            {"object": self.obj, "changes": [list(c) for c in self.changes]},
        )


_WHY = {
    "Namespace": "the team's namespace does not exist",
    "ResourceFlavor": "the GPU nodes of one type, which the quota is given on",
    "ClusterQueue": "the team's quota, per flavor",
    "LocalQueue": "where the team's jobs queue, in its namespace",
    "Topology": "the nodes' network levels, widest first, by which Kueue keeps a gang together",
}


@dataclass(frozen=True)
class KueueWorld:
    """What the cluster holds that a Kueue plan depends on (without a cluster: nothing)."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    namespace_exists: bool = False
    flavors: list[dict[str, Any]] = field(default_factory=list)  # existing ResourceFlavors
    cluster_queue: dict[str, Any] | None = None
    local_queue: dict[str, Any] | None = None
    # existing Topologies (None: this Kueue serves none), and the apiVersion to create one at
    topologies: list[dict[str, Any]] | None = field(default_factory=list)
    topology_version: str | None = None


@dataclass
class KueuePlan:
    quota: kueue.TeamQuota
    version: str
    flavors: list[kueue.Flavor]
    steps: list[ObjectStep]
    notes: tuple[str, ...] = ()

    @property
    def changes_anything(self) -> bool:
        return any(s.changing for s in self.steps)

    def objects(self) -> list[dict[str, Any]]:
        """What gpuctl creates or updates (existing objects it reuses are left out)."""
        return [s.obj for s in self.steps if s.changing]

    @property
    def question(self) -> str | None:
        updated = [f"{s.kind} {s.name}" for s in self.steps if s.action == "update"]
        return f"Replace the quota of {', '.join(updated)}?" if updated else None

    @property
    def plan(self) -> Plan:
        return Plan(
            f"Kueue queues of team {self.quota.team}",
            tuple(s.step() for s in self.steps if s.changing),
            self.notes,
        )


def plan_kueue(
    q: kueue.TeamQuota,
    label_key: str,
    gpu_types: tuple[str, ...],
    version: str | None,
    world: KueueWorld,
) -> KueuePlan:
    """What `quota set` does with Kueue on a cluster holding WORLD (VERSION None: the version
    gpuctl prefers). Refuses (GpuctlError) to change a queue gpuctl does not manage."""
    version = version or apis.KUEUE_VERSIONS[0]
    steps: list[ObjectStep] = []
    if not world.namespace_exists:
        steps.append(ObjectStep(core.namespace_object(q.team), "create"))
    used = []
    flavors = kueue.flavors_for(world.nodes, label_key, gpu_types)
    if len(flavors) > 1 and not q.per_type:
        types = ", ".join(f.gpu_type or f.name for f in flavors)
        raise UsageError(
            f"{len(flavors)} GPU types ({types}): Kueue counts --gpus {q.gpus} on each, "
            f"so the team would get {q.gpus} of every type ({q.gpus * len(flavors)} in all)",
            hint="name one type with --gpu-type, or say --gpus-per-type to give that many of each",
        )
    tied = _Topologies(world, version, flavors)
    flavor_steps = []
    for f in flavors:
        reused = kueue.reuse_flavor(world.flavors, f)
        theirs = _found(world.flavors, reused) if reused is not None else None
        # one that selects the same nodes is used as it is, unless gpuctl made it
        if theirs is not None and (reused != f.name or not managed_by_gpuctl(theirs)):
            flavor_steps.append(ObjectStep(theirs, "reused"))
            used.append(replace(f, name=str(reused)))
            continue
        current = _found(world.flavors, f.name)
        f = tied.tie(f, current)
        desired = {**f.object(), "apiVersion": apis.kueue_api_version(version)}
        flavor_steps.append(_step(desired, current))
        used.append(f)
    steps += tied.steps() + flavor_steps
    steps.append(_step(kueue.cluster_queue(q, used, version), world.cluster_queue))
    steps.append(_step(kueue.local_queue(q.team, version), world.local_queue))
    notes = tied.notes + tuple(note for f in flavors if (note := f.left_out_note()))
    outside = kueue.outside_note(world.nodes, flavors, label_key, gpu_types)
    notes += (outside,) if outside else ()
    return KueuePlan(q, version, used, steps, notes)


_NO_TOPOLOGY_API = (
    "this Kueue serves no Topology (Kueue 0.9 and later do): the flavors are not tied to "
    "the nodes' network topology, so Kueue cannot keep a gang within one block"
)


class _Topologies:
    """Which Topology each flavor gpuctl makes or updates names, and the Topologies to
    create (gpuctl.quota.core.kueue_topology). Only when some flavor's nodes carry a network
    level; then every flavor with nodes is tied to one."""

    def __init__(self, world: KueueWorld, version: str, flavors: list[kueue.Flavor]):
        self.world = world
        self.notes: tuple[str, ...] = ()
        self.api_version = world.topology_version or apis.kueue_api_version(version)
        gpu_nodes = [n for n in world.nodes if is_accelerator_node(n)]
        self.levels: dict[str, list[str]] = {}
        for f in flavors:
            want = f.node_labels().items()
            members = [n for n in gpu_nodes if want <= labels_of(n).items()]
            if f.gpu_type is not None and members:
                self.levels[f.name] = kueue_topology.levels_of(members)
        everyone = kueue_topology.levels_of(gpu_nodes)
        self.wanted = bool(kueue_topology.network_levels(everyone))
        self.chosen: dict[str, tuple[dict[str, Any] | None, list[str]]] = {}
        if self.wanted and world.topologies is None:
            self.wanted, self.notes = False, (_NO_TOPOLOGY_API,)
        if self.wanted and any(f.gpu_type is None for f in flavors):
            self.notes = (
                f"ResourceFlavor {kueue.ALL_GPUS_FLAVOR} selects its nodes by no label, and "
                "Kueue ties only a flavor with nodeLabels to a Topology: give --gpu-label-key "
                "for Kueue to keep gangs within a block",
            )

    def tie(self, f: kueue.Flavor, current: dict[str, Any] | None) -> kueue.Flavor:
        """F naming its Topology: the one CURRENT names (Kueue never changes it: then neither
        its nodeLabels nor its tolerations may change), else one of its nodes' levels."""
        held = ((current or {}).get("spec") or {}).get("topologyName")
        if held:
            tied = replace(f, topology=str(held))
            changed = [c for c in kueue.flavor_changes(current or {}, tied.object()) if c[0] in ("nodeLabels", "tolerations")]  # fmt: skip
            if changed:
                raise GpuctlError(
                    f"ResourceFlavor {f.name} is tied to Topology {held}, and Kueue then lets "
                    f"neither its nodeLabels nor its tolerations change ({changed[0][0]}: "
                    f"{changed[0][1]} → {changed[0][2]})",
                    hint=f"delete it (kubectl delete resourceflavor {f.name}) and run again",
                )
            found = _found(self.world.topologies or [], str(held))
            if found is not None:
                self.chosen.setdefault(str(held), (found, topology.kueue_levels(found)))
            elif self.world.topologies is not None:
                self.notes += (f"ResourceFlavor {f.name} names Topology {held}, which does not exist: Kueue admits nothing onto it",)  # fmt: skip
            return tied
        levels = self.levels.get(f.name)
        if not self.wanted or levels is None or f.gpu_type is None:
            return f
        found = kueue_topology.same_levels(self.world.topologies or [], levels)
        name = name_of(found) if found is not None else kueue_topology.name_for(levels)
        self.chosen.setdefault(name, (found, levels))
        return replace(f, topology=name)

    def steps(self) -> list[ObjectStep]:
        out = []
        for _, (found, levels) in sorted(self.chosen.items()):
            if found is not None:  # its levels never change: gpuctl's own is as wanted
                out.append(ObjectStep(found, "unchanged" if managed_by_gpuctl(found) else "reused"))
            else:
                obj = kueue_topology.topology_object(levels, self.api_version)
                out.append(ObjectStep(obj, "create", object_changes({}, obj)))
        return out


def object_changes(current: dict[str, Any], desired: dict[str, Any]) -> list[Change]:
    """(field, old, new) for the fields gpuctl manages on a Kueue object (CURRENT as read,
    or {} for none)."""
    changes_of = _CHANGES.get(str(desired["kind"]))
    return changes_of(current, desired) if changes_of else []


def _local_queue_changes(current: dict[str, Any], desired: dict[str, Any]) -> list[Change]:
    now = (current.get("spec") or {}).get("clusterQueue")
    return core.diff(
        {} if now is None else {"clusterQueue": str(now)},
        {"clusterQueue": desired["spec"]["clusterQueue"]},
    )


_CHANGES: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[Change]]] = {
    "ResourceFlavor": kueue.flavor_changes,
    "ClusterQueue": lambda cur, want: kueue.cluster_queue_changes(
        cur.get("spec") or {}, want["spec"]
    ),
    "LocalQueue": _local_queue_changes,
    "Topology": lambda cur, want: core.diff(
        kueue_topology.flat(cur) if cur else {}, kueue_topology.flat(want)
    ),
}


def _found(objects: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((o for o in objects if name_of(o) == name), None)


def _step(desired: dict[str, Any], current: dict[str, Any] | None) -> ObjectStep:
    if current is None:
        return ObjectStep(desired, "create", object_changes({}, desired))
    step = ObjectStep(desired, "update", object_changes(current, desired), current)
    if not managed_by_gpuctl(current):
        raise GpuctlError(
            f"{step.kind} {step.name} exists and is not managed by gpuctl; leaving it alone",
            hint="delete or rename it, or manage that team's queues with kubectl",
        )
    if not step.changes:
        step.action = "unchanged"
    return step


SetPlan = QuotaPlan | KueuePlan


def with_notes(plan: SetPlan, notes: tuple[str, ...]) -> SetPlan:
    return replace(plan, notes=plan.notes + notes)
