"""`share timeslice|off --dry-run -o yaml` without a cluster (no kubeconfig at all): the
objects a cluster in the assumed state would get, as kubectl's client dry run prints them."""

import pytest
import yaml

from gpuctl.k8s import device_plugin
from gpuctl.sharing.core import config as sharing
from tests.crd_schema import assert_valid_cr
from tests.gpu_cluster import daemonset, mark, node, seed, writes
from tests.k8s_schema import assert_valid

NS = "gpu-operator"


def offline(cli, *args):
    r = cli(*args)  # KUBECONFIG names a missing file (tests/conftest.py), no emulator runs
    assert r.code == 0, r
    assert "no cluster (" in r.err and "dry run: nothing was changed" in r.err
    return r


def test_timeslice_renders_the_config_map_and_node_labels(cli):
    r = offline(
        cli,
        "share",
        "timeslice",
        "--replicas",
        "4",
        "--node",
        "gpu-1,gpu-2",
        "--dry-run",
        "-o",
        "yaml",
    )
    docs = list(yaml.safe_load_all(r.out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ConfigMap", device_plugin.DEFAULT_CONFIG_MAP),
        ("Node", "gpu-1"),
        ("Node", "gpu-2"),
    ]
    cm = docs[0]
    assert cm["metadata"]["namespace"] == NS
    # the device plugin reads each key back as the config gpuctl meant
    assert device_plugin.parse_config(cm["data"]["ts-4"]) == sharing.make_sharing(
        device_plugin.TIME_SLICING, 4, False, None, ()
    )
    assert device_plugin.parse_config(cm["data"]["default"]) is None  # unlabelled nodes: no sharing
    assert [d["metadata"]["labels"] for d in docs[1:]] == [{device_plugin.CONFIG_LABEL: "ts-4"}] * 2
    for d in docs:
        assert_valid(d)
    # what it had to assume is said first, with the options that change it; the rest of
    # why under --debug
    point = (
        f"assumed without a cluster: the device plugin reads ConfigMap "
        f"{NS}/{device_plugin.DEFAULT_CONFIG_MAP} (-n, --config-map to change)"
    )
    assert point in r.err and "(--debug for the details)" in r.err
    assert "devicePlugin.config.default" not in r.err
    debug = offline(cli, "share", "timeslice", "--debug", "--replicas", "4", "--dry-run")
    assert point in debug.err and "(--debug for the details)" not in debug.err
    assert "  its fallback key: Helm config.default=default; GPU Operator" in debug.err


def test_timeslice_takes_the_plugin_location_from_options(cli):
    r = offline(
        cli,
        "share",
        "timeslice",
        "--replicas",
        "2",
        "--mps",
        "-n",
        "nvidia-device-plugin",
        "--config-map",
        "dp-configs",
        "--dry-run",
        "-o",
        "json",
    )
    cm = yaml.safe_load(r.out)["items"][0]
    assert cm["metadata"]["namespace"] == "nvidia-device-plugin"
    assert cm["metadata"]["name"] == "dp-configs"
    assert device_plugin.parse_config(cm["data"]["mps-2"]).strategy == device_plugin.MPS
    assert "-n to change" not in r.err


def test_timeslice_without_node_names_says_how_to_label_them(cli):
    r = offline(
        cli, "share", "timeslice", "--replicas", "4", "-l", "pool=a", "--dry-run", "-o", "yaml"
    )
    assert [d["kind"] for d in yaml.safe_load_all(r.out)] == ["ConfigMap"]
    assert f"kubectl label nodes -l pool=a {device_plugin.CONFIG_LABEL}=ts-4 --overwrite" in r.err


def test_without_dry_run_a_missing_cluster_is_an_error(cli):
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes")
    assert r.code == 1 and "no usable Kubernetes configuration" in r.err and r.out == ""
    r = cli("share", "off", "--node", "gpu-1", "--yes")
    assert r.code == 1 and r.out == ""


def test_a_named_kubeconfig_is_never_skipped(cli, tmp_path):
    r = cli(
        "share", "timeslice", "--replicas", "4", "--dry-run", "--kubeconfig", str(tmp_path / "x")
    )
    assert r.code == 2 and "--kubeconfig" in r.err and r.out == ""


def test_offline_equals_a_dry_run_on_the_cluster_it_assumes(cli, kube, kube_api, monkeypatch):
    """The Helm chart with config.name=gpuctl-sharing-config, config.default=default, no
    such ConfigMap yet, nodes without the label: the cluster says what offline assumes."""
    args = ["share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--dry-run", "-o", "yaml"]
    seed(
        kube_api,
        node("gpu-1"),
        daemonset(
            "nvidia-device-plugin",
            NS,
            config_map=device_plugin.DEFAULT_CONFIG_MAP,
            operator_style=False,
            default_config="default",
        ),
    )
    since = mark(kube)
    online = cli(*args)
    assert online.code == 0 and writes(kube, since) == [], online
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert offline(cli, *args).out == online.out


def test_off_renders_label_removals(cli):
    r = offline(cli, "share", "off", "--node", "gpu-1", "--dry-run", "-o", "yaml")
    docs = list(yaml.safe_load_all(r.out))
    assert docs == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {device_plugin.CONFIG_LABEL: None}},
        }
    ]
    assert "shares nothing" in r.err  # the assumption about the plugin's default config
    r = offline(cli, "share", "off", "-l", "pool=a", "--dry-run", "-o", "yaml")
    assert r.out == "" and f"kubectl label nodes -l pool=a {device_plugin.CONFIG_LABEL}-" in r.err


