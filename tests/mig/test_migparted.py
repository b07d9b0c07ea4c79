"""mig-parted v1 config files: strict parsing with file/line/field, per-GPU resolution,
export and ConfigMap rendering (pure core)."""

import textwrap
from types import SimpleNamespace

import pytest
import yaml

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.gpus.geometry import find_model
from gpuctl.gpus.mig_layout import LayoutError
from gpuctl.mig.core import migparted
from gpuctl.mig.core.diff import GpuState

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


# ---- what mig-parted parses, and what it refuses --------------------------------------


def on(model, index=0, pci=None, subsystem=None):
    pci = int(model.pci_device_ids[0], 16) if pci is None else pci
    return GpuState(
        index, model.nvml_name, f"GPU-{index}", model, (False, False), [], [], pci, subsystem
    )


@pytest.mark.parametrize(
    "written, matches",
    [
        ('"0x20B010DE:0x134F10DE"', True),  # the board's subsystem id: this one
        ('"0x20B010DE:0x145F10DE"', False),  # a sibling board
        ('["0x233010DE", "0x20B010DE:0x134F10DE"]', True),
        ('"0x20b010de"', True),  # ParseUint reads lower-case hex, decimal, ...
        ('"548409566"', True),  # ... 0x20B010DE in decimal
        ('"0x20B0_10DE"', True),  # ... and Go's digit separators
        ('""', True),  # an empty filter filters nothing
        ("[]", True),
        ('"0x233010DE:0x134F10DE"', False),
    ],
)
def test_device_filter_with_subsystem_id_as_mig_parted_matches_it(written, matches):
    cfg = parse(
        ALL + f"      device-filter: {written}\n      mig-enabled: true\n"
        "      mig-devices: {3g.20gb: 2}\n"
    )
    gpu_ = on(A100, subsystem=0x134F10DE)
    out = migparted.resolve(cfg, cfg.select("a"), [gpu_])
    assert (out[0] is not None) == matches
    if matches:
        assert out[0].layout == {"3g.20gb": 2}


def test_devices_empty_list_matches_no_gpu():
    cfg = parse(HEAD + "    - devices: []\n      mig-enabled: true\n      mig-devices: {}\n")
    assert migparted.resolve(cfg, cfg.select("a"), [on(H100)]) == {0: None}


BAD_CONFIGS = [
    ("mig-devices: {1g.10gb: 0, 2g.20gb: 0}", "all counts are 0"),
    ("mig-devices: {1g.10gb: -7}", "expected a count >= 0, got -7"),
    ("mig-devices: {1g.10gb: 1.5}", "expected a count"),
    ("mig-devices: {1g.10gb+me-x: 1}", "both '+' and '-' attributes"),
    ("mig-devices: {'1g.10gb+me,me': 1}", "an attribute is given twice"),
    ("device-filter: H100\n      mig-devices: {1g.10gb: 1}", "not a PCI device id"),
    ("device-filter: '0x2330:0x10DE:0x1'\n      mig-devices: {1g.10gb: 1}", "not a PCI device id"),
    ("device-filter: '0x1233010DE'\n      mig-devices: {1g.10gb: 1}", "not a PCI device id"),
]


@pytest.mark.parametrize("entry, words", BAD_CONFIGS)
def test_a_bad_config_is_refused_when_chosen_and_the_others_stay_usable(entry, words):
    text = (
        "version: v1\nmig-configs:\n  good:\n    - devices: all\n      mig-enabled: true\n"
        "      mig-devices: {7g.80gb: 1}\n"
        f"  bad:\n    - devices: all\n      mig-enabled: true\n      {entry}\n"
    )
    cfg = parse(text)
    assert migparted.resolve(cfg, cfg.select("good"), [on(H100)])[0].layout == {"7g.80gb": 1}
    assert cfg.names == ["good", "bad"]
    with pytest.raises(SpecError) as e:
        cfg.select("bad")
    assert words in str(e.value) and "c.yaml:10: mig-configs.bad[0]" in str(e.value), str(e.value)


def test_mig_enabled_false_with_zero_counts_is_refused():
    msg, _ = error(
        ALL + "      mig-enabled: false\n      mig-devices: {1g.10gb: 0}\n"
    )  # mig-parted: "all counts for all MigProfiles are 0"
    assert "c.yaml:6: mig-configs.a[0].mig-devices" in msg


