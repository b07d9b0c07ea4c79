"""Sharing config rendering, validation and node planning (pure)."""

import pytest
import yaml

from gpuctl.common import selector
from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.k8s import device_plugin
from gpuctl.k8s.nodes import GFD_REPLICAS, GFD_STRATEGY, mig_reason
from gpuctl.sharing.core import config as sharing
from tests.gpu_cluster import daemonset, node
from tests.k8s_schema import assert_valid

TS4 = sharing.make_sharing(device_plugin.TIME_SLICING, 4)
MPS4 = sharing.make_sharing(device_plugin.MPS, 4)


@pytest.mark.parametrize(
    "s",
    [
        TS4,
        MPS4,
        sharing.make_sharing(device_plugin.TIME_SLICING, 8, True, True),
        sharing.make_sharing(device_plugin.MPS, 2, rename_by_default=True),
        sharing.make_sharing(
            device_plugin.TIME_SLICING, 3, resources=("nvidia.com/gpu", "nvidia.com/mig-1g.10gb")
        ),
    ],
)
def test_config_round_trips_and_configmap_is_schema_valid(s):
    text = device_plugin.config_text(s)
    data = yaml.safe_load(text)
    assert data["version"] == "v1"
    section = data["sharing"]["timeSlicing" if s.strategy == device_plugin.TIME_SLICING else "mps"]
    assert section["resources"] == [{"name": r, "replicas": s.replicas} for r in s.resources]
    assert section["renameByDefault"] is s.rename_by_default
    assert list(data["sharing"]) == (
        ["timeSlicing"] if s.strategy == device_plugin.TIME_SLICING else ["mps"]
    )
    assert device_plugin.parse_config(text) == s
    cm = sharing.config_map("dp-config", "gpu-operator", {s.default_name: text})
    assert_valid(cm)
    assert_valid(sharing.node_label_patch("gpu-1", s.default_name))


def test_mps_config_has_no_fail_requests_flag():
    section = device_plugin.render_config(MPS4)["sharing"]["mps"]
    assert "failRequestsGreaterThanOne" not in section
    section = device_plugin.render_config(TS4)["sharing"]["timeSlicing"]
    assert section["failRequestsGreaterThanOne"] is False


def test_mps_can_allow_requests_for_more_than_one_replica():
    # The plugin (v0.20.0, api/config/v1/config.go) sets mps.failRequestsGreaterThanOne to
    # true only when the key is absent: an explicit false is written and read back as such.
    assert MPS4.fail_requests_greater_than_one is True  # the plugin's default
    lenient = sharing.make_sharing(device_plugin.MPS, 4, fail_requests_greater_than_one=False)
    section = device_plugin.render_config(lenient)["sharing"]["mps"]
    assert section["failRequestsGreaterThanOne"] is False
    assert device_plugin.parse_config(device_plugin.config_text(lenient)) == lenient
    assert device_plugin.parse_config(device_plugin.config_text(MPS4)) == MPS4
    assert lenient.default_name == "mps-4-multi" != MPS4.default_name
    strict = sharing.make_sharing(device_plugin.MPS, 4, fail_requests_greater_than_one=True)
    assert strict == MPS4  # true is what an absent key means


def test_default_names_differ_by_content_and_are_label_values():
    names = {
        sharing.make_sharing(st, r, rn, f, res).default_name
        for st, r, rn, f, res in [
            ("time-slicing", 4, False, False, ()),
            ("time-slicing", 4, True, False, ()),
            ("time-slicing", 4, False, True, ()),
            ("time-slicing", 8, False, False, ()),
            ("mps", 4, False, False, ()),
            ("mps", 4, True, False, ()),
            ("time-slicing", 4, False, False, ("nvidia.com/mig-1g.10gb",)),
        ]
    }
    assert len(names) == 7
    for n in names:
        assert sharing.check_name(n) == n


