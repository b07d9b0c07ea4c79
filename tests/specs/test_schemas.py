"""The JSON Schemas stay in step with the parsers: what the parser accepts validates, and
what it refuses for an unknown field, a wrong type, a word or number out of range or a bad
name is refused by the schema too. The cases come from the field tables themselves, so a
field added to a table is covered at once."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path as FilePath
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuctl.common import spec_fields as sf
from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import dotted, load_yaml
from gpuctl.jobs.core import service_spec
from gpuctl.jobs.core.service_spec import SERVICE_ONLY
from gpuctl.jobs.core.spec import JOB, parse_job
from gpuctl.provision.core.spec import CLUSTER, parse_cluster
from gpuctl.specs.core.schemas import schema
from tests import ROOT

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the same YAML, 10 times faster
KINDS = ("job", "service", "cluster")
VALIDATORS = {kind: jsonschema.Draft202012Validator(schema(kind)) for kind in KINDS}
TABLES = {
    "job": JOB.without(*SERVICE_ONLY),
    "service": JOB.without(*service_spec.JOB_ONLY),
    "cluster": CLUSTER,
}

# Every field of both tables, each with a valid value (mig, which excludes gpus, and
# template, which may supply the image, in jobs of their own).
FULL_JOB = {
    "apiVersion": "gpuctl/v1", "kind": "Job", "name": "train", "namespace": "team-a",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["torchrun"], "args": ["t.py", 3],
    "env": {"EPOCHS": 90, "DEBUG": True}, "gpus": 8, "gpu_type": ["h100", "h200"],
    "shared": False, "nodes": 2, "nproc_per_node": 8, "master_port": 29501, "cpu": "96",
    "memory": "1000Gi", "shm": 64, "ttl_after_finished": "1h", "deadline": 3600, "retries": 2,
    "priority": "high", "scheduler": "gpuctl-binpack", "labels": {"team": "a"},
    "tolerations": [
        {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoExecute",
         "tolerationSeconds": 60},
    ],
    "service_account": "trainer", "image_pull_secrets": ["regcred"],
    "volumes": [
        {"name": "data", "pvc": "imagenet", "mount": "/data", "read_only": True},
        {"name": "cache", "empty_dir": "16Gi", "memory": True, "mount": "/cache"},
        {"name": "cfg", "config_map": "train-cfg", "mount": "/etc/train"},
    ],
    "secrets": [{"secret": "hf-token", "env": {"HF_TOKEN": "token"}, "mount": "/etc/hf"}],
    "working_dir": "/workspace", "node_selector": {"topology.kubernetes.io/zone": "us-east-1a"},
    "extra_resources": {"vpc.amazonaws.com/efa": 32, "hugepages-2Mi": "1Gi"},
    "topology": {"within": "block", "required": False},
    "queue": "team-a", "multinode": "jobset",
}  # fmt: skip
MIG_JOB = {"apiVersion": "gpuctl/v1", "name": "bert", "image": "pytorch", "mig": "1g.10gb"}
TEMPLATED_JOB = {"apiVersion": "gpuctl/v1", "name": "nb", "template": "notebook", "image": "x"}
# other vendors' fields (gpuctl.jobs.core.vendor_spec)
TPU_JOB = {"apiVersion": "gpuctl/v1", "name": "jax", "image": "x", "accelerator": "tpu-v5e",
           "tpu_topology": "2x4", "tpu_slices": 2}  # fmt: skip
NEURON_JOB = {"apiVersion": "gpuctl/v1", "name": "inf", "image": "x", "accelerator": ["inf2"],
              "neuron_cores": 2}  # fmt: skip
AMD_JOB = {"apiVersion": "gpuctl/v1", "name": "rocm", "image": "x", "accelerator": "mi300x",
           "partition": "cpx_nps4", "gpus": 8}  # fmt: skip
FULL_CLUSTER = {
    "apiVersion": "gpuctl/v1", "kind": "Cluster", "name": "ml-prod", "region": "us-east-1",
    "vpc_cidr": "10.0.0.0/16",
    "kubernetes_cluster": {
        "name": "ml-prod-eks", "create": True, "version": "1.33",
        "endpoint_access": "public-and-private", "public_access_cidrs": ["10.1.0.0/16"],
        "admin_principals": ["arn:aws:iam::123456789012:role/admins"],
        "system_nodes": {"instance_type": "m6i.large", "count": 2},
    },
    "gpu_stack": "gpu-operator", "mig_strategy": "mixed", "autoscaler": "cluster-autoscaler",
    "gpu_label_key": "gpu-type",
    "node_groups": [
        {"name": "h100", "instance_type": "p5.48xlarge", "min_size": 1, "max_size": 4,
         "desired_size": 2, "gpu_type": "h100", "capacity_type": "on-demand",
         "taints": ["nvidia.com/gpu=present:NoSchedule"], "efa": True,
         "capacity_reservation": {"id": "cr-0123456789abcdef0", "type": "capacity-block"}},
    ],
    "state": {"s3_bucket": "tf-state", "dynamodb_table": "tf-locks", "key": "k/state",
              "region": "us-west-2"},
}  # fmt: skip
SERVICE = {"apiVersion": "gpuctl/v1", "kind": "Service", "name": "chat", "image": "x"}
FULL_SERVICE = {
    **{k: v for k, v in FULL_JOB.items() if k not in service_spec.JOB_ONLY},
    "kind": "Service", "name": "chat", "port": 8000, "replicas": 2, "metrics_port": 9400,
    "readiness": {"path": "/healthz", "port": 8000, "initial_delay": "30s", "period": 10,
                  "timeout": "2s", "failure_threshold": 3},
    "liveness": {"path": "/livez", "port": 8000, "initial_delay": 60, "period": "20s",
                 "timeout": 5, "failure_threshold": 6},
    "autoscale": {"min": 1, "max": 8, "gpu_busy": 70, "window": "5m",
                  "prometheus": "http://prometheus.monitoring:9090",
                  "prometheus_auth": {"secret": "prometheus-login", "mode": "bearer"}},
}  # fmt: skip
SERVICES = [
    FULL_SERVICE,
    {**SERVICE, "ports": [{"name": "grpc", "port": 9000}], "autoscale": {"max": 2, "rps": 9}},
    {**SERVICE, "port": 80, "autoscale": {"max": 2, "queue_depth": 4}},
    {**SERVICE, "port": 80, "autoscale": {"max": 2, "latency_ms": 250}},
    {**SERVICE, "port": 80, "mig": "1g.10gb", "template": "notebook"},
    {**SERVICE, "port": 80, "accelerator": "tpu-v6e", "tpu_topology": "2x2", "tpu_slices": 1},
    {**SERVICE, "port": 80, "accelerator": "inferentia2", "neuron_cores": 2},
    {**SERVICE, "port": 80, "accelerator": "mi300x", "partition": "cpx_nps4"},
]
VALID = [
    ("job", FULL_JOB), ("job", MIG_JOB), ("job", TEMPLATED_JOB), ("cluster", FULL_CLUSTER),
    ("job", TPU_JOB), ("job", NEURON_JOB), ("job", AMD_JOB),
    *(("service", s) for s in SERVICES),
]  # fmt: skip

Path = tuple[str | int, ...]


def parser_verdict(kind: str, data: Any) -> SpecError | None:
    doc = load_yaml(yaml.dump(data, Dumper=DUMPER), f"{kind}.yaml")
    try:
        if kind in ("job", "service"):
            parse_job(doc)
        else:
            parse_cluster(doc, default_region=lambda: ("us-east-1", "the test"))
    except SpecError as e:
        return e
    return None


def schema_errors(kind: str, data: Any) -> list[str]:
    """The schema's errors for DATA as an editor sees it: as JSON, keys are text."""
    data = json.loads(json.dumps(data, default=str))  # !!binary, !!timestamp: as written
    return [e.message for e in VALIDATORS[kind].iter_errors(data)]