@pytest.mark.parametrize(
    "text, words",
    [
        ("mig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "'version'"),
        ("version: v1\nmig-configs: [a]\n", "at least one config"),
        (
            "version: v1\nextra: 1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n",
            "extra",
        ),
    ],
)
def test_a_malformed_file_is_refused_whole(text, words):
    with pytest.raises(SpecError, match=words):
        parse(text)


def test_a_profile_name_is_read_as_go_nvlib_reads_it():
    # "01g.10gb" is the 1g.10gb profile to mig-parted (strconv.Atoi); GB200's early driver
    # name 3g.95gb is today's 3g.93gb.
    cfg = parse(ON + "      mig-devices: {01g.10gb: 2}\n")
    assert migparted.resolve(cfg, cfg.select("a"), [on(H100)])[0].layout == {"01g.10gb": 2}
    gb200 = find_model("GB200")
    cfg = parse(ON + "      mig-devices: {3g.95gb: 2}\n")
    assert migparted.resolve(cfg, cfg.select("a"), [on(gb200)])[0].layout == {"3g.95gb": 2}
    assert gb200.profile("3g.95gb").name == "3g.93gb"


# ---- export, as mig-parted's export shapes it (its export_test.go cases) ---------------


def state(index, model, enabled, layout_gi=None):
    instances = []
    if layout_gi:
        instances = [
            SimpleNamespace(
                gi_id=1,
                profile_id=0,
                profile_index=4,
                start=0,
                size=8,
                compute_instances=[SimpleNamespace(ci_id=0, profile_id=4)],
            )
        ]
    pci = int(model.pci_device_ids[0], 16)
    return GpuState(
        index, model.nvml_name, f"GPU-{index}", model, (enabled, enabled), instances, [], pci
    )


A100_80 = find_model("A100-80GB")


@pytest.mark.parametrize(
    "gpus, expected",
    [
        # one kind of GPU, one state: everything merged, no filter
        ([(A100, False), (A100, False)], [{"devices": "all", "mig-enabled": False}]),
        # one kind, two states: by index, no filter
        (
            [(A100, False), (A100, True)],
            [{"devices": [0], "mig-enabled": False}, {"devices": [1], "mig-enabled": True}],
        ),
        # two kinds, the same state: one entry, no filter
        ([(A100, False), (A100_80, False)], [{"devices": "all", "mig-enabled": False}]),
        # two kinds, a state per kind: filtered, devices all
        (
            [(A100, False), (A100, False), (A100_80, True), (A100_80, True)],
            [
                {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": False},
                {"device-filter": "0x20B210DE", "devices": "all", "mig-enabled": True},
            ],
        ),
        # two kinds, both states on each kind: both filters, by index
        (
            [(A100, False), (A100, True), (A100_80, False), (A100_80, True)],
            [
                {
                    "device-filter": ["0x20B010DE", "0x20B210DE"],
                    "devices": [0, 2],
                    "mig-enabled": False,
                },
                {
                    "device-filter": ["0x20B010DE", "0x20B210DE"],
                    "devices": [1, 3],
                    "mig-enabled": True,
                },
            ],
        ),
    ],
)
def test_export_merges_as_mig_parted_does(gpus, expected):
    states = [state(i, m, on_) for i, (m, on_) in enumerate(gpus)]
    entries = migparted.export(states)["mig-configs"]["current"]
    assert [{k: v for k, v in e.items() if k != "mig-devices"} for e in entries] == expected
    assert all(e["mig-devices"] == {} for e in entries)  # enabled, no instances; or MIG off


def test_export_writes_gpus_without_mig_as_mig_parted_does():
    states = [
        state(0, H100, True, layout_gi=True),
        GpuState(1, "Tesla T4", "GPU-1", None, None, [], [], 0x1EB810DE),  # NVML: no MIG
    ]
    data = migparted.export(states)
    assert data["mig-configs"]["current"] == [
        {
            "device-filter": "0x233010DE",
            "devices": "all",
            "mig-enabled": True,
            "mig-devices": {"7g.80gb": 1},
        },
        {"device-filter": "0x1EB810DE", "devices": "all", "mig-enabled": False, "mig-devices": {}},
    ]
    back = migparted.parse(load_yaml(yaml.safe_dump(data), "x.yaml"))
    out = migparted.resolve(back, back.select("current"), states)
    assert out[0].layout == {"7g.80gb": 1} and out[1] is not None and not out[1].enabled


def test_a_config_with_no_entry_for_the_node_s_gpu_is_refused_before_labelling():
    """`mig configure --node b200-1 -c all-1g.10gb` with a config written for H100s only:
    mig-manager would leave the node as it is and report success, so gpuctl refuses."""
    from gpuctl.mig.core.operator import NodeTarget, check_config

    cfg = parse("""\
        version: v1
        mig-configs:
          all-1g.10gb:
            - device-filter: ["0x233010DE"]
              devices: all
              mig-enabled: true
              mig-devices: {"1g.10gb": 7}
        """)
    h100 = NodeTarget("h100-1", "all-disabled", "success", find_model("H100-80GB"), 8)
    assert check_config(cfg, "all-1g.10gb", [h100]) == []
    b200 = NodeTarget("b200-1", "all-disabled", "success", find_model("B200"), 8)
    with pytest.raises(SpecError, match="no entry for node b200-1's GPUs \\(B200\\)"):
        check_config(cfg, "all-1g.10gb", [h100, b200])
