"""`gpuctl mig rebalance` against the Kubernetes API emulator seeded with GPU Operator MIG
nodes and the MIG manager's ConfigMap; a thread plays the MIG manager: it watches
nvidia.com/mig.config, reads the named config from the ConfigMap, rewrites the node's
capacity/allocatable and nvidia.com/mig.config.state (and can fail)."""

import json
import threading
import time
from collections import Counter

import pytest
import yaml

from tests.clirun import run_gpuctl as run
from tests.gpu_cluster import seed

NS = "gpu-operator"
CM = "default-mig-parted-config"
NVIDIA_CONFIGS = {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
    "all-3g.20gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
}


def configmap():
    doc = {"version": "v1", "mig-configs": NVIDIA_CONFIGS}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CM, "namespace": NS},
        "data": {"config.yaml": yaml.safe_dump(doc)},
    }


def offers(entries, gpus):
    """What the device plugin advertises under these mig-parted entries (mixed strategy)."""
    out = Counter()
    for i in range(gpus):
        entry = [e for e in entries if e["devices"] == "all" or i in e["devices"]][-1]
        if not entry["mig-enabled"]:
            out["nvidia.com/gpu"] += 1
        for p, n in (entry.get("mig-devices") or {}).items():
            out[f"nvidia.com/mig-{p}"] += n
    return dict(out)


def mig_node(name, config, gpus=2):
    res = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    res.update({k: str(v) for k, v in offers(NVIDIA_CONFIGS[config], gpus).items()})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/mig.strategy": "mixed",
                "nvidia.com/mig.capable": "true",
                "nvidia.com/mig.config": config,
                "nvidia.com/mig.config.state": "success",
            },
        },
        "status": {"capacity": res, "allocatable": dict(res)},
    }


def pod(name, resource, n=1, node=None, phase="Pending"):
    spec = {
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: str(n)}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
        "status": {"phase": phase},
    }


class MigManager:
    """The GPU Operator's MIG manager as the API sees it, for every node."""

    def __init__(self, api, fail=(), hold=None):
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.fail = set(fail)
        self.hold = hold  # a threading.Event: it stays at pending until that is set
        self.applied = {}
        self.gpus = {}  # physical GPUs per node (single: GFD's count is of slices)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.work, daemon=True)
        self.thread.start()

    def work(self):
        while not self.stop.is_set():
            for n in self.core.list_node().items:
                labels = n.metadata.labels or {}
                value = labels.get("nvidia.com/mig.config")
                name = n.metadata.name
                if value is None or self.applied.setdefault(name, value) == value:
                    continue
                self.applied[name] = value  # it reacts to a change of the value only
                self.apply(n, value)
            time.sleep(0.05)

    def apply(self, n, value):
        name = n.metadata.name
        self.label(name, "pending")
        time.sleep(0.1)
        if self.hold is not None:
            self.hold.wait(20)
        if name in self.fail:
            self.label(name, "failed")
            return
        cm = self.core.read_namespaced_config_map(CM, NS)
        entries = yaml.safe_load(cm.data["config.yaml"])["mig-configs"][value]
        labels = n.metadata.labels
        single = labels.get("nvidia.com/mig.strategy") == "single"
        gpus = self.gpus.setdefault(name, int(labels["nvidia.com/gpu.count"]))
        res = {k: v for k, v in (n.status.capacity or {}).items() if not k.startswith("nvidia")}
        offered = offers(entries, gpus)
        if single:  # GFD and the plugin: one profile, counted as nvidia.com/gpu
            (entry,) = entries
            devices = entry.get("mig-devices") or {}
            (profile,) = devices or [None]
            base = labels["nvidia.com/gpu.product"].split("-MIG-")[0]
            product = f"{base}-MIG-{profile}" if profile else base
            count = sum(offered.values())
            offered = {"nvidia.com/gpu": count}
            self.core.patch_node(
                name,
                {
                    "metadata": {
                        "labels": {
                            "nvidia.com/gpu.product": product,
                            "nvidia.com/gpu.count": str(count),
                        }
                    }
                },
            )
        res.update({k: str(v) for k, v in offered.items()})
        # the device plugin restarts: the old resources go, the new ones come
        drop = {k: None for k in (n.status.capacity or {}) if k.startswith("nvidia")}
        self.core.patch_node_status(
            name, {"status": {"capacity": {**drop, **res}, "allocatable": {**drop, **res}}}
        )
        self.label(name, "success")

    def label(self, name, state):
        self.core.patch_node(name, {"metadata": {"labels": {"nvidia.com/mig.config.state": state}}})

    def close(self):
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def cluster(kube, kube_api):
    return seed_cluster(kube_api)


