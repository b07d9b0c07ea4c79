"""mig-parted v1 config files: strict parsing with file/line/field, per-GPU resolution,
export and ConfigMap rendering (pure core)."""

import textwrap
from types import SimpleNamespace

import pytest
import yaml

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.gpus.geometry import find_model
from gpuctl.mig import migparted
from gpuctl.mig.diff import GpuState
from gpuctl.mig.layout import LayoutError

H100 = find_model("H100-80GB")
A100 = find_model("A100-40GB")


HEAD = "version: v1\nmig-configs:\n  a:\n"


def parse(text):
    return migparted.parse(load_yaml(textwrap.dedent(text), "c.yaml"))


def error(text):
    """The error reading the file, or else choosing its config 'a' (a bad config is refused
    when it is chosen, so that the file's other configs stay usable)."""
    with pytest.raises(SpecError) as e:
        parse(text).select("a")
    return str(e.value), e.value


def gpu(i, model=H100, mig=(False, False), instances=()):
    return GpuState(
        i, model.nvml_name if model else "Tesla T4", f"GPU-{i}", model, mig, list(instances), []
    )


ALL = HEAD + "    - devices: all\n"
ON = ALL + "      mig-enabled: true\n"
CASES = [
    (
        "mig-configs: {a: [{devices: all, mig-enabled: false}]}\n",
        "c.yaml:1",
        "missing required field 'version'",
    ),
    (
        "version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n",
        "c.yaml:1: version",
        "unsupported version",
    ),
    ("version: v1\nmig-config: {}\n", "c.yaml:2: mig-config", "did you mean 'mig-configs'"),
    ("version: v1\nmig-configs: {}\n", "c.yaml:2", "at least one config"),
    ("version: v1\nmig-configs:\n  a: []\n", "c.yaml:3: mig-configs.a", "non-empty list"),
    (HEAD + "    - mig-enabled: false\n", "c.yaml:4: mig-configs.a[0]", "'devices'"),
    (
        HEAD + "    - devices: some\n      mig-enabled: false\n",
        "c.yaml:4: mig-configs.a[0].devices",
        "'all' or a list",
    ),
    (
        HEAD + "    - devices: [0, -1]\n      mig-enabled: false\n",
        "mig-configs.a[0].devices[1]",
        "GPU index",
    ),
    (
        ALL + "      device-filter: H100\n      mig-enabled: false\n",
        "c.yaml:5: mig-configs.a[0].device-filter",
        "PCI device id",
    ),
    (
        ALL + "      mig-enabled: yes please\n",
        "c.yaml:5: mig-configs.a[0].mig-enabled",
        "true or false",
    ),
    (ON, "mig-configs.a[0]", "'mig-devices' when 'mig-enabled' is true"),
    (
        ALL + "      mig-enabled: false\n      mig-devices: {1g.10gb: 1}\n",
        "c.yaml:6: mig-configs.a[0].mig-devices",
        "while 'mig-enabled' is false",
    ),
    (
        ON + "      mig-devices:\n        3g: 1\n",
        "c.yaml:7: mig-configs.a[0].mig-devices.3g",
        "not a MIG profile name",
    ),
    (ON + "      mig-devices:\n        3g.40gb: -1\n", "c.yaml:7", "count >= 0"),
    (
        ALL + "      mig-enbled: true\n",
        "c.yaml:5: mig-configs.a[0].mig-enbled",
        "did you mean 'mig-enabled'",
    ),
]


@pytest.mark.parametrize("text, where, words", CASES)
def test_errors_name_file_line_field(text, where, words):
    msg, _ = error(text)
    assert where in msg and words in msg, msg


def test_layouts_checked_on_the_models_a_device_filter_names():
    cfg = parse(
        ALL + "      device-filter: ['0x233010DE']\n      mig-enabled: true\n"
        "      mig-devices:\n        3g.40gb: 3\n"
    )
    with pytest.raises(SpecError) as e:
        cfg.check_models("a")
    assert "c.yaml:8: mig-configs.a[0].mig-devices.3g.40gb: H100-80GB: 3g.40gb ×3" in str(e.value)


def test_a_config_for_other_models_does_not_stop_using_the_file():
    # Config b names a profile no GB200 has; config a must still apply to H100s.
    cfg = parse("""\
        version: v1
        mig-configs:
          a:
            - device-filter: ["0x233010DE"]
              devices: all
              mig-enabled: true
              mig-devices: {"1g.10gb": 7}
          b:
            - device-filter: ["0x294110DE"]
              devices: all
              mig-enabled: true
              mig-devices: {"1g.99gb": 7}
        """)
    assert migparted.resolve(cfg, cfg.select("a"), [gpu(0)])[0].layout == {"1g.10gb": 7}
    with pytest.raises(SpecError, match="GB200 has no MIG profile '1g.99gb'"):
        cfg.check_models("b")


@pytest.mark.parametrize("written", ['"0x233010DE"', '["0x233010DE"]', "['0x233010de']"])
def test_device_filter_string_or_list(written):
    cfg = parse(
        ALL + f"      device-filter: {written}\n      mig-enabled: true\n"
        "      mig-devices: {3g.40gb: 2}\n"
    )
    entries = cfg.select("a")
    desired = migparted.resolve(cfg, entries, [gpu(0), gpu(1, A100)])
    assert desired[0].layout == {"3g.40gb": 2} and desired[1] is None


