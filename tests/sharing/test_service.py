"""`gpuctl share` against the Kubernetes API emulator, through the official client."""

import json

import pytest
import yaml

from gpuctl.k8s import device_plugin
from gpuctl.sharing.core import config as sharing
from tests.gpu_cluster import daemonset, mark, node, seed, writes
from tests.k8s_schema import assert_valid

NS, CM = "gpu-operator", "dp-config"
MIG_NODE = node(
    "mig-1",
    0,
    alloc={"nvidia.com/mig-1g.10gb": "7"},
    # one H100 split into 7 slices: GFD's gpu.count is the physical GPUs under the mixed strategy
    labels={
        "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "1",
    },
)


@pytest.fixture
def cluster(kube, kube_api):
    seed(
        kube_api,
        node("gpu-1", labels={"pool": "a"}),
        node("gpu-2", labels={"pool": "b"}),
        node("cpu-1", 0, gfd=False, labels={"pool": "a"}),
        MIG_NODE,
        daemonset("nvidia-device-plugin-daemonset", NS, config_map=CM),
    )
    return kube_api


def config_map(name, data):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": data,
    }


def core_api(api):
    from kubernetes import client

    return client.CoreV1Api(api)


def config_label(api, name):
    return (core_api(api).read_node(name).metadata.labels or {}).get(device_plugin.CONFIG_LABEL)


def test_timeslice_writes_config_then_labels_selected_nodes(cli, kube, cluster):
    since = mark(kube)
    r = cli("share", "timeslice", "--replicas", "4", "--selector", "pool=a", "--yes")
    assert r.code == 0, r
    # the config exists before any node points at it
    assert writes(kube, since) == [
        ("POST", f"/api/v1/namespaces/{NS}/configmaps"),
        ("PATCH", "/api/v1/nodes/gpu-1"),
    ]
    cm = core_api(cluster).read_namespaced_config_map(CM, NS)
    assert yaml.safe_load(cm.data["ts-4"]) == {
        "version": "v1",
        "sharing": {
            "timeSlicing": {
                "renameByDefault": False,
                "failRequestsGreaterThanOne": False,
                "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
            }
        },
    }
    assert config_label(cluster, "gpu-1") == "ts-4"
    # cpu-1 matches the selector but has no GPU; gpu-2 does not match
    assert config_label(cluster, "cpu-1") is None and config_label(cluster, "gpu-2") is None
    # the emulator ignores selectors: the request must still carry it
    assert any(
        p == "/api/v1/nodes" and q.get("labelSelector") == "pool=a" for _, p, q in kube.requests()
    )
    assert "gpu-1: label nvidia.com/device-plugin.config: (none) → ts-4" in r.err


def test_rerun_is_idempotent_and_sends_no_write(cli, kube, cluster):
    assert cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes").code == 0
    since = mark(kube)
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes")
    assert (
        r.code == 0
        and "nothing to change" in r.err
        and "ConfigMap gpu-operator/dp-config: unchanged" in r.err
    )
    assert writes(kube, since) == []


def test_dry_run_prints_valid_objects_and_changes_nothing(cli, kube, cluster):
    since = mark(kube)
    r = cli(
        "share",
        "timeslice",
        "--replicas",
        "3",
        "--mps",
        "--rename-by-default",
        "--node",
        "gpu-1,gpu-2",
        "--dry-run",
        "-o",
        "yaml",
    )
    assert r.code == 0, r
    docs = list(yaml.safe_load_all(r.out))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Node", "Node"]
    for d in docs:
        assert_valid(d)
    config = yaml.safe_load(docs[0]["data"]["mps-3-rename"])
    assert config["sharing"]["mps"] == {
        "renameByDefault": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 3}],
    }
    assert docs[1]["metadata"]["labels"] == {device_plugin.CONFIG_LABEL: "mps-3-rename"}
    assert writes(kube, since) == []
    assert "dry run: nothing was changed" in r.err