def rows(table: sf.Table, data: dict[str, Any], at: Path = ()):
    """(path, row) of every field set in DATA, walking into mappings and lists of them."""
    for key, value in data.items():
        row = table[key]
        yield at + (key,), row
        if row.fields is not None and isinstance(value, dict):
            yield from rows(row.fields, value, at + (key,))
        if row.fields is not None and isinstance(value, list):
            for i, item in enumerate(value):
                yield from rows(row.fields, item, at + (key, i))


def with_value(data: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    inner: Any = out
    for p in path[:-1]:
        inner = inner[p]
    inner[path[-1]] = value
    return out


def without(data: dict[str, Any], path: Path) -> dict[str, Any]:
    out = copy.deepcopy(data)
    inner: Any = out
    for p in path[:-1]:
        inner = inner[p]
    del inner[path[-1]]
    return out


WRONG_TYPE = {
    sf.TEXT: [1, 2], sf.NAME: 7, sf.INTEGER: "many", sf.FLAG: "maybe", sf.STRINGS: {"a": "b"},
    sf.STRING_MAP: ["a"], sf.QUANTITY: ["8"], sf.DURATION: [60], sf.MAPPING: "text",
    sf.MAPPINGS: "text", sf.TEXT_OR_MAPPING: [1], sf.RESOURCES: ["x"],
}  # fmt: skip


def bad_values(row: sf.Field):
    """(what is wrong, a value the parser refuses for it) for one field."""
    yield "wrong type", WRONG_TYPE[row.type]
    for choice in row.choices[:1]:
        yield "not an allowed word", choice.upper() + "x"
    if row.pattern is not None or row.type == sf.NAME:
        yield "not the pattern", "Not Valid!"
    if row.type == sf.INTEGER and row.minimum is not None:
        yield "below the minimum", row.minimum - 1
    if row.type == sf.INTEGER and row.maximum is not None:
        yield "above the maximum", row.maximum + 1


def cases():
    for kind, data in VALID:
        for path, row in rows(TABLES[kind], data):
            for why, value in bad_values(row):
                yield pytest.param(kind, data, path, value, id=f"{kind}:{dotted(path)}:{why}")
            if row.required and not (kind in ("job", "service") and "template" in data):
                yield pytest.param(kind, data, path, None, id=f"{kind}:{dotted(path)}:missing")
        for path in [(), *(p for p, r in rows(TABLES[kind], data) if r.type == sf.MAPPING)]:
            grown = path + ("colour",)
            yield pytest.param(kind, data, grown, "red", id=f"{kind}:{dotted(grown)}:unknown")


@pytest.mark.parametrize(
    "kind, data",
    VALID,
    ids=["job", "mig-job", "templated", "cluster", "tpu", "neuron", "amd", *("service",) * 8],
)
def test_a_full_spec_validates_and_parses(kind, data):
    assert schema_errors(kind, data) == []
    assert parser_verdict(kind, data) is None


def test_the_full_specs_set_every_field_of_the_tables():
    """Else a field added to a table would have no case below."""

    def every(table: sf.Table, at: Path = ()) -> set[Path]:
        out = set()
        for row in table:
            out.add(at + (row.name,))
            if row.fields is not None:
                out |= every(row.fields, at + (row.name,))
        return out

    for kind in KINDS:
        set_ = {tuple(p for p in path if isinstance(p, str)) for kind_, data in VALID
                if kind_ == kind for path, _ in rows(TABLES[kind], data)}  # fmt: skip
        assert every(TABLES[kind]) == set_


@pytest.mark.parametrize("kind, data, path, value", list(cases()))
def test_what_the_parser_refuses_the_schema_refuses(kind, data, path, value):
    bad = without(data, path) if value is None else with_value(data, path, value)
    refused = parser_verdict(kind, bad)
    assert refused is not None, "the parser accepts it"
    assert schema_errors(kind, bad), f"the schema accepts what the parser refuses: {refused}"


def test_a_job_naming_a_template_may_leave_the_image_to_it():
    job = without(TEMPLATED_JOB, ("image",))
    assert schema_errors("job", job) == []
    assert schema_errors("job", without(job, ("template",))) != []


def _kind_of(data: Any) -> str | None:
    if not isinstance(data, dict) or data.get("apiVersion") != "gpuctl/v1":
        return None
    kinds = {"Cluster": "cluster", "Job": "job", "Pod": "job", "Service": "service", None: "job"}
    return kinds.get(data.get("kind"))


def _specs_in_tests() -> list[tuple[str, str]]:
    """(where, text) of every whole YAML spec written in a test module as a string, or as a
    sum of strings and of the module's string constants (BASE + "gpus: 2\n")."""
    found = []
    for module in sorted(FilePath(ROOT, "tests").rglob("test_*.py")):
        tree = ast.parse(module.read_text())
        named = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            for t in n.targets
            if isinstance(t, ast.Name) and isinstance(n.value.value, str)
        }
        for node in ast.walk(tree):
            text = _text_of(node, named)
            if text is not None and "apiVersion: gpuctl/v1" in text:
                found.append((f"{module.relative_to(ROOT)}:{node.lineno}", text))  # type: ignore[attr-defined]
    return found


