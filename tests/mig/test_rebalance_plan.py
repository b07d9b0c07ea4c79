"""The rebalance planner against an exhaustive search on small clusters: every way the idle
GPUs could be laid out (layouts enumerated by tests/mig/exhaustive.py, independently of
gpuctl's), scored as the issue asks: the most pending demand placed, then the fewest GPUs
changed; GPUs that may hold a running pod never change."""

import itertools
import random
from collections import Counter

import pytest

from gpuctl.gpus.geometry import find_model
from gpuctl.mig.core.rebalance import DISABLED, WHOLE, Layout, NodeNow, Pending, plan
from tests.mig import exhaustive


def layouts(model):
    return sorted(
        (Layout(True, dict(lay)) for lay in exhaustive.gpu_layouts(model.nvml_name) if lay),
        key=lambda lay: lay.key(),
    )


def busy(gpu, running):
    offers = gpu.offers()
    return any(offers[k] for use in running.values() for k in use)


def best(nodes, demand):
    """(most slices placed, fewest GPUs changed) over every layout of every GPU no pod
    outside --drain's cover may be on; what covered pods use must stay offered over the
    cluster (they come back). Without --drain no pod is covered: only idle GPUs change."""
    evictable = {k for n in nodes for p in n.covered for k in n.running[p]}
    keys = set(demand) | evictable
    used = Counter()
    for n in nodes:
        for use in n.running.values():
            used.update(use)
    fixed, choices = Counter(), []
    for n in nodes:
        pinned = {p: u for p, u in n.running.items() if p not in n.covered}
        for gpu in n.gpus.values():
            if busy(gpu, pinned):
                fixed.update(gpu.offers())
                continue
            seen = {}
            for lay in [DISABLED, *layouts(n.model)]:
                proj = tuple(sorted((k, v) for k, v in lay.offers().items() if k in keys))
                if lay != gpu:
                    seen.setdefault(proj, (1, proj))
            now = tuple(sorted((k, v) for k, v in gpu.offers().items() if k in keys))
            choices.append([(0, now), *seen.values()])
    top = None
    for combo in itertools.product(*choices):
        supply = Counter(fixed)
        for _, proj in combo:
            supply.update(dict(proj))
        if any(supply[k] < used[k] for k in evictable):
            continue  # an evicted pod would have nowhere to go
        placed = sum(min(n, max(0, supply[k] - used[k])) for k, n in demand.items())
        score = (placed, -sum(c for c, _ in combo))
        top = score if top is None or score > top else top
    return top


def score(nodes, demand, result):
    used, supply = Counter(), Counter()
    changed = 0
    after = {c.node: c.after for c in result.changes}
    for n in nodes:
        for use in n.running.values():
            used.update(use)
        for i, gpu in n.gpus.items():
            new = after.get(n.name, n.gpus)[i]
            supply.update(new.offers())
            changed += new != gpu
    return sum(min(v, max(0, supply[k] - used[k])) for k, v in demand.items()), -changed


def random_cluster(rng, model, gpus_total):
    nodes, left, i = [], gpus_total, 0
    options = [DISABLED, *layouts(model)]
    while left:
        k = rng.randint(1, min(2, left))
        left -= k
        gpus = {g: rng.choice(options) for g in range(k)}
        offered = [p for lay in gpus.values() for p, n in lay.offers().items() for _ in range(n)]
        rng.shuffle(offered)
        running = {f"ns/run-{i}-{j}": {p: 1} for j, p in enumerate(offered[: rng.randint(0, 2)])}
        nodes.append(NodeNow(f"n{i}", model, "mixed", "x", gpus, running))
        i += 1
    return nodes


def random_pending(rng, model):
    names = [p.name for p in model.profiles] + [WHOLE]
    pods = []
    for i in range(rng.randint(1, 5)):
        pods.append(Pending(f"ns/p{i}", {rng.choice(names): 1}))
    return pods