def test_existing_configmap_keeps_its_other_configs(cli, cluster):
    seed(cluster, config_map(CM, {"default": "version: v1\nflags: {migStrategy: mixed}\n"}))
    assert cli("share", "timeslice", "--replicas", "2", "--node", "gpu-2", "--yes").code == 0
    data = core_api(cluster).read_namespaced_config_map(CM, NS).data
    assert set(data) == {"default", "ts-2"}
    assert device_plugin.parse_config(data["ts-2"]).replicas == 2


def test_same_name_with_other_content_is_refused(cli, kube, cluster):
    seed(
        cluster,
        config_map(CM, {"shared": device_plugin.config_text(sharing.make_sharing("mps", 2))}),
    )
    since = mark(kube)
    r = cli("share", "timeslice", "--replicas", "4", "--name", "shared", "--node", "gpu-1", "--yes")
    assert r.code == 1 and "already has a config 'shared' with different content" in r.err
    assert writes(kube, since) == []


def test_mps_is_refused_on_mig_nodes_before_anything_is_sent(cli, kube, cluster):
    since = mark(kube)
    r = cli("share", "timeslice", "--replicas", "4", "--mps", "--node", "gpu-1,mig-1", "--yes")
    assert r.code == 1
    assert "mig-1: MPS is not supported on MIG nodes" in r.err
    assert writes(kube, since) == []
    assert config_label(cluster, "gpu-1") is None


def test_switching_strategy_needs_replace(cli, kube, cluster):
    assert cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes").code == 0
    r = cli("share", "timeslice", "--replicas", "4", "--mps", "--node", "gpu-1", "--yes")
    assert r.code == 1 and "time-slicing and MPS are exclusive on a node" in r.err
    assert config_label(cluster, "gpu-1") == "ts-4"
    r = cli(
        "share", "timeslice", "--replicas", "4", "--mps", "--node", "gpu-1", "--yes", "--replace"
    )
    assert r.code == 0, r
    assert config_label(cluster, "gpu-1") == "mps-4"


def test_without_yes_and_no_terminal_nothing_changes(cli, kube, cluster):
    since = mark(kube)
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1")
    assert r.code == 3 and "--yes" in r.err
    assert writes(kube, since) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--replicas", "1"], "between 2 and"),
        (["--replicas", "4", "--node", "gpu-1", "--selector", "pool=a"], "not both"),
        (["--replicas", "4", "--selector", "pool in a"], "bad label selector"),
        (["--replicas", "4", "--name", "bad name"], "config name"),
        (["--replicas", "4", "--node", " , "], "without a node name"),
        # --selector "$UNSET" must not widen to every GPU node
        (["--replicas", "4", "--selector", ""], "empty label selector"),
        (["--replicas", "4", "-n", "GPU_Operator"], "not a valid namespace name"),
    ],
)
def test_bad_options_exit_2_and_send_nothing(cli, kube, cluster, args, message):
    since = mark(kube)
    r = cli("share", "timeslice", *args, "--yes")
    assert r.code == 2 and message in r.err, r
    assert writes(kube, since) == []


def test_unknown_node_and_missing_plugin(cli, kube, kube_api):
    seed(kube_api, node("gpu-1"))
    r = cli("share", "timeslice", "--replicas", "4", "--yes")
    assert r.code == 1 and "no NVIDIA device plugin DaemonSet found" in r.err
    seed(kube_api, daemonset("nvidia-device-plugin-daemonset", NS))
    r = cli("share", "timeslice", "--replicas", "4", "--node", "nope", "--yes")
    assert r.code == 1 and "no such node: nope" in r.err
    # a plugin that mounts no ConfigMap: gpuctl's own, and a warning how to point it there
    r = cli("share", "timeslice", "--replicas", "4", "--dry-run")
    assert r.code == 0 and f"{NS}/{device_plugin.DEFAULT_CONFIG_MAP}" in r.err
    assert "does not read ConfigMap" in r.err and "devicePlugin" in r.err