def _text_of(node: ast.AST, named: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return None  # a constant on its own is found where it is written
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [
            named.get(n.id) if isinstance(n, ast.Name) else _text_of(n, named)
            for n in (node.left, node.right)
        ]
        if parts[0] is not None and parts[1] is not None:
            return parts[0] + parts[1]
    return None


def _examples() -> list[tuple[str, str]]:
    return [
        (f"examples/{p.name}", p.read_text())
        for p in sorted(FilePath(ROOT, "examples").glob("*.yaml"))
    ]


def test_every_example_validates():
    checked = 0
    for where, text in _examples():
        data = yaml.safe_load(text)
        kind = _kind_of(data)
        assert kind is not None, where
        assert schema_errors(kind, data) == [], where
        checked += 1
    assert checked >= 8


def test_specs_written_in_the_tests_get_the_same_verdict_from_the_schema():
    """A spec the parser accepts validates; one it refuses for an unknown field or a value
    of the wrong type does not (the cases above cover that field by field)."""
    accepted = 0
    for where, text in _specs_in_tests():
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        kind = _kind_of(data)
        if kind is None or (kind == "job" and "template" in data):
            continue  # a template's fields are merged in before the parser reads the job
        verdict = parser_verdict(kind, data)
        errors = schema_errors(kind, data)
        if verdict is None:
            assert errors == [], (where, errors)
            accepted += 1
        elif verdict.message.startswith(("unknown field", "expected ")):
            assert errors, (where, verdict.message)
    assert accepted >= 40, accepted


# ---------- rules on text: the same verdict from parser and schema, value by value ----------

# Values a person or a generator may write where a name, a quantity, a duration or a key
# goes: case, signs, dots and slashes, lengths at and past each limit, digits that are not
# ASCII, numbers in other bases, white space and line breaks, zero.
HOSTILE = [
    "", " ", "\t", "a\n", "\na", " a", "a ", "a b", "BAD", "BAD_", "Bad", "bad_", "-a", "a-",
    "_a", "a_", ".a", "a.", "a..b", "a.b", "a-b", "a_b", "a/b", "a/b/c", "/a", "a/", "A/b",
    "a.b/C", "x" * 63, "x" * 64, "x" * 253, "x" * 254, ("y" * 62 + ".") * 4 + "y",
    "a" * 254 + "/b", "b/" + "a" * 64, "٣", "²", "１", "ａ", "é", "a\u00a0", "\ufeffa", "0", "00",
    "1", "-1", "+1", "-0", "+0", "0.0", "-0.0", "1.5", ".5", "5.", ".", "+", "-", "1e3",
    "1E3", "1e-3", "-1e3", "1e", "e3", "0x10", "0o7", "1_000", "1:30", "1Ki", "1ki", "1KI",
    "1k", "1K", "500m", "0m", "-500m", "1m1", "Ki", "1Gi ", " 1Gi", "1e2147483647",
    "0s", "0h0m", "90s", "1h30m", "1H", "1h 30m", "30m1h", "2d", " 90s ", "90s\n", "1.5h",
    "h", "s1", "-90s", "hugepages-2Mi", "hugepages-0", "hugepages--2Mi", "hugepages-x/y",
    "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "kubernetes.io/x", "a.kubernetes.io/x",
    "node.kubernetes.io/x", "k8s.io/y", "vpc.amazonaws.com/efa", "example.com/dev",
    "key:NoSchedule", "key=value:NoExecute", "key=:NoSchedule", "key=a=b:NoSchedule",
    "key:Sometimes", "KEY_1", "_x", "1x", "x.y-z", "..x", "us-east-1", "cr-0123456789abcdef0",
    "p5.48xlarge", "1.33", "my_table", "my..bucket", "9999999999s", "1e2147483648", "1" * 101,
    0, 1, -1, 1.5, -1.5, 10**70, 2**31 - 1, 2**31, True,
]  # fmt: skip


def _rules(table: sf.Table, data: dict[str, Any], at: Path = ()):
    """(path, row) of the fields set in DATA whose values or keys follow a rule on text."""
    for path, row in rows(table, data, at):
        if row.type == sf.TEXT_OR_MAPPING:
            continue  # its text form stands for the whole mapping: other fields depend on it
        ruled = row.pattern or row.keys or row.type in (sf.NAME, sf.QUANTITY, sf.DURATION)
        if ruled and not row.choices:
            yield path, row


def _placed(row: sf.Field, current: Any, value: Any) -> list[tuple[str, Any]]:
    """(where, what) each way VALUE can stand in the field: as its value, as an item of
    its list, as a key or a value of its mapping."""
    if row.type == sf.STRINGS:
        return [("item", [value])]
    if row.type in (sf.STRING_MAP, sf.RESOURCES):
        key, inner = next(iter(current.items()))
        out = [("value", {key: value})] if row.pattern else []
        if row.keys and isinstance(value, str):
            out.append(("key", {value: inner}))
        return out
    return [("value", value)]


def hostile_cases():
    for kind, full in (("job", FULL_JOB), ("cluster", FULL_CLUSTER)):
        for path, row in _rules(TABLES[kind], full):
            base = full
            if kind == "job":  # the field alone (a multi-node job's name has more rules)
                alone = ("apiVersion", "name", "image", "cpu", path[0])
                # ... but for what keeps several workers together
                alone += ("nodes",) if path[0] == "topology" else ()
                base = {k: full[k] for k in alone}
            yield pytest.param(kind, base, path, row, id=f"{kind}:{dotted(path)}")


# What the schema cannot state, each with a value the parser refuses and the schema takes
# (docs/jobs.md, "what stays the parser's job"): if one starts to agree, drop it here and
# there.
SCHEMA_CANNOT: dict[tuple[str, str, str, Any], str] = {
    # a number's value, not how it was written: YAML writes 10**70 as 71 digits
    **{("job", f, w, 10**70): "a label value of more than 63 digits"
       for f, w in (("labels", "value"), ("node_selector", "value"), ("gpu_type", "item"))},
    # a sum of parts
    **{("job", f, "value", v): "more than 2**31 - 1 seconds"
       for f in ("deadline", "ttl_after_finished") for v in ("9999999999s", "1" * 101)},
    **{("job", f, "value", v): "more than 100 digits; an exponent beyond an int32"
       for f in ("cpu", "memory", "shm", "volumes[1].empty_dir")
       for v in ("1e2147483648", "1" * 101)},
}  # fmt: skip


@pytest.mark.parametrize("kind, data, path, row", list(hostile_cases()))
def test_a_rule_on_text_gets_the_same_verdict_from_parser_and_schema(kind, data, path, row):
    current: Any = data
    for p in path:
        current = current[p]
    disagree = []
    for value in HOSTILE:
        for where, placed in _placed(row, current, value):
            bad = with_value(data, path, placed)
            parser_takes = parser_verdict(kind, bad) is None
            schema_takes = schema_errors(kind, bad) == []
            if (kind, dotted(path), where, value) in SCHEMA_CANNOT:
                assert not parser_takes and schema_takes, f"{value!r} agrees now: SCHEMA_CANNOT"
            elif parser_takes != schema_takes:
                disagree.append(f"{where} {value!r}: parser takes it {parser_takes}")
    assert disagree == []


short_text = st.text(st.sampled_from("aZ09-._/:=+ \n٣eEKkimhsd"), max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    field=st.sampled_from(
        [("priority",), ("cpu",), ("deadline",), ("volumes", 0, "pvc"), ("volumes", 1, "empty_dir")]
    ),
    value=short_text,
)
def test_short_texts_get_the_same_verdict_from_parser_and_schema(field, value):
    bad = with_value(FULL_JOB, field, value)
    assert (parser_verdict("job", bad) is None) == (schema_errors("job", bad) == [])


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(["env", "labels", "node_selector"]), key=short_text)
def test_short_keys_get_the_same_verdict_from_parser_and_schema(field, key):
    bad = with_value(FULL_JOB, (field,), {key: "v"})
    assert (parser_verdict("job", bad) is None) == (schema_errors("job", bad) == [])


