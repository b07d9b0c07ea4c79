"""Job spec v1: what it accepts, and the exact error for what it refuses."""

import textwrap

import pytest

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.core.spec import parse_job
from gpuctl.k8s.placement import place

BASE = "apiVersion: gpuctl/v1\nname: train\nimage: nvidia/cuda:12.0-runtime\n"


def offered(spec):
    """The resource and count each worker asks for, with no cluster read."""
    where = place(spec.gpu_request)
    return (where.resource, where.per_worker) if where.resource else None


def parse(text: str):
    return parse_job(load_yaml(text, "job.yaml"))


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as e:
        parse(text)
    return e.value


def test_minimal_spec_defaults_to_one_whole_gpu_job():
    spec = parse(BASE)
    assert (spec.kind, spec.gpus, spec.nodes, spec.retries) == ("Job", 1, 1, 0)
    assert offered(spec) == ("nvidia.com/gpu", 1)


def test_full_spec():
    spec = parse(
        BASE
        + textwrap.dedent("""\
        kind: Job
        namespace: team-a
        command: [python, train.py]
        args: ["--lr", 0.1]
        env: {EPOCHS: 90, DEBUG: true}
        gpus: 2
        gpu_type: [a100, h100]
        nodes: 3
        cpu: 8
        memory: 64Gi
        shm: 16Gi
        ttl_after_finished: 1h
        deadline: 24h
        retries: 2
        priority: high
        labels: {team: a}
        tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
        """)
    )
    assert spec.args == ("--lr", "0.1")
    assert dict(spec.env) == {"EPOCHS": "90", "DEBUG": "true"}
    assert spec.gpu_type == ("a100", "h100")
    assert (spec.cpu, spec.memory, spec.shm) == ("8", "64Gi", "16Gi")
    assert (spec.ttl_after_finished, spec.deadline) == (3600, 86400)
    assert spec.tolerations == (
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
    )


def test_scheduler_names_a_profile_or_defaults_to_none():
    assert parse(BASE).scheduler is None
    assert parse(BASE + "scheduler: gpuctl-binpack\n").scheduler == "gpuctl-binpack"
    assert parse(BASE + "scheduler: team.pack-2\n").scheduler == "team.pack-2"  # a subdomain


def test_mig_and_shared_resources():
    assert offered(parse(BASE + "mig: 1g.10gb+me\n")) == ("nvidia.com/mig-1g.10gb.me", 1)
    assert offered(parse(BASE + "gpus: 2\nshared: true\n")) == ("nvidia.com/gpu.shared", 2)
    assert offered(parse(BASE + "gpus: 0\n")) is None