def test_show_lists_strategy_and_replicas(cli, cluster):
    assert cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes").code == 0
    r = cli("share", "show", "-o", "json")
    assert r.code == 0, r
    data = json.loads(r.out)
    assert (data["namespace"], data["configMap"]) == (NS, CM)
    by = {row["node"]: row for row in data["nodes"]}
    assert set(by) == {"gpu-1", "gpu-2", "mig-1"}
    assert (by["gpu-1"]["strategy"], by["gpu-1"]["replicas"], by["gpu-1"]["config"]) == (
        "time-slicing",
        4,
        "ts-4",
    )
    assert (by["gpu-2"]["strategy"], by["gpu-2"]["replicas"]) == ("none", 1)
    assert by["mig-1"]["mig"] is True and by["mig-1"]["mig_slices"] == 7
    assert by["mig-1"]["allocatable"] == {"nvidia.com/mig-1g.10gb": 7}
    r = cli("share", "show")
    assert r.code == 0 and "gpu-1" in r.out and "time-slicing" in r.out


def test_off_removes_only_the_config_label(cli, kube, cluster):
    assert cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1,gpu-2", "--yes").code == 0
    since = mark(kube)
    r = cli("share", "off", "--node", "gpu-1", "--dry-run")
    assert r.code == 0 and "remove label" in r.err and writes(kube, since) == []
    r = cli("share", "off", "--node", "gpu-1", "--yes")
    assert r.code == 0, r
    labels = core_api(cluster).read_node("gpu-1").metadata.labels
    assert device_plugin.CONFIG_LABEL not in labels and labels["pool"] == "a"
    assert config_label(cluster, "gpu-2") == "ts-4"
    # with the label gone, the node may switch to MPS without --replace
    r = cli("share", "timeslice", "--replicas", "2", "--mps", "--node", "gpu-1", "--yes")
    assert r.code == 0, r
    assert cli("share", "off").code == 2


def test_namespace_without_the_plugin_warns_that_nothing_reads_it(cli, kube, cluster):
    r = cli(
        "share", "timeslice", "--replicas", "4", "--node", "gpu-1", "-n", "elsewhere", "--dry-run"
    )
    assert r.code == 0, r
    assert f"elsewhere/{device_plugin.DEFAULT_CONFIG_MAP}" in r.err  # not the plugin's, elsewhere
    assert "does not read ConfigMap" in r.err


# ---- the Helm chart: its fallbacks make a lone key every unlabelled node's config ------

HELM_CM = "nvidia-device-plugin-configs"


@pytest.fixture
def helm_cluster(kube, kube_api):
    """The nvidia-device-plugin chart with config.name=HELM_CM and its default
    config.fallbackStrategies [named, single] (no config.default)."""
    seed(
        kube_api,
        node("gpu-1"),
        node("gpu-2"),
        daemonset("nvidia-device-plugin", NS, config_map=HELM_CM, operator_style=False),
    )
    return kube_api


def rows(cli):
    r = cli("share", "show", "-o", "json")
    assert r.code == 0, r
    return {row["node"]: row for row in json.loads(r.out)["nodes"]}


def test_helm_chart_timeslice_keeps_a_default_without_sharing(cli, helm_cluster):
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes")
    assert r.code == 0, r
    assert "and key 'default': a config without sharing" in r.err
    data = core_api(helm_cluster).read_namespaced_config_map(HELM_CM, NS).data
    assert set(data) == {"ts-4", "default"} and device_plugin.parse_config(data["default"]) is None
    by = rows(cli)
    assert (by["gpu-1"]["running_config"], by["gpu-1"]["strategy"]) == ("ts-4", "time-slicing")
    # gpu-2 has no label: the chart's "named" fallback gives it 'default', without sharing
    assert by["gpu-2"]["config"] is None
    assert (by["gpu-2"]["running_config"], by["gpu-2"]["config_source"]) == (
        "default",
        "fallback named",
    )
    assert by["gpu-2"]["strategy"] == "none"
    # and share off really is off: back on 'default', which shares nothing
    assert cli("share", "off", "--node", "gpu-1", "--yes").code == 0
    by = rows(cli)
    assert by["gpu-1"]["config"] is None and by["gpu-1"]["strategy"] == "none"


