"""Property tests of the bad-input promise: every parser of user input either succeeds or
raises a GpuctlError with a message (a SpecError from a file names the file, and its line
whenever the document has any); every CLI command exits 0-3 with no traceback."""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuctl.alerts.core import rules as alert_rules
from gpuctl.alerts.core.rules import AlertOptions
from gpuctl.alerts.core.rules import check as check_alerts
from gpuctl.common import selector
from gpuctl.common.errors import GpuctlError, SpecError
from gpuctl.common.specfile import load_yaml, parse_duration
from gpuctl.dcgm import holders
from gpuctl.gpus import geometry, mig_layout, names
from gpuctl.jobs.core.spec import parse_job
from gpuctl.jobs.core.templates import check_template
from gpuctl.mig.core import migparted
from gpuctl.mig.core import plan as mig_plan
from gpuctl.provision.core import spec as cluster_spec
from gpuctl.quota.core import rules as quota
from gpuctl.runtime import config
from gpuctl.top.cluster.core import usage as cluster_usage
from tests.clirun import run_gpuctl

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
TEMPLATES = EXAMPLES.parent / "templates"
MIG_CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  mixed:
    - device-filter: ["0x233010DE", "0x233110DE"]
      devices: [0, 1]
      mig-enabled: true
      mig-devices: {1g.10gb: 2, 2g.20gb: 1, 3g.40gb: 1}
    - devices: [2]
      mig-enabled: true
      mig-devices: {"1g.10gb+me": 1}