@pytest.mark.parametrize(
    "model_name,gpus,cases", [("A30", 4, 40), ("A100-40GB", 3, 25), ("H100-80GB", 2, 15)]
)
def test_plan_matches_the_exhaustive_optimum(model_name, gpus, cases):
    model = find_model(model_name)
    rng = random.Random(28)
    for _ in range(cases):
        nodes = random_cluster(rng, model, gpus)
        pending = random_pending(rng, model)
        demand = sum((Counter(p.wants) for p in pending), Counter())
        result = plan(nodes, pending)
        assert score(nodes, demand, result) == best(nodes, demand), (nodes, pending)
        for c in result.changes:  # no GPU that may hold a running pod changes
            n = next(n for n in nodes if n.name == c.node)
            for i in c.changed:
                assert not busy(n.gpus[i], n.running)
        placed, _ = best(nodes, demand)
        if placed == sum(demand.values()):  # all of it can be served: all of it is
            assert result.unplaced == ()


def test_single_strategy_nodes_change_whole_and_only_when_idle():
    model = find_model("A100-40GB")
    one = Layout(True, {"1g.5gb": 7})
    idle = NodeNow("idle", model, "single", "all-1g.5gb", {0: one, 1: one})
    busy_node = NodeNow(
        "busy", model, "single", "all-1g.5gb", {0: one, 1: one}, {"ns/r": {"1g.5gb": 1}}
    )
    result = plan(
        [busy_node, idle], [Pending("ns/a", {"3g.20gb": 1}), Pending("ns/b", {"3g.20gb": 1})]
    )
    (change,) = result.changes
    assert change.node == "idle"
    assert {lay.key() for lay in change.after.values()} == {(True, (("3g.20gb", 2),))}
    assert change.unblocks == ("ns/a", "ns/b")


def test_nothing_pending_changes_nothing():
    model = find_model("A30")
    n = NodeNow("a", model, "mixed", "x", {0: DISABLED})
    result = plan([n], [])
    assert result.changes == () and result.gpus_changed == 0


CM_DOC = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
    },
}


def gfd_node(name, product, strategy, config, resources, count=None, state="success"):
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/mig.strategy": strategy,
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.config": config,
        "nvidia.com/mig.config.state": state,
    }
    if count:
        labels["nvidia.com/gpu.count"] = str(count)
    res = {k: str(v) for k, v in resources.items()}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": res, "allocatable": res},
    }


def test_reading_gfd_nodes_of_both_strategies():
    import yaml

    from gpuctl.common.specfile import load_yaml
    from gpuctl.mig.core import migparted
    from gpuctl.mig.core.rebalance_read import read_cluster

    cfg = migparted.parse(load_yaml(yaml.safe_dump(CM_DOC), "cm"))
    nodes = [
        # single: GFD's product names the slice and nvidia.com/gpu.count counts slices
        gfd_node(
            "single",
            "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            "single",
            "all-1g.5gb",
            {"nvidia.com/gpu": 14},
            count=14,
        ),
        # mixed with MIG off on every GPU: whole GPUs, still a mixed MIG node
        gfd_node("off", "NVIDIA-A100-SXM4-40GB", "mixed", "all-disabled", {"nvidia.com/gpu": 2}, 2),
        gfd_node("stale", "NVIDIA-A100-SXM4-40GB", "mixed", "all-1g.5gb", {"nvidia.com/gpu": 2}, 2),
        gfd_node(
            "busy-manager",
            "NVIDIA-A100-SXM4-40GB",
            "mixed",
            "all-1g.5gb",
            {"nvidia.com/mig-1g.5gb": 14},
            2,
            state="pending",
        ),
        {"metadata": {"name": "cpu", "labels": {}}, "status": {}},
    ]
    pods = [
        {
            "metadata": {"name": "r", "namespace": "ml"},
            "spec": {
                "nodeName": "single",
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        },
        {
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"},
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Pending"},
        },
        {
            "metadata": {"name": "q", "namespace": "ml"},
            "spec": {"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.10gb.me": "1"}}}]},
            "status": {"phase": "Pending"},
        },
    ]
    now, skipped, pending, finishing = read_cluster(nodes, pods, cfg)
    by = {n.name: n for n in now}
    assert set(by) == {"single", "off"}
    assert by["single"].strategy == "single" and len(by["single"].gpus) == 2
    assert by["single"].running == {"ml/r": {"1g.5gb": 1}}
    assert by["off"].strategy == "mixed" and all(not g.enabled for g in by["off"].gpus.values())
    assert "stale" in skipped["stale"] or "offers" in skipped["stale"]
    assert "pending" in skipped["busy-manager"]
    assert "cpu" not in skipped
    assert [(p.name, dict(p.wants)) for p in pending] == [
        ("ml/p", {"3g.20gb": 1}),
        ("ml/q", {"1g.10gb+me": 1}),
    ]
    assert finishing == []


