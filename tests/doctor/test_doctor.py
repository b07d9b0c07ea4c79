"""`gpuctl doctor`: each check from plain objects, and the command on the API emulator."""

import json

import pytest

from gpuctl.doctor.core import checks as doctor
from gpuctl.k8s import device_plugin
from gpuctl.k8s.nodes import GFD_PRESENT, GFD_REPLICAS, GFD_STRATEGY
from gpuctl.sharing.core import config as sharing
from tests.gpu_cluster import daemonset, node, seed

PLUGIN = daemonset("nvidia-device-plugin-daemonset", "gpu-operator", config_map="dp-config")
DCGM = daemonset("nvidia-dcgm-exporter", "gpu-operator")
TS4 = device_plugin.config_text(sharing.make_sharing("time-slicing", 4))


def by_name(checks):
    return {c.name: c for c in checks}


def test_healthy_cluster_passes_everything():
    nodes = [
        node(
            "gpu-1",
            32,
            labels={
                device_plugin.CONFIG_LABEL: "ts-4",
                GFD_REPLICAS: "4",
                GFD_STRATEGY: "time-slicing",
            },
        ),
        node("gpu-2", 8),
        node("cpu", 0, gfd=False),
    ]
    checks = doctor.run_checks(nodes, [PLUGIN, DCGM], "dp-config", {"ts-4": TS4})
    assert [c.name for c in checks] == [
        "gpu-nodes",
        "feature-discovery",
        "gpu-types",
        "device-plugin",
        "mig",
        "sharing",
        "dcgm-exporter",
    ]
    assert all(c.status == doctor.PASS for c in checks), checks
    # 8 physical GPUs each: gpu-1's 32 time-shared replicas are not GPUs
    assert checks[0].detail == "2 GPU node(s), 16 GPUs"
    assert not doctor.failed(checks)


def test_no_gpu_nodes_and_no_plugin_fail_with_fixes():
    checks = by_name(doctor.run_checks([node("cpu", 0, gfd=False)], [], None, None))
    assert checks["gpu-nodes"].status == doctor.FAIL and "install" in checks["gpu-nodes"].fix
    assert checks["device-plugin"].status == doctor.FAIL
    assert "gpu-operator" in checks["device-plugin"].fix
    assert checks["dcgm-exporter"].status == doctor.WARN
    # names the commands that need the metrics as they are really spelled
    assert "gpuctl top --prometheus" in checks["dcgm-exporter"].detail
    assert doctor.failed(list(checks.values()))


def test_gpu_present_but_not_advertised_fails():
    c = doctor.check_gpu_nodes([node("gpu-1", 0), node("gpu-2", 8)])
    assert c.status == doctor.FAIL and "gpu-1" in c.detail and "gpu-2" not in c.detail


def test_every_check_counts_the_same_gpu_nodes():
    nodes = [
        node("shared", 0, alloc={"nvidia.com/gpu.shared": "32"}),  # renamed time-slicing
        node("mig", 0, alloc={"nvidia.com/mig-1g.10gb": "7"}, gfd=False),
        node("nic", 0, alloc={"nvidia.com/sriov_rdma": "8"}, gfd=False),  # no GPU at all
    ]
    gpu_nodes, gfd = doctor.check_gpu_nodes(nodes), doctor.check_gfd(nodes)
    # the MIG node says neither its model nor its GPU count: its GPUs are not guessed
    assert (gpu_nodes.status, gpu_nodes.detail) == (
        "pass", "2 GPU node(s), 8 GPUs (and the uncounted GPUs of 1 node)"
    )  # fmt: skip
    assert gfd.status == "warn" and "missing on mig " in gfd.detail
    unhealthy = node("sick", 0, alloc={"nvidia.com/gpu": "0"}, gfd=False)
    unhealthy["status"]["capacity"]["nvidia.com/gpu"] = "8"
    check = doctor.check_gpu_nodes([unhealthy])
    assert check.status == "fail" and "no nvidia.com/gpu allocatable on sick" in check.detail


