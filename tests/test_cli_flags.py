"""Every command spells the common options the same way: walk the command tree gpuctl runs
and check each command's options, then check a few of them end to end through the CLI."""

from __future__ import annotations

import os

import pytest
import yaml

from gpuctl import app as gpuctl_app
from gpuctl.cli import options
from gpuctl.cli.workflow import is_changing
from tests import ROOT
from tests.gpu_cluster import mark, node, seed, writes

# Commands that talk to Kubernetes (and so take --context and --kubeconfig).
KUBE = {
    "submit",
    "doctor",
    "whatif",
    "version",
    "jobs list",
    "jobs get",
    "jobs logs",
    "jobs delete",
    "jobs why",
    "mig show",
    "mig configure",
    "mig rebalance",
    "share timeslice",
    "share off",
    "share show",
    "quota set",
    "quota list",
    "quota lint",
    "sched render",
    "reclaim restore",
    "make-room",
    "sched extender",
    "nodes",
}
# Commands that read a spec file: -f/--file.
SPEC_READERS = {"render", "submit", "provision", "destroy", "mig configure", "mig assert"}
# Commands without -o, and why.
NO_OUTPUT = {
    "jobs logs": "prints the job's own log lines",
    "init": "prints a commented YAML starter, YAML only (-o yaml); -f FILE names where it goes",
    "sched extender": "a server: answers kube-scheduler over HTTP, prints nothing",
    "completion": "prints a shell script, as kubectl completion does",
}
# `jobs logs -f` follows, as `kubectl logs -f` does; everywhere else -f is --file.
F_IS_FOLLOW = {"jobs logs"}


def _commands() -> dict[str, object]:
    out: dict[str, object] = {}

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs is None:
            out[" ".join(path)] = cmd
        else:
            for name, sub in subs.items():
                walk(sub, [*path, name])

    walk(gpuctl_app.command(built=True), [])
    return out


COMMANDS = _commands()
# Commands that change something (declared so: tests/test_confirmation.py): -y/--yes, --dry-run.
CHANGERS = {name for name, cmd in COMMANDS.items() if is_changing(getattr(cmd, "callback", None))}


def visible(cmd) -> dict[str, object]:
    """Each visible option of CMD by every spelling it has."""
    by_flag = {}
    for p in cmd.params:
        if getattr(p, "hidden", False) or not hasattr(p, "opts"):
            continue
        for flag in [*p.opts, *p.secondary_opts]:
            by_flag[flag] = p
    return by_flag