QUOTA = "quota set team-a --gpus 4 --dry-run -o yaml".split()
KUEUE_RESOURCES = ["--cpu", "8", "--memory", "64Gi"]  # what nodes would tell
KUEUE_OBJECTS = ["Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue"]


@pytest.mark.parametrize("engine", ["resourcequota", "kueue"])
def test_quota_set_renders_without_a_cluster(cli, engine):
    extra = KUEUE_RESOURCES if engine == "kueue" else []
    r = offline(cli, *QUOTA, "--engine", engine, *extra)
    kinds = [d["kind"] for d in yaml.safe_load_all(r.out)]
    assert kinds == (["Namespace", "ResourceQuota"] if engine == "resourcequota" else KUEUE_OBJECTS)


def test_quota_set_offline_defaults_to_kueue_and_says_so(cli):
    r = offline(cli, *QUOTA, *KUEUE_RESOURCES)
    assert "ClusterQueue" in [d["kind"] for d in yaml.safe_load_all(r.out)]
    assert "engine: kueue, as no cluster says which" in r.err


def test_quota_offline_equals_a_dry_run_on_an_empty_cluster(cli, kube, monkeypatch):
    args = ["quota", "set", "team-a", "--gpus", "4", "--mig", "1g.10gb=2", "--engine"]
    args += ["resourcequota", "--dry-run", "-o", "yaml"]
    online = cli(*args)
    assert online.code == 0, online
    for d in yaml.safe_load_all(online.out):
        assert_valid(d)
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert offline(cli, *args).out == online.out


def test_kueue_quota_offline_equals_a_dry_run_on_the_cluster_it_assumes(
    cli, kube, kube_api, monkeypatch
):
    """Kueue installed (the API emulator serves its CRDs), no namespace, flavor or queue yet,
    and a GPU node of the type named: every object is new, as offline assumes."""
    args = [*QUOTA, "--mig", "1g.10gb=2", "--engine", "kueue", "--gpu-type", "h100"]
    args += [*KUEUE_RESOURCES, "--cohort", "ml", "--borrowing-limit", "2"]
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    seed(kube_api, node("gpu-1", labels={"gpu-type": "h100"}, gfd=False))
    since = mark(kube)
    online = cli(*args)
    assert online.code == 0 and writes(kube, since) == [], online
    namespace, *queues = yaml.safe_load_all(online.out)
    assert [d["kind"] for d in (namespace, *queues)] == KUEUE_OBJECTS
    assert_valid(namespace)
    for d in queues:
        assert_valid_cr(d)
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert offline(cli, *args).out == online.out