def test_plugin_not_ready_or_scheduling_nothing_fails():
    assert (
        doctor.check_device_plugin(
            daemonset("nvidia-device-plugin-daemonset", "x", ready=1, desired=3)
        ).status
        == doctor.FAIL
    )
    c = doctor.check_device_plugin(daemonset("nvidia-device-plugin", "x", ready=0, desired=0))
    assert c.status == doctor.FAIL and "schedules no pods" in c.detail


def test_missing_gfd_labels_warn_naming_nodes():
    c = doctor.check_gfd([node("a"), node("b", gfd=False, labels={GFD_PRESENT: "true"})])
    assert c.status == doctor.WARN and "b" in c.detail and "nvidia.com/gpu.product" in c.detail
    assert "gfd.enabled" in c.fix


@pytest.mark.parametrize(
    "labels, alloc, status, text",
    [
        (
            {"nvidia.com/mig.config": "all-1g.10gb", doctor.MIG_STATE: "failed"},
            {},
            "fail",
            "failed",
        ),
        (
            {"nvidia.com/mig.config": "all-1g.10gb", doctor.MIG_STATE: "pending"},
            {},
            "warn",
            "pending",
        ),
        ({"nvidia.com/mig.config": "all-1g.10gb"}, {}, "warn", "no MIG manager"),
        (
            {"nvidia.com/mig.strategy": "single"},
            {"nvidia.com/mig-1g.10gb": "7"},
            "fail",
            "mig.strategy=single",
        ),
        (
            {
                "nvidia.com/mig.config": "all-1g.10gb",
                doctor.MIG_STATE: "success",
                "nvidia.com/mig.strategy": "mixed",
            },
            {"nvidia.com/mig-1g.10gb": "7"},
            "pass",
            "applied",
        ),
        ({}, {}, "pass", "not in use"),
    ],
)
def test_mig_state(labels, alloc, status, text):
    c = doctor.check_mig([node("n", labels=labels, alloc=alloc)])
    assert c.status == status and text in c.detail, c


def test_mixed_mig_strategies_warn():
    c = doctor.check_mig(
        [
            node("a", labels={"nvidia.com/mig.strategy": "single"}),
            node("b", labels={"nvidia.com/mig.strategy": "mixed"}),
        ]
    )
    assert c.status == doctor.WARN and "different MIG strategies" in c.detail


def test_sharing_config_problems():
    def labelled(value, **extra):
        return node("g", labels={device_plugin.CONFIG_LABEL: value, **extra})

    c = doctor.check_sharing([labelled("ts-4")], None, None)
    assert c.status == doctor.FAIL and "reads no config ConfigMap" in c.detail
    c = doctor.check_sharing([labelled("gone")], "dp", {"ts-4": TS4})
    assert c.status == doctor.FAIL and "'gone' is not in ConfigMap dp" in c.detail
    c = doctor.check_sharing([labelled("bad")], "dp", {"bad": "version: v1\nsharing: [1]"})
    assert c.status == doctor.FAIL and "invalid" in c.detail
    c = doctor.check_sharing([labelled("ts-4", **{GFD_REPLICAS: "1"})], "dp", {"ts-4": TS4})
    assert c.status == doctor.WARN and "reports ×1" in c.detail
    mps = device_plugin.config_text(sharing.make_sharing("mps", 2))
    mig = node(
        "m", 0, alloc={"nvidia.com/mig-1g.10gb": "7"}, labels={device_plugin.CONFIG_LABEL: "mps-2"}
    )
    c = doctor.check_sharing([mig], "dp", {"mps-2": mps})
    assert c.status == doctor.FAIL and "MPS config 'mps-2' on a MIG node" in c.detail


def test_doctor_command_passes_on_a_ready_cluster(cli, kube_api):
    seed(kube_api, node("gpu-1"), PLUGIN, DCGM)
    r = cli("doctor", "-o", "json")
    assert r.code == 0, r
    data = json.loads(r.out)
    assert data["ok"] is True
    assert {c["name"]: c["status"] for c in data["checks"]} == {
        "gpu-nodes": "pass",
        "feature-discovery": "pass",
        "gpu-types": "pass",
        "device-plugin": "pass",
        "mig": "pass",
        "sharing": "pass",
        "topology": "pass",  # one node: no multi-node pool (tests/doctor/test_topology.py)
        "dcgm-exporter": "pass",
        "kueue": "warn",  # not installed: quotas are ResourceQuotas (tests/doctor/test_queues.py)
        "jobset": "warn",
    }