def seed_cluster(kube_api):
    """Three MIG nodes (one with a running pod), the MIG manager's ConfigMap, pending pods."""
    seed(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    seed(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    seed(
        kube_api,
        configmap(),
        mig_node("busy", "all-1g.5gb"),  # a pod runs on a 1g.5gb: both GPUs may hold it
        mig_node("idle", "all-1g.5gb"),
        mig_node("whole", "all-disabled"),
        pod("running", "nvidia.com/mig-1g.5gb", node="busy", phase="Running"),
        pod("want-3g-a", "nvidia.com/mig-3g.20gb"),
        pod("want-3g-b", "nvidia.com/mig-3g.20gb"),
        pod("want-7g", "nvidia.com/mig-7g.40gb"),
    )
    return kube_api


def node_of(api, name):
    from kubernetes import client

    return client.CoreV1Api(api).read_node(name)


def test_dry_run_unblocks_the_demand_on_idle_gpus_only(cluster, capsys):
    code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    data = json.loads(out)
    changed = {n["node"]: n for n in data["nodes"]}
    assert "busy" not in changed  # its GPUs may hold the running pod
    assert data["skipped"] == {}  # the all-disabled node is a mixed-strategy MIG node too
    assert sorted(p for n in data["nodes"] for p in n["unblocks"]) == [
        "ml/want-3g-a",
        "ml/want-3g-b",
        "ml/want-7g",
    ]
    assert data["unplaced"] == []
    assert data["gpusChanged"] == 2  # one GPU to 3g.20gb ×2, one to 7g.40gb
    assert all(name.startswith("gpuctl-") for name in data["configs"])
    assert node_of(cluster, "idle").metadata.labels["nvidia.com/mig.config"] == "all-1g.5gb"


def test_apply_leaves_every_node_uncordoned_with_the_planned_layout(cluster, capsys):
    manager = MigManager(cluster)
    try:
        code, out, err = run(capsys, "mig", "rebalance", "--yes", "-n", NS, "--timeout", "20")
        assert code == 0, err
        code, out2, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
    finally:
        manager.close()
    assert code == 0, err
    again = json.loads(out2)
    assert again["nodes"] == []  # idempotent: nothing left to change
    for name in ("busy", "idle", "whole"):
        node = node_of(cluster, name)
        assert not (node.spec and node.spec.unschedulable)
        assert "gpuctl.io/mig-rebalance" not in (node.metadata.annotations or {})
    alloc = Counter()
    for name in ("idle", "whole"):
        for k, v in node_of(cluster, name).status.allocatable.items():
            if k.startswith("nvidia.com/mig-"):
                alloc[k] += int(v)
    assert alloc["nvidia.com/mig-3g.20gb"] >= 2 and alloc["nvidia.com/mig-7g.40gb"] >= 1
    assert node_of(cluster, "busy").metadata.labels["nvidia.com/mig.config"] == "all-1g.5gb"
    cm = yaml.safe_load(
        __import__("kubernetes")
        .client.CoreV1Api(cluster)
        .read_namespaced_config_map(CM, NS)
        .data["config.yaml"]
    )
    for k, v in NVIDIA_CONFIGS.items():
        assert cm["mig-configs"][k] == v  # NVIDIA's entries untouched
    labelled = {
        node_of(cluster, n).metadata.labels["nvidia.com/mig.config"] for n in ("idle", "whole")
    }
    assert {k for k in cm["mig-configs"] if k.startswith("gpuctl-")} == labelled - set(
        NVIDIA_CONFIGS
    )


def test_a_manager_failure_stops_there_with_the_node_cordoned_and_a_rerun_finishes(cluster, capsys):
    manager = MigManager(cluster, fail=["idle", "whole"])
    try:
        code, out, err = run(capsys, "mig", "rebalance", "--yes", "-n", NS, "--timeout", "10")
        assert code == 1
        assert "left cordoned" in err
        failed = [n for n in ("idle", "whole") if cordoned(cluster, n)]
        assert len(failed) == 1  # it stopped at the first failure
        manager.fail.clear()
        code, out, err = run(capsys, "mig", "rebalance", "--yes", "-n", NS, "--timeout", "20")
        assert code == 0, err
    finally:
        manager.close()
    for name in ("busy", "idle", "whole"):
        assert not cordoned(cluster, name)
    code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    data = json.loads(out)
    assert data["nodes"] == [] and data["finishing"] == [] and data["unplaced"] == []


def cordoned(api, name):
    spec = node_of(api, name).spec
    return bool(spec and spec.unschedulable)


class InterruptAt:
    """Progress that presses Ctrl-C when the step ACTION of NODE starts."""

    def __init__(self, action):
        self.action = action

    def started(self, step, index, total):
        if step.action == self.action:
            raise KeyboardInterrupt

    def finished(self, step, index, total):
        pass


def manager_done(cluster, manager, name):
    """MANAGER has taken the node's config label and reported success on it."""
    labels = node_of(cluster, name).metadata.labels
    seen = manager.applied.get(name) == labels.get("nvidia.com/mig.config")
    return seen and labels.get("nvidia.com/mig.config.state") == "success"


def apply_with(progress):
    from gpuctl.adapters.kube import Kube
    from gpuctl.common.errors import Interrupted
    from gpuctl.mig import rebalance

    with Kube() as kube:
        rb = rebalance.plan_rebalance(kube, NS, CM, None)
        with pytest.raises(Interrupted) as e:
            rebalance.apply(kube, rb, NS, CM, 10, progress)
    return rb, e.value


def test_ctrl_c_before_the_label_leaves_the_node_as_it_was(cluster, capsys):
    rb, e = apply_with(InterruptAt("label"))
    first = rb.changes[0].node
    assert "as it was" in e.message
    assert not cordoned(cluster, first)
    node = node_of(cluster, first)
    assert "gpuctl.io/mig-rebalance" not in (node.metadata.annotations or {})
    assert node.metadata.labels["nvidia.com/mig.config"] == rb.changes[0].config_from


def test_ctrl_c_while_the_manager_works_leaves_it_for_the_next_run_to_finish(cluster, capsys):
    manager = MigManager(cluster)
    try:
        rb, e = apply_with(InterruptAt("wait"))
        first = rb.changes[0].node
        assert "left cordoned" in e.message + " ".join(e.details)
        assert cordoned(cluster, first)
        # the next run comes once the manager is done (a run in the middle of its work waits)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not manager_done(cluster, manager, first):
            time.sleep(0.1)
        code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
        assert code == 0, err
        assert {f["node"] for f in json.loads(out)["finishing"]} == {first}
        code, out, err = run(capsys, "mig", "rebalance", "--yes", "-n", NS, "--timeout", "20")
        assert code == 0, err
    finally:
        manager.close()
    for name in ("busy", "idle", "whole"):
        assert not cordoned(cluster, name)
    code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
    data = json.loads(out)
    assert data["nodes"] == [] and data["finishing"] == [] and data["unplaced"] == []


def test_ctrl_c_then_a_run_while_the_manager_is_still_at_it_waits_for_it(cluster, capsys):
    hold = threading.Event()
    manager = MigManager(cluster, hold=hold)
    try:
        rb, e = apply_with(InterruptAt("wait"))
        first = rb.changes[0].node
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            node_of(cluster, first).metadata.labels.get("nvidia.com/mig.config.state") != "pending"
        ):
            time.sleep(0.05)
        code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
        assert code == 0, err
        data = json.loads(out)
        assert data["finishing"] == [
            {"node": first, "finish": "wait", "config": rb.changes[0].config_to}
        ]
        assert first not in {n["node"] for n in data["nodes"]}
        hold.set()
        code, out, err = run(capsys, "mig", "rebalance", "--yes", "-n", NS, "--timeout", "20")
        assert code == 0, err
    finally:
        hold.set()
        manager.close()
    for name in ("busy", "idle", "whole"):
        assert not cordoned(cluster, name)


def test_kueue_workloads_waiting_for_admission_count_as_demand(kube, cluster, capsys):
    from tests import kueue_workloads
    from tests.gpu_cluster import set_status

    kube.install_crds("Workload")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "big",
            "namespace": "ml",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {
            "parallelism": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {"limits": {"nvidia.com/mig-2g.10gb": "1"}},
                        }
                    ]
                }
            },
        },
    }
    wl = kueue_workloads.workload_for(job)
    seed(cluster, wl)
    set_status(cluster, wl, kueue_workloads.pending("insufficient quota"))
    code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    data = json.loads(out)
    assert data["demand"]["2g.10gb"] == 2
    unblocked = [p for n in data["nodes"] for p in n["unblocks"]]
    name = wl["metadata"]["name"]
    assert sorted(p for p in unblocked if name in p) == [f"ml/{name}[main#0]", f"ml/{name}[main#1]"]
    assert data["unplaced"] == []