@pytest.mark.parametrize(
    "extra, line, field, needle",
    [
        ("gpuz: 2\n", 4, "gpuz", "did you mean 'gpus'"),
        ("gpus: -1\n", 4, "gpus", "at least 0"),
        ("gpus: 1.5\n", 4, "gpus", "whole number"),
        ("gpus: '2'\n", 4, "gpus", "whole number"),
        ("gpus: true\n", 4, "gpus", "whole number"),
        ("gpus: 2\nmig: 1g.10gb\n", 5, "mig", "not both"),
        ("mig: 9g.999gb\n", 4, "mig", "not a MIG profile"),
        ("mig: 1g.10gb\nshared: true\n", 5, "shared", "MIG slice"),
        ("nodes: 0\n", 4, "nodes", "at least 1"),
        ("gpu_type: ''\n", 4, "gpu_type", "must not be empty"),
        ("gpu_type: []\n", 4, "gpu_type", "must not be empty"),
        ("gpu_type: [a100, 'bad value!']\n", 4, "gpu_type", "label value"),
        ("kind: Deployment\n", 4, "kind", "one of Job, Pod"),
        ("kind: Pod\nretries: 1\n", 5, "retries", "kind Job only"),
        ("kind: Pod\nnodes: 2\n", 5, "nodes", "kind Job"),
        ("cpu: lots\n", 4, "cpu", "quantity"),
        ("memory: 64GB\n", 4, "memory", "quantity"),
        ("deadline: soon\n", 4, "deadline", "duration"),
        ("env: [A, B]\n", 4, "env", "mapping"),
        ("env: {'1BAD': x}\n", 4, "env", "environment variable name"),
        ("nodes: 2\nenv: {WORLD_SIZE: '4'}\n", 5, "env.WORLD_SIZE", "set by gpuctl"),
        ("command: python train.py\n", 4, "command", "list"),
        ("labels: {app.kubernetes.io/managed-by: me}\n", 4, "labels", "set by gpuctl"),
        ("labels: {gpuctl.io/job: other}\n", 4, "labels", "set by gpuctl"),
        ("labels: {job-name: x}\n", 4, "labels", "set by the Kubernetes Job controller"),
        ("labels: {controller-uid: x}\n", 4, "labels", "set by the Kubernetes Job controller"),
        (
            "labels: {batch.kubernetes.io/job-name: x}\n",
            4,
            "labels",
            "set by the Kubernetes Job controller",
        ),
        (
            "labels: {batch.kubernetes.io/job-completion-index: '0'}\n",
            4,
            "labels",
            "set by the Kubernetes Job controller",
        ),
        ("labels: {kubernetes.io/hostname: n1}\n", 4, "labels", "set by Kubernetes"),
        ("labels: {node.k8s.io/x: y}\n", 4, "labels", "set by Kubernetes"),
        ("labels: {'bad key!': x}\n", 4, "labels", "label key"),
        ("tolerations: [{key: a, operator: Maybe}]\n", 4, "tolerations[0].operator", "one of"),
        ("tolerations: [{operator: Exists, value: x}]\n", 4, "tolerations[0].value", "Exists"),
        (
            "tolerations: [{key: a, effect: NoSchedule, tolerationSeconds: 5}]\n",
            4,
            "tolerations[0].tolerationSeconds",
            "NoExecute",
        ),
        ("tolerations: [x]\n", 4, "tolerations[0]", "mapping"),
        (
            "tolerations: [{key: 'spot instance', operator: Exists}]\n",
            4,
            "tolerations[0].key",
            "taint key",
        ),
        ("tolerations: [{key: a, value: 'x y'}]\n", 4, "tolerations[0].value", "taint value"),
        ("namespace: Team_A\n", 4, "namespace", "valid name"),
        ("priority: 'High Priority'\n", 4, "priority", "PriorityClass"),
        # a trailing newline (block scalar, "\n") passed `$`-anchored checks; the API refuses it
        ("namespace: |\n  team-a\n", 4, "namespace", "valid name"),
        ('gpu_type: "a100\\n"\n', 4, "gpu_type", "label value"),
        ('labels: {team: "a\\n"}\n', 4, "labels", "label value"),
        ('priority: "high\\n"\n', 4, "priority", "PriorityClass"),
        ('memory: "64Gi\\n"\n', 4, "memory", "quantity"),
        ("deadline: 99999999999999999999d\n", 4, "deadline", "longer than"),
        ("ttl_after_finished: 2147483648\n", 4, "ttl_after_finished", "longer than"),
        (
            "tolerations: [{key: a, operator: Exists, effect: NoExecute, tolerationSeconds: 1e99}]\n",
            4,
            "tolerations[0].tolerationSeconds",
            "whole number",
        ),
        (
            "tolerations: [{key: a, operator: Exists, effect: NoExecute,"
            " tolerationSeconds: 99999999999999999999}]\n",
            4,
            "tolerations[0].tolerationSeconds",
            "at most",
        ),
        ("image_pull_secrets: [Reg_Cred]\n", 4, "image_pull_secrets", "Secret name"),
        ("scheduler: GPU_Binpack\n", 4, "scheduler", "scheduler name"),
        ('scheduler: "gpuctl-binpack\\n"\n', 4, "scheduler", "scheduler name"),
        ("scheduler: [a]\n", 4, "scheduler", "string"),
    ],
)
def test_bad_fields_name_file_line_and_field(extra, line, field, needle):
    e = error_of(BASE + extra)
    assert (e.file, e.line, e.field) == ("job.yaml", line, field)
    assert needle in str(e)