def test_doctor_command_exits_1_on_a_failure_and_shows_fixes(cli, kube_api):
    seed(
        kube_api,
        node("gpu-1", labels={device_plugin.CONFIG_LABEL: "ts-4"}),
        node("gpu-2", labels={"nvidia.com/mig.config": "all-1g.10gb", doctor.MIG_STATE: "failed"}),
        PLUGIN,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dp-config", "namespace": "gpu-operator"},
            "data": {"ts-8": TS4},
        },
    )
    r = cli("doctor", "-o", "json")
    assert r.code == 1
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert (
        checks["sharing"]["status"] == "fail"
        and "'ts-4' is not in ConfigMap" in checks["sharing"]["detail"]
    )
    assert checks["mig"]["status"] == "fail" and checks["mig"]["fix"]
    assert checks["dcgm-exporter"]["status"] == "warn"
    # one node only: gpu-1's problems are not gpu-2's
    r = cli("doctor", "--node", "gpu-2", "-o", "json")
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert checks["sharing"]["status"] == "pass" and checks["mig"]["status"] == "fail"
    r = cli("doctor")
    assert r.code == 1 and "fail" in r.out and "sharing" in r.out


def test_doctor_unknown_node(cli, kube_api):
    seed(kube_api, node("gpu-1"))
    r = cli("doctor", "--node", "nope")
    assert r.code == 1 and "no node 'nope'" in r.err


def test_a_configmap_the_plugin_does_not_mount_does_not_count(cli, kube_api):
    """gpuctl's own ConfigMap holds ts-4, but the plugin mounts none: the label does nothing."""
    seed(
        kube_api,
        node("gpu-1", labels={device_plugin.CONFIG_LABEL: "ts-4"}),
        DCGM,
        daemonset("nvidia-device-plugin-daemonset", "gpu-operator"),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": device_plugin.DEFAULT_CONFIG_MAP, "namespace": "gpu-operator"},
            "data": {"ts-4": TS4},
        },
    )
    r = cli("doctor", "-o", "json")
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert r.code == 1 and checks["sharing"]["status"] == "fail"
    assert "reads no config ConfigMap" in checks["sharing"]["detail"]


def test_gpu_types_names_each_model_and_warns_where_no_gpu_type_can_select():
    from tests.node_corpus import corpus

    real = list(corpus().values())
    check = doctor.check_gpu_types(real)
    assert check.status == doctor.PASS
    assert (
        "H100-80GB (gfd/gpuctl)" in check.detail and "A100-40GB (gfd/gke/karpenter)" in check.detail
    )
    odd = node("odd", 1, labels={"nvidia.com/gpu.product": "NVIDIA-Future-GPU"})
    check = doctor.check_gpu_types([*real, odd])
    assert check.status == doctor.WARN and "odd (labelled NVIDIA-Future-GPU)" in check.detail


def test_mig_is_applied_only_where_an_enabling_config_succeeded():
    from tests.node_corpus import corpus

    real = corpus()
    disabled = doctor.check_mig([real["gfd-h100"], real["gfd-a100-80gb"]])
    assert disabled.status == doctor.PASS and disabled.detail.startswith("MIG is not in use")
    applied = doctor.check_mig([real["gfd-h100"], real["gfd-a100-mig-single"]])
    assert applied.detail.startswith("MIG applied on r7525-a100-mig")
    assert "xe9680-h100" not in applied.detail


def _gpu_series(host, *fields, mig=None):
    from tests.standins.prometheus import Series

    labels = {"gpu": "0", "UUID": f"GPU-{host}", "modelName": "NVIDIA H100 80GB HBM3"}
    labels.update(Hostname=host, instance=f"{host}:9400", job="nvidia-dcgm-exporter")
    if mig:  # a MIG slice's series: its GPU instance and profile
        labels.update(GPU_I_ID=str(mig[0]), GPU_I_PROFILE=mig[1])
    return [Series(name, labels, 0.5, history_s=120) for name in fields]