@pytest.mark.parametrize(
    "args, message",
    [
        (("time-slicing", 1), "between 2 and"),
        (("time-slicing", 100000), "between 2 and"),
        (("mps", 49), "between 2 and 48"),
        (("mps", 4, False, False, ("nvidia.com/mig-1g.10gb",)), "MPS can share only"),
        (
            ("time-slicing", 4, False, False, ("nvidia.com/mig-9g.99gb",)),
            "not nvidia.com/gpu or a MIG",
        ),
        (("time-slicing", 4, False, False, ("amd.com/gpu",)), "not nvidia.com/gpu or a MIG"),
    ],
)
def test_bad_options_are_usage_errors(args, message):
    with pytest.raises(UsageError, match=message):
        sharing.make_sharing(*args)


@pytest.mark.parametrize("name", ["", "-a", "a b", "x" * 64, "a/b", "ünï", "ts-4\n"])
def test_bad_config_names(name):
    with pytest.raises(UsageError):
        sharing.check_name(name)


@pytest.mark.parametrize(
    "text, message",
    [
        ("version: v2\n", "unsupported config version"),
        ("[1, 2]", "not a device plugin config"),
        (
            "version: v1\nsharing:\n  timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n"
            "  mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n",
            "exclusive",
        ),
        ("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu}]}}", "resources"),
        ("version: v1\nsharing: {timeSlicing: {resources: nope}}", "resources"),
        ("version: v1\n  bad: [", "not valid YAML"),
        ("version: v1\nx: " + "[" * 5000 + "]" * 5000, "config:2: nesting deeper than 64"),
        ("version: v1\nx: &a [1]\ny: [*a, *a]", "config:3: YAML aliases"),
    ],
)
def test_parse_config_rejects_what_the_plugin_would(text, message):
    with pytest.raises(GpuctlError, match=message):
        device_plugin.parse_config(text)


def test_parse_config_without_sharing_is_none():
    assert device_plugin.parse_config("version: v1\nflags: {migStrategy: none}\n") is None


def test_device_plugin_and_its_mounted_configmap():
    ds = [
        daemonset("nvidia-dcgm-exporter", "gpu-operator"),
        daemonset("nvidia-device-plugin-mps-control-daemon", "gpu-operator"),
        daemonset("nvidia-device-plugin-daemonset", "gpu-operator", config_map="ts-config"),
    ]
    plugin = device_plugin.find_device_plugin(ds)
    assert plugin["metadata"]["name"] == "nvidia-device-plugin-daemonset"
    assert device_plugin.plugin_config_map(plugin) == "ts-config"
    helm = daemonset(
        "nvdp-nvidia-device-plugin", "kube-system", config_map="nvdp-configs", operator_style=False
    )
    assert device_plugin.plugin_config_map(helm) == "nvdp-configs"
    assert device_plugin.plugin_config_map(daemonset("nvidia-device-plugin", "x")) is None
    assert device_plugin.find_device_plugin(ds[:2]) is None