def lone_sharing_key(api):
    seed(
        api,
        config_map(
            HELM_CM, {"ts-4": device_plugin.config_text(sharing.make_sharing("time-slicing", 4))}
        ),
    )


def test_show_names_the_config_an_unlabelled_node_falls_back_to(cli, helm_cluster):
    lone_sharing_key(helm_cluster)
    by = rows(cli)
    # no label, yet time-slicing: the "single" fallback picks the only key
    assert by["gpu-2"]["config"] is None
    assert (by["gpu-2"]["running_config"], by["gpu-2"]["config_source"]) == (
        "ts-4",
        "fallback single",
    )
    assert (by["gpu-2"]["strategy"], by["gpu-2"]["replicas"]) == ("time-slicing", 4)
    r = cli("share", "show")
    assert "(ts-4: fallback single)" in r.out


def test_off_stops_sharing_where_removing_the_label_would_not(cli, kube, helm_cluster):
    lone_sharing_key(helm_cluster)
    core_api(helm_cluster).patch_node(
        "gpu-1", {"metadata": {"labels": {device_plugin.CONFIG_LABEL: "ts-4"}}}
    )
    since = mark(kube)
    r = cli("share", "off", "--node", "gpu-1", "--dry-run")
    assert r.code == 0 and writes(kube, since) == []
    assert f"ConfigMap {NS}/{HELM_CM}: add key 'default' (a config without sharing)" in r.err
    assert "nodes without the label: run 'ts-4' (fallback single, time-slicing ×4) now" in r.err
    r = cli("share", "off", "--node", "gpu-1", "--yes")
    assert r.code == 0, r
    # the key first, then the label: the node never falls back to the sharing config
    assert writes(kube, since) == [
        ("PATCH", f"/api/v1/namespaces/{NS}/configmaps/{HELM_CM}"),
        ("PATCH", "/api/v1/nodes/gpu-1"),
    ]
    by = rows(cli)
    for name in ("gpu-1", "gpu-2"):
        assert (by[name]["running_config"], by[name]["strategy"]) == ("default", "none")


def test_off_labels_a_config_without_sharing_where_the_default_shares(cli, kube, kube_api):
    # config.default=ts-4: the admin's choice for unlabelled nodes; off must not rely on it
    seed(
        kube_api,
        node("gpu-1", labels={device_plugin.CONFIG_LABEL: "ts-4"}),
        node("gpu-2"),
        daemonset(
            "nvidia-device-plugin",
            NS,
            config_map=HELM_CM,
            operator_style=False,
            default_config="ts-4",
        ),
    )
    lone_sharing_key(kube_api)
    r = cli("share", "off", "--node", "gpu-1", "--yes")
    assert r.code == 0, r
    assert config_label(kube_api, "gpu-1") == "default"
    by = rows(cli)
    assert by["gpu-1"]["strategy"] == "none"
    # the unlabelled node keeps the default the admin chose
    assert (by["gpu-2"]["running_config"], by["gpu-2"]["config_source"]) == (
        "ts-4",
        "DEFAULT_CONFIG",
    )


def test_fallbacks_that_cannot_be_kept_safe_are_refused(cli, kube, kube_api):
    seed(
        kube_api,
        node("gpu-1"),
        daemonset(
            "nvidia-device-plugin", NS, config_map=HELM_CM, operator_style=False, fallbacks="single"
        ),
    )
    since = mark(kube)
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes")
    assert r.code == 1 and "nodes without the sharing label would share as 'ts-4'" in r.err
    assert "config.default=default" in r.err and writes(kube, since) == []