@pytest.mark.parametrize("written", ["0x233010DE", "[0x233010DE]"])
def test_unquoted_device_filter_is_refused_as_mig_parted_refuses_it(written):
    # Unquoted, YAML reads the id as the number 590352606; mig-parted's device-filter takes
    # only strings, so its parser refuses the file. gpuctl refuses that config, saying why.
    msg, e = error(
        ALL + f"      device-filter: {written}\n      mig-enabled: true\n"
        "      mig-devices: {3g.40gb: 2}\n"
    )
    assert "c.yaml:5: mig-configs.a[0].device-filter" in msg and "0x233010DE" in msg
    assert "quoted" in msg and e.exit_code == 2


def test_unknown_config_lists_the_configs():
    cfg = parse(
        "version: v1\nmig-configs:\n  a: [{devices: all, mig-enabled: false}]\n"
        "  b: [{devices: all, mig-enabled: false}]\n"
    )
    with pytest.raises(SpecError, match="no config 'c'") as e:
        cfg.select("c")
    assert e.value.hint == "configs: a, b"
    with pytest.raises(Exception, match="choose one with -c"):
        cfg.select(None)


CONFIG = """\
version: v1
mig-configs:
  mixed:
    - devices: [0]
      mig-enabled: true
      mig-devices: {3g.40gb: 2}
    - device-filter: ["0x20B010DE"]
      devices: all
      mig-enabled: true
      mig-devices: {1g.5gb: 7}
  clash:
    - devices: all
      mig-enabled: true
      mig-devices: {7g.80gb: 1}
    - devices: [1]
      mig-enabled: false
  explicit:
    - devices: [2]
      mig-enabled: true
      mig-devices: {1g.20gb: 1}
"""


def test_resolve_follows_devices_and_device_filter():
    cfg = parse(CONFIG)
    gpus = [gpu(0), gpu(1, A100), gpu(2), gpu(3, None, mig=None)]
    out = migparted.resolve(cfg, cfg.select("mixed"), gpus)
    assert out[0].layout == {"3g.40gb": 2} and out[1].layout == {"1g.5gb": 7}
    assert out[2] is None and out[3] is None  # not matched / no MIG under "all"
    assert out[0].source == "c.yaml:4 (mixed[0])"


def test_when_two_entries_match_a_gpu_the_last_decides_as_in_mig_parted():
    cfg = parse(CONFIG)
    out = migparted.resolve(cfg, cfg.select("clash"), [gpu(0), gpu(1)])
    assert out[0].layout == {"7g.80gb": 1} and not out[0].notes
    assert not out[1].enabled and out[1].source == "c.yaml:15 (clash[1])"
    assert out[1].notes == (
        "also matched by the entry at line 12; the last matching entry decides, as in mig-parted",
    )


def test_explicit_non_mig_gpu_is_an_error_and_layout_checked_per_gpu():
    cfg = parse(CONFIG)
    with pytest.raises(SpecError, match="GPU 2 \\(Tesla T4\\) does not support MIG"):
        migparted.resolve(cfg, cfg.select("explicit"), [gpu(2, None, mig=None)])
    with pytest.raises(
        SpecError,
        match="c.yaml:20: .*mig-devices.1g.20gb: GPU 2 \\(A100-40GB\\): "
        "A100-40GB has no MIG profile '1g.20gb'",
    ):
        migparted.resolve(cfg, cfg.select("explicit"), [gpu(2, A100)])


def test_export_groups_gpus_and_reads_back():
    gi = SimpleNamespace(
        gi_id=1,
        profile_id=0,
        start=0,
        size=8,
        compute_instances=[SimpleNamespace(ci_id=0, profile_id=4)],
    )
    gpus = [gpu(0, mig=(True, True), instances=[gi]), gpu(1, mig=(True, True), instances=[gi])]
    data = migparted.export(gpus, "now")
    assert data == {
        "version": "v1",
        "mig-configs": {
            "now": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]
        },
    }
    back = migparted.parse(load_yaml(yaml.safe_dump(data), "x.yaml"))
    assert migparted.resolve(back, back.select("now"), gpus)[1].layout == {"7g.80gb": 1}
    data = migparted.export([gpus[0], gpu(1)])
    assert [e["devices"] for e in data["mig-configs"]["current"]] == [[0], [1]]


@pytest.mark.parametrize(
    "layout, words",
    [
        ("1g.10gb=99", "A100-80GB: 1g.10gb ×99"),
        ("3g.40gb=3", "H100-80GB: 3g.40gb ×3"),
        ("foo=1", "no GPU model has all of the MIG profiles foo"),
        ("1g.5gb=1,1g.6gb=1", "no GPU model has all of the MIG profiles 1g.5gb, 1g.6gb"),
    ],
)
def test_a_layout_for_any_model_must_fit_one(layout, words):
    # These were rendered into ConfigMaps that would fail on every node.
    with pytest.raises(LayoutError) as e:
        migparted.shorthand_config("x", layout)
    assert words in e.value.message and e.value.exit_code == 2


def test_shorthand_configs_and_configmap():
    cfg = migparted.shorthand_config("x", "all-7g.80gb")
    filters = [f for e in cfg["mig-configs"]["x"] for f in e["device-filter"]]
    assert "0x233010DE" in filters and all(
        e["mig-devices"] == {"7g.80gb": 1} for e in cfg["mig-configs"]["x"]
    )
    cm = migparted.render_configmap(cfg, "mine", "ns")
    assert cm["metadata"] == {"name": "mine", "namespace": "ns"}
    assert yaml.safe_load(cm["data"]["config.yaml"]) == cfg