def test_mig_nodes_are_recognised():
    assert mig_reason(node("a", 0, alloc={"nvidia.com/mig-1g.10gb": "7"}))
    assert mig_reason(node("b", labels={"nvidia.com/mig.config": "all-1g.10gb"}))
    assert mig_reason(
        node("c", labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"})
    )
    assert mig_reason(node("d", labels={"nvidia.com/mig.config": "all-disabled"})) is None
    assert mig_reason(node("e")) is None


def test_plan_refuses_mps_on_mig_and_names_the_reason():
    nodes = [node("gpu-1"), node("mig-1", 0, alloc={"nvidia.com/mig-3g.40gb": "2"})]
    with pytest.raises(GpuctlError) as e:
        sharing.plan(nodes, MPS4, "mps-4", {}, replace=False)
    assert "mig-1: MPS is not supported on MIG nodes" in str(e.value)
    assert "gpu-1" not in str(e.value)
    # time-slicing on the same node is allowed, with a note about MIG slices
    changes = sharing.plan(nodes, TS4, "ts-4", {}, replace=False)
    assert [c.node for c in changes] == ["gpu-1", "mig-1"]
    assert "MIG slices are not shared" in changes[1].note


def test_plan_keeps_time_slicing_and_mps_exclusive_unless_replace():
    configs = device_plugin.parse_configs({"mps-4": device_plugin.config_text(MPS4)})
    n = node("gpu-1", labels={device_plugin.CONFIG_LABEL: "mps-4"})
    with pytest.raises(
        GpuctlError, match="uses mps .config mps-4.; time-slicing and MPS are exclusive"
    ) as e:
        sharing.plan([n], TS4, "ts-4", configs, replace=False)
    assert "--replace" in e.value.hint
    [c] = sharing.plan([n], TS4, "ts-4", configs, replace=True)
    assert (c.old, c.new, c.changes) == ("mps-4", "ts-4", True) and "switches from mps" in c.note
    # the device plugin's default config (no label) counts too, as GFD reports it
    gfd = node("gpu-2", labels={GFD_STRATEGY: "mps", GFD_REPLICAS: "2"})
    with pytest.raises(GpuctlError, match="gpu-2: uses mps;"):
        sharing.plan([gfd], TS4, "ts-4", {}, replace=False)
    # same strategy, other replicas: a plain relabel
    [c] = sharing.plan(
        [node("gpu-3", labels={device_plugin.CONFIG_LABEL: "mps-4"})],
        sharing.make_sharing("mps", 8),
        "mps-8",
        configs,
        replace=False,
    )
    assert c.changes


def test_plan_refuses_non_gpu_nodes_and_marks_unchanged():
    with pytest.raises(GpuctlError, match="cpu-1: no NVIDIA GPU"):
        sharing.plan([node("cpu-1", 0, gfd=False)], TS4, "ts-4", {}, replace=False)
    [c] = sharing.plan(
        [node("g", labels={device_plugin.CONFIG_LABEL: "ts-4"})],
        TS4,
        "ts-4",
        device_plugin.parse_configs({"ts-4": device_plugin.config_text(TS4)}),
        False,
    )
    assert not c.changes


def test_select_nodes_by_name_selector_or_all_gpu_nodes():
    nodes = [
        node("a", labels={"pool": "x"}),
        node("b", labels={"pool": "y"}),
        node("cpu", 0, gfd=False, labels={"pool": "x"}),
    ]
    names = lambda ns: [n["metadata"]["name"] for n in ns]  # noqa: E731
    assert names(sharing.select_nodes(nodes, (), ())) == ["a", "b"]
    assert names(sharing.select_nodes(nodes, (), selector.parse("pool=x"))) == ["a"]
    assert names(sharing.select_nodes(nodes, ("b", "a", "b"), ())) == ["b", "a"]
    with pytest.raises(GpuctlError, match="no such node: zz"):
        sharing.select_nodes(nodes, ("a", "zz"), ())


@pytest.mark.parametrize(
    "text, labels, expected",
    [
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": "x"}, False),
        ("a in (x, y),b", {"a": "y", "b": "1"}, True),
        ("a notin (x,y)", {"a": "x"}, False),
        ("a notin (x,y)", {}, True),
        (
            "nvidia.com/gpu.product=H100,pool!=spot",
            {"nvidia.com/gpu.product": "H100", "pool": "od"},
            True,
        ),
    ],
)
def test_label_selector_matching(text, labels, expected):
    assert selector.matches(selector.parse(text), labels) is expected


@pytest.mark.parametrize(
    "text", ["", "a=b=c", "a in x", "a in (x", "=b", "a b", "a=(b)", "a in ()", "a notin ( )"]
)
def test_bad_label_selectors(text):
    with pytest.raises(UsageError):
        selector.parse(text)


def test_show_rows_report_config_applied_and_problems():
    configs = device_plugin.parse_configs(
        {"ts-4": device_plugin.config_text(TS4), "bad": "version: v9"}
    )
    rows = sharing.show_rows(
        [
            node(
                "a",
                32,
                labels={
                    device_plugin.CONFIG_LABEL: "ts-4",
                    GFD_REPLICAS: "4",
                    GFD_STRATEGY: "time-slicing",
                },
            ),
            node("b", labels={device_plugin.CONFIG_LABEL: "gone"}),
            node("c", labels={device_plugin.CONFIG_LABEL: "bad"}),
            node("cpu", 0, gfd=False),
        ],
        configs,
    )
    by = {r["node"]: r for r in rows}
    assert set(by) == {"a", "b", "c"}
    assert (by["a"]["strategy"], by["a"]["replicas"], by["a"]["applied_replicas"]) == (
        "time-slicing",
        4,
        4,
    )
    assert "not in the ConfigMap" in by["b"]["problem"]
    assert "unsupported config version" in by["c"]["problem"]
    [row] = sharing.show_rows([node("d", labels={device_plugin.CONFIG_LABEL: "ts-4"})], {})
    assert row["problem"] == "no ConfigMap of device plugin configs"


# ---- which config a node runs: the device plugin's config-manager -------------------


@pytest.mark.parametrize(
    "label, keys, sel, expected",
    [
        # the label names a key
        ("ts-4", ["default", "ts-4"], sharing.Selection(), ("ts-4", "label", None)),
        (
            "nope",
            ["ts-4"],
            sharing.Selection(),
            (None, "label", "specified config nope does not exist"),
        ),
        # no label: DEFAULT_CONFIG first
        (None, ["a", "b"], sharing.Selection("b"), ("b", "DEFAULT_CONFIG", None)),
        # the Helm chart's fallbacks: a key named "default", else the only key
        (None, ["default", "ts-4"], sharing.Selection(), ("default", "fallback named", None)),
        (None, ["ts-4"], sharing.Selection(), ("ts-4", "fallback single", None)),
        (
            None,
            ["mps-2", "ts-4"],
            sharing.Selection(),
            (
                None,
                "fallback",
                "no config was set, no default was provided, and all fallbacks failed",
            ),
        ),
        # the GPU Operator's: no config file at all
        (None, ["ts-4"], sharing.Selection(None, ("empty",)), (None, "fallback empty", None)),
        ("", ["ts-4"], sharing.Selection(None, ("empty",)), (None, "fallback empty", None)),
    ],
)
def test_the_config_a_node_runs_is_chosen_as_the_config_manager_chooses(label, keys, sel, expected):
    c = sharing.chosen_config(label, keys, sel)
    assert (c.key, c.how, c.error) == expected


def test_plugin_selection_is_read_from_the_config_manager_environment():
    helm = daemonset("nvidia-device-plugin", "x", config_map="c", operator_style=False)
    assert sharing.plugin_selection(helm) == sharing.Selection(None, ("named", "single"))
    op = daemonset("nvidia-device-plugin-daemonset", "x", config_map="c", default_config="ts-2")
    assert sharing.plugin_selection(op) == sharing.Selection("ts-2", ("empty",))
    assert sharing.plugin_selection(daemonset("nvidia-device-plugin", "x")) is None


def test_a_new_sharing_config_keeps_unlabelled_nodes_unshared():
    ts4 = device_plugin.config_text(TS4)
    helm = sharing.Selection()
    # the chart's "single" fallback would make ts-4 every unlabelled node's config
    assert sharing.keep_unlabelled_unshared({}, {"ts-4": ts4}, helm) == {
        "default": sharing.NO_SHARING_TEXT
    }
    assert device_plugin.parse_config(sharing.NO_SHARING_TEXT) is None
    # a "default" already there (e.g. flags for MIG) does it; so does the operator's "empty"
    assert (
        sharing.keep_unlabelled_unshared(
            {"default": "version: v1\n"}, {"default": "version: v1\n", "ts-4": ts4}, helm
        )
        == {}
    )
    op = sharing.Selection(None, ("empty",))
    assert sharing.keep_unlabelled_unshared({}, {"ts-4": ts4}, op) == {}
    # a default the admin chose to share stays the admin's choice
    mine = {"ts-8": device_plugin.config_text(sharing.make_sharing("time-slicing", 8))}
    assert (
        sharing.keep_unlabelled_unshared(mine, mine | {"ts-4": ts4}, sharing.Selection("ts-8"))
        == {}
    )
    # "single" alone cannot be kept safe: refused, saying what to set
    with pytest.raises(GpuctlError, match="would share as 'ts-4'") as e:
        sharing.keep_unlabelled_unshared({}, {"ts-4": ts4}, sharing.Selection(None, ("single",)))
    assert "config.default=default" in e.value.hint