def test_a_pod_that_started_since_the_plan_on_a_gpu_that_changes_stops_it(cluster, capsys):
    from gpuctl.adapters.kube import Kube
    from gpuctl.common.errors import BackendError
    from gpuctl.mig import rebalance
    from gpuctl.runtime.workflow import Quiet

    manager = MigManager(cluster)
    try:
        with Kube() as kube:
            rb = rebalance.plan_rebalance(kube, NS, CM, None)
            first = rb.changes[0]
            taken = next(iter(first.before[first.changed[0]].offers()))
            resource = "nvidia.com/gpu" if taken == "gpu" else f"nvidia.com/mig-{taken}"
            seed(cluster, pod("late", resource, node=first.node, phase="Running"))
            with pytest.raises(BackendError) as e:
                rebalance.apply(kube, rb, NS, CM, 1, Quiet())
    finally:
        manager.close()
    assert "ml/late" in e.value.message and "as it was" in e.value.message
    assert not cordoned(cluster, first.node)
    assert (
        node_of(cluster, first.node).metadata.labels["nvidia.com/mig.config"] == first.config_from
    )


def test_single_strategy_nodes_are_rebalanced_whole(kube, kube_api, capsys):
    single = mig_node("s", "all-1g.5gb")
    labels = single["metadata"]["labels"]
    labels.update({"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "14"})
    labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "14"}
    single["status"] = {"capacity": res, "allocatable": dict(res)}
    want = pod("want-3g", "nvidia.com/gpu")
    want["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"}
    seed(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    seed(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    seed(kube_api, configmap(), single, want)
    manager = MigManager(kube_api)
    manager.gpus["s"] = 2
    try:
        code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
        assert code == 0, err
        (change,) = json.loads(out)["nodes"]
        assert change["node"] == "s" and change["strategy"] == "single"
        assert [g["to"] for g in change["gpusChanged"]] == ["3g.20gb=2", "3g.20gb=2"]
        code, out, err = run(capsys, "mig", "rebalance", "--yes", "-n", NS, "--timeout", "20")
        assert code == 0, err
    finally:
        manager.close()
    node = node_of(kube_api, "s")
    assert not cordoned(kube_api, "s")
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"
    assert node.status.allocatable["nvidia.com/gpu"] == "4"


# ---------- --drain ----------


def owned(p, kind="Job", owner="train"):
    p["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": kind,
            "name": owner,
            "uid": "u-" + owner,
            "controller": True,
        }
    ]
    return p


@pytest.fixture
def full(kube, kube_api):
    return seed_full(kube_api)


def seed_full(kube_api):
    """Every GPU may hold a running 1g.5gb pod; a pending pod wants a whole 7g.40gb. Node a's
    pod is a Job's in ml (--drain may evict it); b's is bare; c's is marked never and has a
    Job's pod beside it."""
    never = owned(pod("never", "nvidia.com/mig-1g.5gb", node="c", phase="Running"))
    never["metadata"]["labels"] = {"gpuctl.io/reclaim": "never"}
    seed(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    seed(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    seed(
        kube_api,
        configmap(),
        mig_node("a", "all-1g.5gb"),
        mig_node("b", "all-1g.5gb"),
        mig_node("c", "all-1g.5gb"),
        owned(pod("job-a", "nvidia.com/mig-1g.5gb", node="a", phase="Running")),
        pod("bare", "nvidia.com/mig-1g.5gb", node="b", phase="Running"),
        never,
        owned(pod("job-c", "nvidia.com/mig-1g.5gb", node="c", phase="Running"), owner="other"),
        pod("want-7g", "nvidia.com/mig-7g.40gb"),
    )
    from kubernetes import client

    for name in ("train", "other"):  # the pods' owners (--drain reads their marks too)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
        }
        client.BatchV1Api(kube_api).create_namespaced_job("ml", job)
    return kube_api


DRAIN = ("--drain", "--drain-namespace", "ml")


def drain_apply(api, capsys, timeout: int):
    """`mig rebalance --drain … --yes` with the stand-in MIG manager running meanwhile."""
    manager = MigManager(api)
    try:
        return run(capsys, "mig", "rebalance", *DRAIN, "--yes", "-n", NS, "--timeout", str(timeout))
    finally:
        manager.close()


def pods_left(api):
    from kubernetes import client

    return sorted(p.metadata.name for p in client.CoreV1Api(api).list_namespaced_pod("ml").items)


def test_a_drain_plan_names_and_evicts_exactly_the_covered_pods(full, capsys):
    code, out, err = run(capsys, "mig", "rebalance", "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    assert json.loads(out)["nodes"] == []  # without --drain nothing changes
    code, out, err = run(capsys, "mig", "rebalance", *DRAIN, "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    data = json.loads(out)
    (change,) = data["nodes"]
    assert change["node"] == "a" and change["evicts"] == ["ml/job-a"]
    assert change["unblocks"] == ["ml/want-7g"] and len(change["gpusChanged"]) == 1
    assert set(data["notEvictable"]) == {"ml/bare", "ml/never"}
    assert "bare pod" in data["notEvictable"]["ml/bare"]
    assert "gpuctl.io/reclaim: never" in data["notEvictable"]["ml/never"]
    assert pods_left(full) == ["bare", "job-a", "job-c", "never", "want-7g"]  # dry run
    code, out, err = drain_apply(full, capsys, 20)
    assert code == 0, err
    assert pods_left(full) == ["bare", "job-c", "never", "want-7g"]
    node = node_of(full, "a")
    assert not cordoned(full, "a")
    assert node.status.allocatable["nvidia.com/mig-7g.40gb"] == "1"
    for name in ("b", "c"):
        assert node_of(full, name).metadata.labels["nvidia.com/mig.config"] == "all-1g.5gb"
    from kubernetes import client

    events = client.CoreV1Api(full).list_namespaced_event("ml").items
    (ev,) = [e for e in events if e.involved_object.name == "job-a"]
    assert ev.reason == "MigRebalanceEvict" and "node a" in ev.message


def _budget(api, allowed: int) -> None:
    """A PodDisruptionBudget over job-a (label app=train) allowing ALLOWED disruptions."""
    from kubernetes import client

    client.CoreV1Api(api).patch_namespaced_pod(
        "job-a", "ml", {"metadata": {"labels": {"app": "train"}}}
    )
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "ml"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}},
        "status": {"disruptionsAllowed": allowed},
    }
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget("ml", pdb)


def test_a_pod_whose_disruption_budget_is_spent_is_not_planned_for_eviction(full, capsys):
    _budget(full, 0)
    code, out, err = run(capsys, "mig", "rebalance", *DRAIN, "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    data = json.loads(out)
    assert data["nodes"] == []  # the only covered pod's budget allows no disruption
    assert "PodDisruptionBudget ml/keep allows no disruption" in data["notEvictable"]["ml/job-a"]


def test_a_disruption_budget_spent_meanwhile_stops_the_node_as_it_was(full, capsys, proxied_kube):
    """The budget allows one disruption when gpuctl plans; another client's eviction spends
    it just before gpuctl's: the API server refuses (429) and the node stays as it was."""
    from kubernetes import client

    from tests.standins.faults import meanwhile

    _budget(full, 1)

    def spend():
        budgets = client.PolicyV1Api(full)
        budgets.patch_namespaced_pod_disruption_budget_status(
            "keep", "ml", {"status": {"disruptionsAllowed": 0}}
        )

    proxied_kube.on("POST", r"/api/v1/namespaces/ml/pods/job-a/eviction", meanwhile(spend))
    code, out, err = drain_apply(full, capsys, 5)
    assert code == 1
    assert "PodDisruptionBudget" in err and "uncordoned" in err
    assert len(proxied_kube.seen("POST", r"/api/v1/namespaces/ml/pods/job-a/eviction")) == 1
    assert not cordoned(full, "a")
    assert "gpuctl.io/mig-rebalance" not in (node_of(full, "a").metadata.annotations or {})
    assert node_of(full, "a").metadata.labels["nvidia.com/mig.config"] == "all-1g.5gb"
    assert "job-a" in pods_left(full)
    kept = client.CoreV1Api(full).read_namespaced_pod("job-a", "ml")
    assert "gpuctl.io/mig-rebalance-evicted" not in (kept.metadata.annotations or {})


def test_a_refused_eviction_names_the_pods_evicted_before_it_and_unmarks_the_pod(
    full, capsys, proxied_kube
):
    """The second of node a's two covered pods cannot be evicted (403: no RBAC for it, or
    any other refusal): the error names the pod evicted before it, the refused pod keeps
    no record of an eviction, and the node is uncordoned with its layout."""
    from kubernetes import client

    from tests.standins.faults import reply

    seed(full, owned(pod("job-a2", "nvidia.com/mig-1g.5gb", node="a", phase="Running")))
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Forbidden",
        "code": 403,
        "message": 'pods "job-a2" is forbidden: cannot create resource "pods/eviction"',
    }
    path = r"/api/v1/namespaces/ml/pods/job-a2/eviction"
    proxied_kube.on("POST", path, reply(403, json.dumps(status)))
    code, out, err = drain_apply(full, capsys, 5)
    assert code == 1, err
    assert "evicted: ml/job-a" in err and "is as it was" not in err, err
    assert "left: node a (evicted ml/job-a: their controllers recreate them)" in err
    assert pods_left(full) == ["bare", "job-a2", "job-c", "never", "want-7g"]
    kept = client.CoreV1Api(full).read_namespaced_pod("job-a2", "ml")
    assert "gpuctl.io/mig-rebalance-evicted" not in (kept.metadata.annotations or {})
    assert not cordoned(full, "a")
    assert node_of(full, "a").metadata.labels["nvidia.com/mig.config"] == "all-1g.5gb"


def test_drain_needs_a_namespace_and_a_namespace_needs_drain(full, capsys):
    code, out, err = run(capsys, "mig", "rebalance", "--drain", "--dry-run", "-n", NS)
    assert code == 2 and "--drain-namespace" in err
    code, out, err = run(
        capsys, "mig", "rebalance", "--drain-namespace", "ml", "--dry-run", "-n", NS
    )
    assert code == 2 and "--drain" in err


def test_ctrl_c_after_the_evictions_uncordons_the_node_and_names_the_pods_evicted(full, capsys):
    from gpuctl.adapters.kube import Kube
    from gpuctl.common.errors import Interrupted
    from gpuctl.mig import rebalance
    from gpuctl.mig.core.drain import drain_policy

    policy = drain_policy(True, ["ml"])
    with Kube() as kube:
        rb = rebalance.plan_rebalance(kube, NS, CM, None, policy)
        with pytest.raises(Interrupted) as e:
            rebalance.apply(kube, rb, NS, CM, 10, InterruptAt("drained"), drain=policy)
    said = e.value.message + " ".join(e.value.details)
    assert "evicted ml/job-a" in said
    assert not cordoned(full, "a")
    assert node_of(full, "a").metadata.labels["nvidia.com/mig.config"] == "all-1g.5gb"
    assert "job-a" not in pods_left(full)