def test_the_lists_name_real_commands():
    for name in KUBE | CHANGERS | SPEC_READERS | set(NO_OUTPUT):
        assert name in COMMANDS, name
    # every command gpuctl has is walked (app.COMMANDS names the top-level ones)
    assert {c.split()[0] for c in COMMANDS} == set(gpuctl_app.COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_common_options_are_spelled_alike(name):
    cmd = COMMANDS[name]
    flags = visible(cmd)

    def spelled(flag: str, *spellings: str, metavar: str | None = None, help: str | None = None):
        assert flag in flags, f"{name}: no {flag}"
        p = flags[flag]
        assert sorted([*p.opts, *p.secondary_opts]) == sorted(spellings), f"{name}: {flag}"
        if metavar is not None:
            assert p.metavar == metavar, f"{name}: {flag} metavar {p.metavar}"
        if help is not None:
            assert p.help == help, f"{name}: {flag} help"
        return p

    # every command, and the root, take --debug
    spelled("--debug", "--debug", help=options.DEBUG_HELP)
    if name in KUBE:
        spelled("--context", "--context", metavar="NAME", help=options.CONTEXT_HELP)
        spelled("--kubeconfig", "--kubeconfig", metavar="FILE", help=options.KUBECONFIG_HELP)
    else:
        assert "--context" not in flags and "--kubeconfig" not in flags, name
    if name in CHANGERS:
        assert spelled("-y", "-y", "--yes").is_flag
        dry = spelled("--dry-run", "--dry-run")
        assert dry.is_flag and not dry.secondary_opts, f"{name}: --dry-run takes no value"
    elif "--dry-run" in flags:
        assert flags["--dry-run"].is_flag, name
    if name in SPEC_READERS:
        spelled("-f", "-f", "--file")
    if "-f" in flags and name not in F_IS_FOLLOW:
        spelled("-f", "-f", "--file")
    if name not in NO_OUTPUT:
        out = spelled("-o", "-o", "--output")
        choices = set(getattr(out.type, "choices", ()))
        assert {"json", "yaml"} <= choices, f"{name}: -o {choices}"
    if "-n" in flags:
        spelled("-n", "-n", "--namespace", metavar="NAMESPACE")
        assert flags["-n"].callback is not None, f"{name}: -n without the namespace check"
    if "-l" in flags:
        spelled("-l", "-l", "--selector", metavar="SELECTOR")
    assert "--nodes" not in flags, f"{name}: --node is the spelling"
    if "--node" in flags:
        node = spelled("--node", "--node", metavar="NAME")
        assert node.multiple, f"{name}: --node is repeatable"
    if "-y" in flags or "--yes" in flags:
        spelled("-y", "-y", "--yes")


def test_the_root_takes_the_kube_options_too():
    root = visible(gpuctl_app.command())
    assert root["--context"].help == options.CONTEXT_HELP
    assert root["--kubeconfig"].help == options.KUBECONFIG_HELP
    assert root["--debug"].help == options.DEBUG_HELP


# ---- end to end ----


def two_contexts(tmp_path, url: str) -> str:
    """A kubeconfig whose current context points at nothing; 'emu' at the emulator."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "dead",
        "clusters": [
            {"name": "emu", "cluster": {"server": url}},
            {"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}},
        ],
        "users": [{"name": "u", "user": {"token": "test"}}],
        "contexts": [
            {"name": "emu", "context": {"cluster": "emu", "user": "u", "namespace": "ml"}},
            {"name": "dead", "context": {"cluster": "dead", "user": "u"}},
        ],
    }
    path = tmp_path / "two-contexts"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.mark.parametrize(
    "args",
    [
        ["--kubeconfig", "{cfg}", "--context", "emu", "jobs", "list", "-o", "json"],
        ["jobs", "list", "--kubeconfig", "{cfg}", "--context", "emu", "-o", "json"],
        ["--kubeconfig", "{cfg}", "jobs", "list", "--context", "emu", "-o", "json"],
        # the later one wins, as a repeated option does
        ["--context", "dead", "jobs", "list", "--kubeconfig", "{cfg}", "--context", "emu"],
    ],
)
def test_context_and_kubeconfig_before_or_after_the_command(cli, kube, tmp_path, args, monkeypatch):
    cfg = two_contexts(tmp_path, kube.url)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    since = len(kube.requests())
    r = cli(*[a.format(cfg=cfg) for a in args])
    assert r.code == 0, r
    # the emulator was asked, in the context's namespace
    paths = [path for _, path, _ in kube.requests()[since:]]
    assert any(p.startswith("/apis/batch/v1/namespaces/ml/") for p in paths), paths


def test_context_after_the_command_names_a_missing_one(cli, kube, tmp_path):
    cfg = two_contexts(tmp_path, kube.url)
    r = cli("quota", "list", "--kubeconfig", cfg, "--context", "nosuch")
    assert r.code == 2 and f"no context 'nosuch' in the kubeconfig {cfg}" in r.err, r


def test_a_missing_kubeconfig_file_is_a_usage_error(cli, tmp_path):
    r = cli("share", "show", "--kubeconfig", str(tmp_path / "nope"))
    assert r.code == 2 and "--kubeconfig" in r.err and "no such file" in r.err, r


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_in_either_place_shows_the_traceback(cli, tmp_path, where):
    args = ["doctor", "--kubeconfig", str(tmp_path / "nope")]
    plain = cli(*args)
    assert plain.code == 2 and "Traceback" not in plain.err
    debug = cli(*(["--debug", *args] if where == "before" else [*args, "--debug"]))
    assert debug.code == 2 and "Traceback" in debug.err
    # and it does not stick to the next command run in the same process
    assert "Traceback" not in cli(*args).err


EX = os.path.join(ROOT, "examples")


@pytest.fixture
def a100(kube_api):
    """A node the example job (2 × A100) fits."""
    seed(kube_api, node("gpu-a", 8, labels={"gpu-type": "a100"}, gfd=False))


def test_submit_takes_the_spec_as_f_or_argument_not_both(cli, kube, a100):
    job = os.path.join(EX, "seed-pod.yaml")
    since = mark(kube)
    by_arg = cli("submit", "--dry-run", job, "-n", "ml")  # --dry-run does not eat the file
    by_f = cli("submit", "-f", job, "--dry-run", "-n", "ml")
    assert by_arg.code == 0 and by_f.code == 0, (by_arg, by_f)
    assert by_arg.out == by_f.out and "kind: Pod" in by_f.out
    as_json = cli("submit", "-f", job, "--dry-run", "-n", "ml", "-o", "json")
    assert yaml.safe_load(as_json.out)["kind"] == "List"
    both = cli("submit", job, "-f", job, "--dry-run")
    assert both.code == 2 and "not both" in both.err and "usage: gpuctl submit" in both.err
    assert writes(kube, since) == []  # --dry-run sends nothing


def test_render_takes_specs_as_f_or_arguments(cli):
    job = os.path.join(EX, "seed-pod.yaml")
    by_arg, by_f = cli("render", job, job), cli("render", "-f", job, "--file", job)
    assert by_arg.code == 0 and by_arg.out == by_f.out and by_arg.out.count("kind: Pod") == 2
    assert cli("render", job, "-f", job).code == 2
    none = cli("render")
    assert none.code == 2 and "Missing job spec" in none.err


def test_submit_dry_run_server_asks_the_server_to_check_and_persist_nothing(cli, kube, a100):
    job = os.path.join(EX, "seed-pod.yaml")
    since = mark(kube)
    r = cli("submit", job, "--dry-run=server", "-n", "ml")
    assert r.code == 0 and "validated (server dry run)" in r.err, r
    sent = [(m, q) for m, _, q in kube.requests()[since:] if str(m).upper().endswith("POST")]
    assert sent and all(q.get("dryRun") == "All" for _, q in sent), sent


def test_submit_old_dry_run_spellings_work_with_a_warning(cli, kube, a100):
    job = os.path.join(EX, "seed-pod.yaml")
    new = cli("submit", job, "--dry-run", "-n", "ml")
    old = cli("submit", job, "--dry-run", "client", "-n", "ml")
    assert old.code == 0 and old.out == new.out
    assert "`--dry-run client` is deprecated: use --dry-run" in old.err
    bad = cli("submit", job, "--dry-run=maybe")
    assert bad.code == 2 and "use --dry-run or --dry-run=server" in bad.err
    other = cli("quota", "set", "t", "--gpus", "1", "--dry-run=server")
    assert other.code == 2 and "--dry-run" in other.err


def test_jobs_delete_dry_run_sends_nothing(cli, kube, a100):
    job = os.path.join(EX, "seed-pod.yaml")
    assert cli("submit", job, "-n", "ml").code == 0
    since = mark(kube)
    r = cli("jobs", "delete", "gpu-pod", "-n", "ml", "--dry-run", "-o", "json")
    assert r.code == 0 and "delete Pod/gpu-pod in namespace ml" in r.err, r
    assert r.err.endswith("dry run: nothing was changed\n"), r
    assert yaml.safe_load(r.out) == {"namespace": "ml", "deleted": ["Pod/gpu-pod"], "dryRun": True}
    assert writes(kube, since) == []
    refused = cli("jobs", "delete", "gpu-pod", "-n", "ml")  # stdin is no terminal here
    assert refused.code == 3 and writes(kube, since) == []
    r = cli("jobs", "delete", "gpu-pod", "-n", "ml", "-y", "-o", "yaml")
    assert r.code == 0 and yaml.safe_load(r.out)["deleted"] == ["Pod/gpu-pod"]
    assert writes(kube, since) == [("DELETE", "/api/v1/namespaces/ml/pods/gpu-pod")]


def test_old_spellings_say_what_to_use(cli, tmp_path):
    r = cli("alerts", "render", "--format", "prometheusrule", "-l", "release=kps")
    assert r.code == 2 and "use --label release=kps" in r.err
    r = cli("whatif", "--nodes", str(tmp_path / "n.csv"), "--pods", str(tmp_path / "p.csv"))
    assert "--nodes is deprecated: use --node-csv" in r.err
    assert "--pods is deprecated: use --pod-csv" in r.err