@pytest.mark.parametrize(
    "text, field, needle",
    [
        ("name: x\nimage: y\n", None, "missing required field 'apiVersion'"),
        ("apiVersion: gpuctl/v2\nname: x\nimage: y\n", "apiVersion", "unsupported version"),
        ("apiVersion: gpuctl/v1\nimage: y\n", None, "missing required field 'name'"),
        ("apiVersion: gpuctl/v1\nname: x\n", None, "missing required field 'image'"),
        ("apiVersion: gpuctl/v1\nname: Bad_Name\nimage: y\n", "name", "valid name"),
        ("apiVersion: gpuctl/v1\nname: x\nimage: 'a b'\n", "image", "white space"),
        ("apiVersion: gpuctl/v1\nname: x\nimage: 'py\u200btorch'\n", "image", "U+200B"),
        ("apiVersion: gpuctl/v1\nname: x\nimage: 'pytorch\u2060:1'\n", "image", "U+2060"),
        ("apiVersion: gpuctl/v1\nname: x\nimage: 'pytоrch'\n", "image", "U+043E"),
        ("- a\n- b\n", None, "expected a mapping"),
        ("", None, "empty"),
        ("just text\n", None, "expected a mapping"),
        # not a job spec: said so, rather than "metadata: unknown field"
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}\n",
            "apiVersion",
            "unsupported version 'v1'",
        ),
        (
            "apiVersion: gpuctl/v1\nkind: Cluster\nname: x\nregion: us-east-1\n",
            "kind",
            "must be one of Job, Pod, Service (got 'Cluster')",
        ),
        ("apiVersoin: gpuctl/v1\nname: x\nimage: y\n", "apiVersoin", "did you mean 'apiVersion'"),
    ],
)
def test_bad_documents(text, field, needle):
    e = error_of(text)
    assert e.field == field and needle in str(e)


def test_multinode_name_rules():
    e = error_of(BASE.replace("name: train", "name: 1train") + "nodes: 2\n")
    assert e.field == "name" and "start with a letter" in str(e)
    e = error_of(BASE.replace("name: train", "name: " + "a" * 62) + "nodes: 12\n")
    assert "63 characters" in str(e)