def test_unmounted_config_map_advice_sets_a_default_without_sharing(cli, kube, kube_api):
    seed(kube_api, node("gpu-1"), daemonset("nvidia-device-plugin-daemonset", NS))
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--dry-run", "-o", "yaml")
    assert r.code == 0, r
    assert (
        f"--set config.name={device_plugin.DEFAULT_CONFIG_MAP} --set config.default=default"
        in r.err
    )
    assert '"default": "default"' in r.err  # the ClusterPolicy patch
    cm = next(yaml.safe_load_all(r.out))
    assert set(cm["data"]) == {"ts-4", "default"}


def test_mps_can_write_an_explicit_false_for_requests_over_one(cli, cluster):
    r = cli(
        "share",
        "timeslice",
        "--replicas",
        "4",
        "--mps",
        "--no-fail-requests-greater-than-one",
        "--node",
        "gpu-1",
        "--yes",
    )
    assert r.code == 0, r
    data = core_api(cluster).read_namespaced_config_map(CM, NS).data
    assert yaml.safe_load(data["mps-4-multi"])["sharing"]["mps"] == {
        "renameByDefault": False,
        "failRequestsGreaterThanOne": False,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
    }
    assert config_label(cluster, "gpu-1") == "mps-4-multi"


def test_a_refusal_for_several_nodes_prints_one_line_per_node(cli, kube, cluster):
    r = cli("share", "timeslice", "--replicas", "4", "--mps", "--node", "mig-1,cpu-1", "--yes")
    assert r.code == 1 and "\\n" not in r.err, r
    lines = r.err.splitlines()
    assert lines[0] == "gpuctl: error: refusing to change sharing on 2 node(s):"
    assert lines[1].startswith("  mig-1: MPS is not supported on MIG nodes")
    assert lines[2].startswith("  cpu-1: ")
    assert lines[3].startswith("  hint: ")


def test_show_on_a_fresh_cluster_reports_no_problem(cli, kube_api):
    """A device plugin that mounts no config runs no config-manager (the GPU Operator
    removes it without devicePlugin.config, controllers/object_controls.go
    handleDevicePluginConfig; the Helm chart adds it only with config.name or config.map,
    templates/daemonset-device-plugin.yml): every node runs the plugin's built-in defaults,
    which is no problem. A node labelled for a config there is one: nothing reads the label."""
    seed(
        kube_api,
        node("gpu-1"),
        node("gpu-2", labels={device_plugin.CONFIG_LABEL: "ts-4"}),
        daemonset("nvidia-device-plugin-daemonset", NS),
    )
    by = rows(cli)
    assert by["gpu-1"]["problem"] is None
    assert (by["gpu-1"]["strategy"], by["gpu-1"]["running_config"]) == ("none", None)
    assert "the device plugin reads no config" in by["gpu-2"]["problem"]
    r = cli("share", "show")
    assert r.code == 0 and "config-manager fails" not in r.out


def test_show_counts_physical_gpus_not_slices_or_replicas(cli, kube_api):
    """Real nodes (tests/data/nodes): under the single MIG strategy nvidia.com/gpu counts
    the slices (two A100 40GB as 14 1g.5gb slices), under time-slicing the replicas (one T4
    as 8): GPUS is the physical GPUs, the slices apart, the resources as allocatable."""
    from tests.node_corpus import corpus

    nodes = corpus()
    seed(kube_api, nodes["gfd-a100-mig-single"], nodes["gfd-t4-shared"], nodes["gfd-h100"])
    by = rows(cli)
    mig, t4 = by["r7525-a100-mig"], by[nodes["gfd-t4-shared"]["metadata"]["name"]]
    assert (mig["gpus"], mig["mig_split_gpus"], mig["mig_slices"]) == (2, 2, 14)
    assert mig["allocatable"] == {"nvidia.com/gpu": 14}
    assert (t4["gpus"], t4["mig_slices"], t4["allocatable"]) == (1, 0, {"nvidia.com/gpu": 8})
    assert by[nodes["gfd-h100"]["metadata"]["name"]]["gpus"] == 8
    r = cli("share", "show")
    assert r.code == 0, r
    [line] = [line for line in r.out.splitlines() if line.startswith("r7525-a100-mig")]
    assert line.split()[1] == "2" and "2 into 14 slices" in line