def test_a_forecast_adds_demand_and_an_unknown_profile_is_refused_in_words():
    from gpuctl.common.errors import UsageError

    model = find_model("A30")
    n = NodeNow("a", model, "mixed", "all-disabled", {0: DISABLED})
    result = plan([n], [], extra={"2g.12gb": 2})
    (change,) = result.changes
    assert change.after[0].offers()["2g.12gb"] == 2
    with pytest.raises(UsageError) as e:
        plan([n], [], extra={"3g.40gb": 1})
    assert "no MIG node here has that profile" in e.value.message
    assert "A30 profiles:" in e.value.hint


def test_the_mig_managers_configmap_is_the_one_the_cluster_policy_names():
    from gpuctl.mig.core.operator import mig_configmap

    policy = {"spec": {"migManager": {"enabled": True, "config": {"name": "custom-mig-config"}}}}
    assert mig_configmap([policy]) == "custom-mig-config"
    assert mig_configmap([{"spec": {"migManager": {"enabled": True}}}]) == (
        "default-mig-parted-config"
    )
    assert mig_configmap([]) == "default-mig-parted-config"


def test_the_configs_written_are_mig_parted_files_that_give_the_planned_layouts():
    import yaml

    from gpuctl.common.specfile import load_yaml
    from gpuctl.mig.core import migparted
    from gpuctl.mig.core.diff import GpuState

    model = find_model("H100-80GB")
    one = Layout(True, {"1g.10gb": 7})
    nodes = [
        NodeNow("a", model, "mixed", "x", {0: one, 1: one, 2: DISABLED}, {"ns/r": {"1g.10gb": 1}}),
        NodeNow("b", model, "mixed", "x", {0: DISABLED, 1: DISABLED}),
    ]
    pending = [Pending(f"ns/p{i}", {"3g.40gb": 1}) for i in range(3)] + [
        Pending("ns/w", {"7g.80gb": 1})
    ]
    result = plan(nodes, pending)
    assert result.unplaced == ()
    doc = {"version": "v1", "mig-configs": result.configs()}
    cfg = migparted.parse(load_yaml(yaml.safe_dump(doc), "cm"))
    for c in result.changes:
        gpus = [GpuState(i, model.nvml_name, "", model, (True, True)) for i in sorted(c.after)]
        got = migparted.resolve(cfg, cfg.select(c.config_to), gpus)
        for i, d in got.items():
            assert d is not None
            assert Layout(d.enabled, dict(d.layout) if d.enabled else {}) == c.after[i]


def test_only_gpuctls_configs_no_node_uses_are_pruned():
    from gpuctl.mig.core.rebalance import stale_configs

    names = ["all-disabled", "custom-a", "gpuctl-old", "gpuctl-used", "gpuctl-new"]
    assert stale_configs(names, {"gpuctl-used", "all-disabled"}, {"gpuctl-new"}) == ["gpuctl-old"]


def test_a_node_an_earlier_run_left_cordoned_is_finished_not_replanned():
    """Its config is applied (the manager said success) but it is still cordoned with
    gpuctl's record: the plan uncordons it with that layout, even where changing it again
    would serve the demand as well as changing another GPU does."""
    from gpuctl.mig.core.rebalance import Finish

    model = find_model("A100-40GB")
    seven = Layout(True, {"7g.40gb": 1})
    ones = Layout(True, {"1g.5gb": 7})
    done = NodeNow("done", model, "mixed", "gpuctl-a", {0: ones, 1: seven})
    other = NodeNow("other", model, "mixed", "all-disabled", {0: DISABLED, 1: DISABLED})
    pending = [Pending("ns/a", {"3g.20gb": 1}), Pending("ns/b", {"3g.20gb": 1})]
    finish = Finish("done", "uncordon", "gpuctl-a", None, "A100-40GB", "mixed", done.gpus)
    for nodes in ([done, other], [other, done]):
        result = plan(nodes, pending, finishing=[finish])
        assert result.finishing == (finish,)
        assert [c.node for c in result.changes] == ["other"]
        assert result.unplaced == ()
    # alone, it is kept too: the demand waits for the next run rather than re-plan it
    result = plan([done], pending, finishing=[finish])
    assert result.changes == () and result.finishing == (finish,)
    assert set(result.unplaced) == {"ns/a", "ns/b"}