def test_cli_exit_code_2_and_message_on_bad_spec(cli, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(BASE + "gpus: -3\n")
    r = cli("render", path)
    assert r.code == 2
    assert f"{path}:4: gpus: must be at least 0" in r.err
    assert "Traceback" not in r.err and r.out == ""


def test_cli_refuses_object_constructing_tags(cli, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "job.yaml"
    path.write_text(BASE + f"env: !!python/object/apply:os.system ['touch {marker}']\n")
    r = cli("render", path)
    assert r.code == 2 and "not allowed" in r.err
    assert not marker.exists()


def test_numbers_and_booleans_are_kept_as_written():
    # YAML 1.1 reads 010 as 8, 1:30 as 90, 12.10 as 12.1 and yes as true: a user means the text
    spec = parse(
        BASE
        + textwrap.dedent("""\
        env: {OCTAL: 010, TIME: 1:30, CUDA: 12.10, FLAG: yes, HEX: 0x1F, BIG: 1_000}
        args: [--gpus, 010, --version, 12.10]
        labels: {version: 12.10}
        cpu: 010
        memory: 0.50
        """)
    )
    assert dict(spec.env) == {
        "OCTAL": "010",
        "TIME": "1:30",
        "CUDA": "12.10",
        "FLAG": "yes",
        "HEX": "0x1F",
        "BIG": "1_000",
    }
    assert spec.args == ("--gpus", "010", "--version", "12.10")
    assert dict(spec.labels)["version"] == "12.10"
    assert (spec.cpu, spec.memory) == ("010", "0.50")
    assert "not a Kubernetes quantity" in str(error_of(BASE + "cpu: 1:30\n"))


@pytest.mark.parametrize(
    "fields,line,hint",
    [
        # no H100 has a 1g.5gb (the A100 40GB's); `h100` names both H100s
        ("gpu_type: h100\nmig: 1g.5gb\n", 5, "H100-NVL profiles: 1g.12gb,"),
        ("gpu_type: [h200, NVIDIA-H100-80GB-HBM3]\nmig: 1g.12gb\n", 5, "H100-80GB profiles"),
        ("mig: 1g.10gb\ngpu_type: t4\n", 4, "no MIG: ask for whole GPUs"),
    ],
)
def test_a_mig_profile_the_gpu_type_lacks_never_schedules(fields, line, hint):
    e = error_of(BASE + fields)
    assert (e.line, e.field) == (line, "mig") and "not a MIG profile of" in e.message
    assert hint in e.hint


@pytest.mark.parametrize(
    "fields",
    [
        "gpu_type: h100\nmig: 1g.12gb\n",  # the H100 NVL's
        "gpu_type: [a100, t4]\nmig: 1g.10gb\n",  # one of the GPUs has it
        "gpu_type: NVIDIA-A100-SXM4-40GB\nmig: 1g.5gb+me\n",
        "gpu_type: [a100, fast-nodes]\nmig: 1g.12gb\n",  # a label gpuctl cannot judge
    ],
)
def test_a_mig_profile_some_gpu_of_the_type_has_is_accepted(fields):
    assert parse(BASE + fields).mig is not None


def test_gpu_type_warnings_name_the_file_line_and_item():
    from gpuctl.jobs.core.spec import gpu_type_warnings

    doc = load_yaml(BASE + "gpu_type:\n  - h100\n  - H100\n", "job.yaml")
    spec = parse_job(doc)
    assert gpu_type_warnings(doc, spec, "gpu-type") == [
        "job.yaml:6: gpu_type[1]: 'H100' differs only in case from 'h100': node labels are "
        "case-sensitive, so nodes labelled gpu-type=h100 do not match"
    ]
    doc = load_yaml(BASE + "gpu_type: Tesla-T4\n", "job.yaml")
    assert gpu_type_warnings(doc, parse_job(doc), "nvidia.com/gpu.product") == []
    # under GFD's key a GPU name is rendered as the products GFD writes: nothing to warn of
    doc = load_yaml(BASE + "gpu_type: tesla-t4\n", "job.yaml")
    assert gpu_type_warnings(doc, parse_job(doc), "nvidia.com/gpu.product") == []
    doc = load_yaml(BASE + "gpu_type: fast\n", "job.yaml")
    [warning] = gpu_type_warnings(doc, parse_job(doc), "auto")
    assert warning.startswith("job.yaml:4: gpu_type: 'fast' matches no GPU gpuctl knows")


@pytest.mark.parametrize(
    "written, yaml11",
    [("010", "8"), ("0x10", "16"), ("1_6", "16"), ("1:04", "64"), ("0b11", "3"), ("-010", "-8")],
)
@pytest.mark.parametrize("field", ["gpus", "nodes", "retries", "master_port", "deadline"])
def test_numbers_must_be_plain_decimals(field, written, yaml11):
    e = error_of(BASE + f"{field}: {written}\n")
    assert (e.file, e.line, e.field) == ("job.yaml", 4, field)
    assert f"'{written}' is not a plain decimal number (YAML 1.1 would read it as {yaml11})" in (
        e.message
    )


@pytest.mark.parametrize("written", [".inf", "-.inf", ".nan"])
def test_infinity_and_nan_are_not_numbers_of_a_spec(written):
    e = error_of(BASE + f"gpus: {written}\n")
    assert e.line == 4 and "not a plain decimal number" in e.message


def test_plain_decimals_still_read():
    spec = parse(BASE + "gpus: 8\nnodes: +2\nretries: 0\ndeadline: 90\nmaster_port: 29500\n")
    assert (spec.gpus, spec.nodes, spec.retries, spec.deadline) == (8, 2, 0, 90)


@pytest.mark.parametrize(
    "line, char",
    [
        ('command: ["python\\0"]', "U+0000"),
        ('priority: "x\\e[31m"', "U+001B"),
        ('args: ["ok", "a\\rb"]', "U+000D"),
        ('env: {A: "\\x7f"}', "U+007F"),
        ('env: {"B\\x01": x}', "U+0001"),
        ('labels: {team: "\\u202eevil"}', "U+202E"),
    ],
)
def test_control_characters_are_refused_in_any_string(line, char):
    e = error_of(BASE + line + "\n")
    assert e.line == 4 and f"control character {char}" in e.message


def test_tabs_and_line_breaks_stay_allowed_in_text():
    spec = parse(BASE + 'args: ["-c", "set -e\\n\\tpython train.py\\n"]\n')
    assert spec.args == ("-c", "set -e\n\tpython train.py\n")