"""
SAMPLES = {
    "job": [
        (EXAMPLES / n).read_text()
        for n in ("mig-job.yaml", "multinode-train.yaml", "seed-pod.yaml", "train-volumes.yaml")
    ],
    "template": [p.read_text() for p in sorted(TEMPLATES.glob("*.yaml"))],
    "cluster": [(EXAMPLES / "cluster.yaml").read_text()],
    "migparted": [MIG_CONFIG],
    "config": ["gpu_label_key: gpu-type\nprometheus_url: http://localhost:9090\n"],
}

# Values users and attackers write: every YAML type, edges of each, and text in the
# shapes gpuctl parses (digits that are not ASCII, huge numbers, NaN, control characters).
HOSTILE_TEXT = st.sampled_from(
    [
        "",
        " ",
        "-",
        "--",
        "=",
        ",",
        "0",
        "-1",
        "²",
        "٣",
        "1e999",
        "nan",
        "inf",
        ".nan",
        "\x00",
        "a\nb",
        "9" * 5000,
        "1g.10gb=²",
        "1g.10gb=" + "9" * 5000,
        "9" * 5000 + "xA30",
        "x" * 70_000,
        "3g.40gb=2,1g.10gb",
        "all-1g.10gb",
        "2xA30,H100-80GB",
        "a in (b",
        "!a,b notin (c)",
        "1h30m",
        "0s",
        "10m",
        "ü",
        "\u202e",
        "nvidia.com/mig-1g.10gb=4",
        "${HOME}",
        "$(id)",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**30),
    st.integers(max_value=-(10**30)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    HOSTILE_TEXT,
)
KEYS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "name",
            "image",
            "gpus",
            "mig",
            "nodes",
            "version",
            "mig-configs",
            "devices",
            "mig-enabled",
            "mig-devices",
            "node_groups",
            "region",
            "taints",
            "state",
            "env",
            "labels",
            "tolerations",
            "gpu_label_key",
            "prometheus_url",
            "kind",
            "apiVersion",
            "instance_type",
        ]
    ),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)),
    max_leaves=20,
)


def _dump(data) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10**6)


@st.composite
def mutated(draw, kind: str) -> str:
    """A real example with one field dropped, retyped or added, or one line garbled."""
    text = draw(st.sampled_from(SAMPLES[kind]))
    if draw(st.booleans()):  # a textual mutation: YAML syntax errors, tabs, stray characters
        lines = text.splitlines()
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = draw(
            st.sampled_from(
                [
                    lines[i] + ": x",
                    "\t" + lines[i],
                    lines[i] + " &a",
                    lines[i].replace(":", "", 1),
                    "*a",
                    "- " + lines[i],
                    lines[i] + " !!python/object:os.system",
                ]
            )
        )
        return "\n".join(lines)
    data = yaml.safe_load(text)
    paths: list[tuple[Any, ...]] = []  # keys and indexes from the root
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while stack:
        path, node = stack.pop()
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for k, v in items:
            paths.append(path + (k,))
            stack.append((path + (k,), v))
    path = draw(st.sampled_from(paths))
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    action = draw(st.sampled_from(["drop", "retype", "unknown"]))
    if action == "drop":
        del parent[path[-1]]
    elif action == "retype":
        parent[path[-1]] = draw(DOCUMENTS)
    else:
        target = parent if isinstance(parent, dict) else data
        target[draw(st.text(min_size=1, max_size=12))] = draw(SCALARS)
    return _dump(data)


def _parse_migparted(doc):
    cfg = migparted.parse(doc)
    for name in cfg.configs:
        cfg.select(name)
        cfg.check_models(name)
    cfg.select(None)


PARSERS = {
    "job": parse_job,
    "template": check_template,
    "cluster": cluster_spec.parse_cluster,
    "migparted": _parse_migparted,
}


def _check_spec(kind: str, text: str) -> None:
    doc = None
    try:
        doc = load_yaml(text, "spec.yaml")
        PARSERS[kind](doc)
    except SpecError as e:
        assert e.message and e.file == "spec.yaml", e
        if doc is not None and doc.data is not None:  # there is a line to name
            assert e.line is not None, e
    except GpuctlError as e:
        assert e.message, e


FUZZ = settings(max_examples=60, deadline=None)


@pytest.mark.parametrize("kind", sorted(PARSERS))
@FUZZ
@given(data=st.data())
def test_spec_parsers_refuse_arbitrary_documents_cleanly(kind, data):
    text = data.draw(st.one_of(DOCUMENTS.map(_dump), mutated(kind), st.text(max_size=200)))
    _check_spec(kind, text)


@pytest.mark.parametrize("kind", sorted(PARSERS))
@pytest.mark.parametrize(
    "text",
    [
        "a: " + "9" * 5000,  # Python refuses int() of more than 4300 digits
        "nodes: " + "9" * 5000,
        "version: v1\nmig-configs: {a: [{devices: [" + "9" * 5000 + "], mig-enabled: false}]}",
        "deadline: " + "9" * 5000 + "s",
        "deadline: ²",
    ],
)
def test_spec_parsers_regressions(kind, text):
    _check_spec(kind, text)


def test_number_too_long_names_the_line():
    with pytest.raises(SpecError) as e:
        load_yaml("name: x\ngpus: " + "9" * 5000, "job.yaml")
    assert (e.value.file, e.value.line, e.value.field) == ("job.yaml", 2, "gpus")


@FUZZ
@given(text=st.one_of(DOCUMENTS.map(_dump), mutated("config"), st.text(max_size=200)))
def test_config_file_refused_cleanly(text):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "config.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        old = os.environ.get("GPUCTL_CONFIG")
        os.environ["GPUCTL_CONFIG"] = path
        try:
            reads = [
                lambda name=name: config.setting(
                    name, check=lambda v: None if v.isascii() else "not ASCII"
                )
                for name in config.SETTINGS
            ] + [lambda name=name: config.setting_list(name, []) for name in config.LIST_SETTINGS]
            for read in reads:
                try:
                    read()
                except SpecError as e:
                    assert e.message and e.file == path, e
                    if _has_data(text):
                        assert e.line is not None, e
                except GpuctlError as e:
                    assert e.message, e
        finally:
            os.environ.pop("GPUCTL_CONFIG")
            if old is not None:
                os.environ["GPUCTL_CONFIG"] = old


def _has_data(text: str) -> bool:
    try:
        return load_yaml(text).data is not None
    except SpecError:
        return False


OPTION_TEXT = st.one_of(
    st.text(max_size=60),
    HOSTILE_TEXT,
    st.lists(st.one_of(HOSTILE_TEXT, st.text(max_size=12)), max_size=5).map(",".join),
)


def _clean(parse, *args) -> None:
    try:
        parse(*args)
    except GpuctlError as e:
        assert e.message, e


OPTION_PARSERS = {
    "mig plan --demand": mig_plan.parse_demand,
    "mig plan --gpus": mig_plan.parse_fleet,
    "GPU model name": geometry.find_model,
    "gpu_type warning": lambda text: names.gpu_type_warning(text, "gpu-type", geometry.models()),
    "GFD gpu_type warning": lambda text: names.gpu_type_warning(
        text, names.GFD_PRODUCT_LABEL, geometry.models()
    ),
    "--layout": mig_layout.parse_layout_text,
    "--selector": selector.parse,
    "quota set --mig": lambda text: quota.parse_mig(text.split(";")),
    "top --window": cluster_usage.queries,
    "--exporter-container": lambda text: holders.exporter(text.split(","), None),
    "spec duration": parse_duration,
    "shorthand config": lambda text: migparted.shorthand_config("c", text),
}


@pytest.mark.parametrize("option", sorted(OPTION_PARSERS))
@FUZZ
@given(text=OPTION_TEXT)
@example(text="1g.10gb=²")
@example(text="1g.10gb=" + "9" * 5000)
@example(text="9" * 5000 + "xA30")
@example(text="a\nb")
@example(text="9" * 5000 + "s")
@example(text="²")
def test_option_parsers_refuse_cleanly(option, text):
    _clean(OPTION_PARSERS[option], text)


@FUZZ
@given(
    pcts=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=4, max_size=4),
    durations=st.lists(OPTION_TEXT, min_size=8, max_size=8),
    label=OPTION_TEXT,
)
@example(pcts=[float("nan")] * 4, durations=["5m"] * 8, label='a"b\\.c')
def test_alert_thresholds_refused_cleanly(pcts, durations, label):
    fields = (
        "high_util_window",
        "high_util_for",
        "idle_window",
        "idle_for",
        "memory_for",
        "temperature_for",
        "xid_window",
    )
    options = AlertOptions(
        high_util=pcts[0],
        idle_util=pcts[1],
        memory=pcts[2],
        temperature=pcts[3],
        **dict(zip(fields, durations[:7])),
    )
    _clean(check_alerts, options)
    _clean(lambda: alert_rules.rules(AlertOptions(exporter=holders.exporter([label], [label]))))


# ---------- the whole CLI, in-process ----------

COMMANDS = {
    ("render",): ["-o", "--gpu-label-key"],
    ("submit",): ["--dry-run", "-n", "--namespace", "--timeout", "--gpu-label-key"],
    ("jobs", "list"): ["-n", "-A", "-o"],
    ("jobs", "get"): ["-n", "-o"],
    ("jobs", "logs"): ["-n"],
    ("jobs", "delete"): ["-n", "--yes"],
    ("top", "--once"): ["-o", "--sort", "--window", "--idle-threshold", "-d"],
    ("top", "--once", "--prometheus", "http://127.0.0.1:9"): [
        "--window",
        "--idle-threshold",
        "-o",
        "--exporter-container",
        "--exporter-job",
    ],
    ("mig", "profiles"): ["--gpu", "-o"],
    ("mig", "plan"): ["--demand", "--layout", "--gpu", "--gpus", "-o"],
    ("mig", "show"): ["-o"],
    ("mig", "export"): ["--name", "-o", "--configmap"],
    ("mig", "configure"): [
        "-f",
        "-c",
        "--layout",
        "--gpus",
        "--dry-run",
        "--yes",
        "--reset",
        "--node",
        "-l",
        "--selector",
        "--render-configmap",
        "-n",
        "--timeout",
    ],
    ("mig", "assert"): ["-f", "-c", "--layout", "--gpus"],
    ("alerts", "render"): [
        "-o",
        "--format",
        "--name",
        "-n",
        "--label",
        "--high-util",
        "--high-util-window",
        "--idle-util",
        "--memory",
        "--temperature",
        "--xid-window",
        "--exporter-container",
        "--exporter-job",
        "--idle-for",
    ],
    ("share", "timeslice"): [
        "--replicas",
        "--mps",
        "--node",
        "-l",
        "--name",
        "-n",
        "--dry-run",
        "-o",
        "--yes",
        "--resource",
    ],
    ("share", "off"): ["--node", "-l", "--dry-run", "--yes"],
    ("share", "show"): ["-n", "-o"],
    ("quota", "set"): ["--gpus", "--mig", "--dry-run", "-o"],
    ("quota", "list"): ["-n", "-o"],
    ("doctor",): [],
    ("provision", "--dry-run"): ["-f", "-o"],
}


# files the hostile_env fixture writes, and one it does not
FILES = st.sampled_from(
    ["job.yaml", "cluster.yaml", "migparted.yaml", "config.yaml", "bad.yaml", "missing.yaml", "."]
)


@st.composite
def argvs(draw):
    words = draw(st.sampled_from(sorted(COMMANDS)))
    argv = list(words)
    if words[0] in ("render", "submit"):
        argv.append(draw(FILES))
    for _ in range(draw(st.integers(0, 4))):
        options = COMMANDS[words] or ["--x"]
        argv.append(draw(st.one_of(st.sampled_from(options), OPTION_TEXT)))
        if draw(st.booleans()):
            argv.append(draw(st.one_of(OPTION_TEXT, FILES)))
    return argv


@pytest.fixture
def hostile_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCTL_SIMULATE", "2xH100-80GB")
    monkeypatch.chdir(tmp_path)  # provision --dry-run writes its working directory here
    for kind, texts in SAMPLES.items():
        (tmp_path / f"{kind}.yaml").write_text(texts[0])
    (tmp_path / "bad.yaml").write_text("a: " + "9" * 5000)
    return tmp_path


def _assert_clean(capsys, argv):
    code, out, err = run_gpuctl(capsys, *argv)
    assert code in (0, 1, 2, 3) and "Traceback" not in err, (argv, code, err[-2000:])
    assert "gpuctl: error: unexpected " not in err, (argv, err)  # the last-resort line of a bug


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(argv=argvs())
def test_cli_hostile_argv(hostile_env, capsys, argv):
    _assert_clean(capsys, argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["mig", "plan", "--gpu", "A30", "--demand", "1g.6gb=²"],
        ["mig", "plan", "--gpus", "9" * 5000 + "xA30", "--demand", "1g.6gb=1"],
        ["mig", "plan", "--gpus", "a\nb", "--demand", "1g.6gb=1"],
        ["mig", "configure", "--dry-run", "--layout", "1g.10gb=" + "9" * 5000],
        ["mig", "configure", "--dry-run", "--gpus", "²", "--layout", "all-1g.10gb"],
        ["quota", "set", "team-a", "--gpus", "1", "--mig", "1g.10gb=²", "--dry-run"],
        ["top", "--once", "--prometheus", "http://127.0.0.1:9", "--window", "9" * 5000 + "s"],
        ["alerts", "render", "--xid-window", "9" * 5000 + "m"],
        ["render", "bad.yaml"],
        ["submit", "bad.yaml", "--dry-run"],
        ["provision", "--dry-run", "-f", "bad.yaml"],
        ["mig", "configure", "--dry-run", "-f", "bad.yaml"],
    ],
)
def test_cli_regressions(hostile_env, capsys, argv):
    _assert_clean(capsys, argv)


CLI_FOR_FILE = {
    "job": ["render"],
    "cluster": ["provision", "--dry-run", "-f"],
    "migparted": ["mig", "configure", "--dry-run", "-f"],
}


@pytest.mark.parametrize("kind", sorted(CLI_FOR_FILE))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_cli_bad_spec_file_is_one_line_naming_the_file(hostile_env, capsys, kind, data):
    (hostile_env / "spec.yaml").write_text(
        data.draw(st.one_of(mutated(kind), DOCUMENTS.map(_dump)))
    )
    code, _, err = run_gpuctl(capsys, *CLI_FOR_FILE[kind], "spec.yaml")
    assert code in (0, 1, 2) and "Traceback" not in err, (code, err)
    assert "gpuctl: error: unexpected " not in err, err
    if code == 2 and err.startswith("gpuctl: error: spec.yaml"):
        assert len([line for line in err.splitlines() if not line.startswith("  hint:")]) == 1, err


@pytest.mark.parametrize("kind", sorted(CLI_FOR_FILE))
@pytest.mark.parametrize("key", ["\x1e", "a\nb", "\x1b[2J\x1b[31mred", "\u2028", "\x85"])
def test_cli_control_characters_in_a_key_stay_on_one_line(hostile_env, capsys, kind, key):
    # found by the test above: a key holding U+001E printed raw split the error line
    (hostile_env / "spec.yaml").write_text(_dump({key: None}))
    code, _, err = run_gpuctl(capsys, *CLI_FOR_FILE[kind], "spec.yaml")
    assert code == 2 and err.startswith("gpuctl: error: spec.yaml:1: "), err
    assert "\x1b" not in err and len(err.rstrip("\n").split("\n")) <= 2, err  # error + hint
    assert len(err.splitlines()[0].splitlines()) == 1, err


@pytest.mark.parametrize("spec", ["²xA30", "9" * 5000 + "xA30", "2000000000xA30", "a\nb"])
def test_cli_hostile_simulated_node(hostile_env, capsys, monkeypatch, spec):
    monkeypatch.setenv("GPUCTL_SIMULATE", spec)
    code, _, err = run_gpuctl(capsys, "mig", "show")
    assert code == 2 and "Traceback" not in err and "simulated node spec" in err, err


def test_cli_hostile_sim_seed(hostile_env, capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_SIM_SEED", "²")
    code, _, err = run_gpuctl(capsys, "mig", "show")
    assert code == 2 and "GPUCTL_SIM_SEED" in err, err