def test_drain_changes_a_drainable_gpu_only_when_no_idle_one_serves_as_well():
    model = find_model("A100-40GB")
    ones = Layout(True, {"1g.5gb": 7})
    job = {"ns/job": {"1g.5gb": 1}}
    drainable = NodeNow("d", model, "mixed", "x", {0: ones}, job, covered=frozenset(job))
    idle = NodeNow("i", model, "mixed", "x", {0: ones})
    pinned = NodeNow("p", model, "mixed", "x", {0: ones}, {"ns/bare": {"1g.5gb": 1}})
    want = [Pending("ns/w", {"7g.40gb": 1})]
    # an idle GPU serves: the drainable one is left, nothing is evicted
    result = plan([drainable, idle, pinned], want)
    assert [(c.node, c.evicts) for c in result.changes] == [("i", ())]
    # two 7g wanted, one idle GPU: the drainable one changes too, evicting its pod; the
    # pod still has a 1g.5gb to go to (the pinned node's)
    result = plan([drainable, idle, pinned], want + [Pending("ns/w2", {"7g.40gb": 1})])
    assert sorted((c.node, c.evicts) for c in result.changes) == [("d", ("ns/job",)), ("i", ())]
    assert result.unplaced == ()
    # an evicted pod must have somewhere to go: with no other 1g.5gb the pod stays
    result = plan([drainable], want)
    assert result.changes == () and result.unplaced == ("ns/w",)


def test_the_drain_policy_covers_only_recreated_pods_in_named_namespaces():
    from gpuctl.mig.core.drain import DrainPolicy

    policy = DrainPolicy(frozenset({"ml"}))

    def pod(ns="ml", kind="Job", labels=None, annotations=None, volumes=()):
        meta = {"name": "p", "namespace": ns, "labels": labels or {}}
        meta["annotations"] = annotations or {}
        if kind:
            meta["ownerReferences"] = [{"kind": kind, "name": "o", "controller": True}]
        return {"metadata": meta, "spec": {"volumes": list(volumes)}}

    def obj(kind, labels=None, owner=None):
        meta = {"name": "o" if kind != "Deployment" else "d", "namespace": "ml"}
        meta["labels"] = labels or {}
        if owner:
            meta["ownerReferences"] = [{"kind": owner, "name": "d", "controller": True}]
        return {"metadata": meta}

    owners = {(k, "ml", "o"): obj(k) for k in ("Job", "ReplicaSet", "StatefulSet")}
    for kind in ("Job", "ReplicaSet", "StatefulSet"):
        assert policy.why_not(pod(kind=kind), owners) is None
    assert "not one --drain-namespace names" in policy.why_not(pod(ns="prod"), owners)
    assert "bare pod" in policy.why_not(pod(kind=None), owners)
    assert "DaemonSet" in policy.why_not(pod(kind="DaemonSet"), owners)
    never = {"gpuctl.io/reclaim": "never"}
    assert "reclaim: never" in policy.why_not(pod(labels=never), owners)
    assert "evict: never" in policy.why_not(pod(annotations={"gpuctl.io/evict": "never"}), owners)
    scratch = {"name": "scratch", "emptyDir": {}}
    assert "volume scratch" in policy.why_not(pod(volumes=[scratch]), owners)
    # the owners up the chain: marked, or not readable, cover nothing
    assert "could not be read" in policy.why_not(pod(), {})
    marked = {**owners, ("Job", "ml", "o"): obj("Job", never)}
    assert "its Job ml/o is marked gpuctl.io/reclaim: never" in policy.why_not(pod(), marked)
    chain = {**owners, ("ReplicaSet", "ml", "o"): obj("ReplicaSet", owner="Deployment")}
    assert "Deployment ml/d could not be read" in policy.why_not(pod(kind="ReplicaSet"), chain)
    chain[("Deployment", "ml", "d")] = obj("Deployment", never)
    assert "Deployment ml/d is marked" in policy.why_not(pod(kind="ReplicaSet"), chain)
    chain[("Deployment", "ml", "d")] = obj("Deployment")
    assert policy.why_not(pod(kind="ReplicaSet"), chain) is None

    # a PodDisruptionBudget selecting the pod that allows no disruption now covers it not
    def budget(allowed, selector):
        return {"spec": {"selector": selector}, "status": {"disruptionsAllowed": allowed}}

    app = {"app": "train"}
    spent = {**owners, ("PodDisruptionBudget", "ml", "keep"): budget(0, {"matchLabels": app})}
    assert "PodDisruptionBudget ml/keep allows no disruption" in policy.why_not(
        pod(labels=app), spent
    )
    assert policy.why_not(pod(labels={"app": "other"}), spent) is None  # selects another
    spent[("PodDisruptionBudget", "ml", "keep")] = budget(1, {"matchLabels": app})
    assert policy.why_not(pod(labels=app), spent) is None
    elsewhere = {**owners, ("PodDisruptionBudget", "prod", "keep"): budget(0, {})}
    assert policy.why_not(pod(labels=app), elsewhere) is None  # another namespace's
    unread = {**owners, ("PodDisruptionBudget", "ml", ""): {}}  # listing them was refused
    assert "PodDisruptionBudgets of namespace ml could not be read" in policy.why_not(
        pod(labels=app), unread
    )
    # a label and an annotation are read each on its own: one does not hide the other
    other = {"gpuctl.io/evict": "soon"}
    assert "evict: never" in policy.why_not(
        pod(labels=other, annotations={"gpuctl.io/evict": "never"}), owners
    )