@pytest.mark.integration
def test_doctor_says_when_prometheus_has_only_a_duty_cycle(cli, kube_api, prometheus_with):
    seed(kube_api, node("gpu-1"), PLUGIN, DCGM)
    util, gr, sm = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE"
    # GPUs and MIG slices counted apart: c's GPU is split into two slices, one without SM_ACTIVE
    slices = _gpu_series("c", util, gr, sm, mig=(1, "3g.40gb"))
    slices += _gpu_series("c", util, gr, mig=(2, "3g.40gb"))
    mixed = prometheus_with(_gpu_series("a", util, gr, sm) + _gpu_series("b", util, gr) + slices)
    r = cli("doctor", "-o", "json", "--prometheus", mixed.url)
    assert r.code == 0, r
    check = by_name(doctor.Check(**c) for c in json.loads(r.out)["checks"])["busy signal"]
    assert (check.status, check.detail) == (
        "warn",
        "only a duty cycle on 1 of 2 GPUs and 1 of 2 MIG slices: no SM_ACTIVE",
    )
    assert "dcgmExporter.config" in check.fix
    good = prometheus_with(_gpu_series("a", util, sm))
    r = cli("doctor", "-o", "json", "--prometheus", good.url)
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert checks["busy signal"]["status"] == "pass"
    assert checks["busy signal"]["detail"] == "SM activity (DCGM_FI_PROF_SM_ACTIVE) on all 1 GPU"


def test_busy_signal_counts_gpus_and_mig_slices_apart():
    """The sandbox's default cluster: 24 whole GPUs and 8 A100s as 56 1g.10gb slices, all on
    dcgm-exporter's default counters (no SM_ACTIVE): 80 devices, not 80 GPUs."""
    check = doctor.check_busy_signal({"any": 24, "any_mig": 56})
    assert (check.status, check.detail) == (
        "warn", "only a duty cycle on all 24 GPUs and 56 MIG slices: no DCGM_FI_PROF_SM_ACTIVE"
    )  # fmt: skip
    check = doctor.check_busy_signal({"any": 2, "sm": 2, "any_mig": 7})
    assert check.detail == "only a duty cycle on 7 of 7 MIG slices: no SM_ACTIVE"


def test_mig_slices_are_not_counted_as_gpus():
    """Real nodes (tests/data/nodes): two A100 40GB as 14 1g.5gb slices under the single
    strategy, whose nvidia.com/gpu.count is the slices (k8s-device-plugin's GFD README:
    "Number of MIG devices"), and four A100 40GB as 7g.40gb under the mixed strategy."""
    from tests.node_corpus import corpus

    nodes = [corpus()["gfd-a100-mig-single"], corpus()["gfd-a100-mig-mixed"]]
    check = doctor.check_gpu_nodes(nodes)
    assert (check.status, check.detail) == (
        "pass", "2 GPU node(s), 6 GPUs, 6 split into 18 MIG slices"
    )  # fmt: skip


def test_gpu_nodes_counts_every_vendor_s_accelerators():
    from tests.node_corpus import corpus

    real = corpus()
    neuron, tpu, amd = (
        real["neuron-trn2-karpenter"],
        real["gke-tpu-v5e-2x4"],
        real["amd-labelled-no-capacity"],
    )
    both = doctor.check_gpu_nodes([node("gpu-1", 8), neuron, tpu, amd, node("cpu", 0, gfd=False)])
    assert (both.status, both.detail) == (
        "pass",
        "1 GPU node(s), 8 GPUs; 3 other accelerator node(s): "
        "16 aws.amazon.com/neuron, 128 aws.amazon.com/neuroncore, 4 google.com/tpu allocatable",
    )
    alone = doctor.check_gpu_nodes([neuron])
    assert (alone.status, alone.detail) == (
        "pass",
        "1 other accelerator node(s): 16 aws.amazon.com/neuron, "
        "128 aws.amazon.com/neuroncore allocatable",
    )
    # the NVIDIA checks stay NVIDIA's: GFD's labels are not asked of a Neuron node
    assert doctor.check_gfd([neuron, node("gpu-1", 8)]).status == "pass"