def _patterns(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
        return found.union(*(_patterns(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_patterns(v) for v in node))
    return set()


ECMA = """
const {patterns, texts} = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(patterns.map(p => texts.map(t => new RegExp(p, "u").test(t)))));
"""


@pytest.mark.integration
def test_every_pattern_reads_the_same_in_ecma_262_as_in_python():
    """Editors evaluate `pattern` as ECMA-262 regular expressions (with the u flag, as the
    YAML and JSON language servers do); jsonschema and the parser use Python's `re`."""
    import re
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node (Node.js) not installed: ECMA-262 regular expressions unchecked")
    patterns = sorted(_patterns(schema("job")) | _patterns(schema("cluster")))
    texts = [v for v in HOSTILE if isinstance(v, str)]
    texts += [v + "\n" for v in texts] + ["x/" + v for v in texts] + [v + "Ki" for v in texts]
    run = subprocess.run(
        [node, "-e", ECMA],
        input=json.dumps({"patterns": patterns, "texts": texts}),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    ecma = json.loads(run.stdout)
    differ = [
        (p, t)
        for p, verdicts in zip(patterns, ecma, strict=True)
        for t, verdict in zip(texts, verdicts, strict=True)
        if verdict != bool(re.search(p, t))
    ]
    assert len(patterns) >= 20 and differ == []