@pytest.mark.parametrize("model_name,gpus,cases", [("A30", 4, 30), ("A100-40GB", 3, 20)])
def test_a_drain_plan_matches_the_exhaustive_optimum(model_name, gpus, cases):
    from dataclasses import replace

    model = find_model(model_name)
    rng = random.Random(2828)
    for _ in range(cases):
        nodes = [
            replace(n, covered=frozenset(p for p in n.running if rng.random() < 0.6))
            for n in random_cluster(rng, model, gpus)
        ]
        pending = random_pending(rng, model)
        demand = sum((Counter(p.wants) for p in pending), Counter())
        result = plan(nodes, pending)
        assert score(nodes, demand, result) == best(nodes, demand), (nodes, pending)
        for c in result.changes:
            n = next(n for n in nodes if n.name == c.node)
            pinned = {p: u for p, u in n.running.items() if p not in n.covered}
            may = set()
            for i in c.changed:
                assert not busy(n.gpus[i], pinned)  # no pod it may not evict is in the way
                offers = n.gpus[i].offers()
                may |= {p for p, u in n.running.items() if any(offers[k] for k in u)}
            assert set(c.evicts) == may and set(c.evicts) <= n.covered


def test_pods_not_evicted_for_one_reason_are_one_line():
    from gpuctl.mig.core.rebalance import _not_evicted_lines

    outside = "namespace prod is not one --drain-namespace names"
    why = {f"prod/p{i}": outside for i in range(5)} | {"ml/bare": "a bare pod"}
    assert _not_evicted_lines(why) == [
        f"not evicted: 5 pods (prod/p0, prod/p1, prod/p2, …): {outside}",
        "not evicted: ml/bare: a bare pod",
    ]


def test_drain_options_are_checked_before_the_cluster_is_read(capsys):
    from gpuctl.mig.core.drain import DrainPolicy, drain_policy
    from tests.clirun import run_gpuctl

    assert drain_policy(False, []) is None
    assert drain_policy(True, ["ml", "ml-batch"]) == DrainPolicy(frozenset({"ml", "ml-batch"}))
    # no kubeconfig is needed to be told: a usage error, exit 2, before any connection
    code, _, err = run_gpuctl(capsys, "mig", "rebalance", "--drain", "--kubeconfig", "/nonexistent")
    assert code == 2 and "--drain needs --drain-namespace NS" in err
    code, _, err = run_gpuctl(
        capsys, "mig", "rebalance", "--drain-namespace", "ml", "--kubeconfig", "/nonexistent"
    )
    assert code == 2 and "--drain-namespace needs --drain" in err
