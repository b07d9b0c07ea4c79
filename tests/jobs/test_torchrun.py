"""The environment a multi-node job renders makes real PyTorch processes form one group.

Each worker of the rendered Indexed Job is run here as a local process group leader with
exactly the container's command and environment: the completion-index fields filled in with
the worker's index (what the Job controller puts in the pod's annotation), and the
master's DNS name (worker 0 behind the headless Service) resolved to 127.0.0.1, where
worker 0 runs. The processes meet over gloo on the CPU.

torch is not a dependency of gpuctl, nor of its test extra: `pip install torch==2.13.0`
takes a wheel file on this kind of machine in about 40 s, but elsewhere the same line
downloads a CUDA build of several GB. Without torch these tests skip, saying so."""

import importlib.util
import json
import os
import socket
import subprocess
import sys

import pytest

from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.core.pods import COMPLETION_INDEX
from gpuctl.jobs.core.spec import parse_job

pytestmark = [
    pytest.mark.integration,  # starts processes that listen on a port
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="torch is not installed (pip install torch==2.13.0, a CPU build, to run these)",
    ),
]

TRAIN = """\
import json, os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
print(json.dumps({
    "rank": dist.get_rank(),
    "world_size": dist.get_world_size(),
    "sum": total.item(),
    "node_rank": os.environ.get("GROUP_RANK", os.environ["RANK"]),
}), flush=True)
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(container: dict, index: int) -> dict[str, str]:
    """The container's environment on worker `index`, as the kubelet would set it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC"))}
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    master = None
    for e in container["env"]:
        if "valueFrom" in e:
            assert e["valueFrom"] == {"fieldRef": {"fieldPath": COMPLETION_INDEX}}, e
            env[e["name"]] = str(index)
        else:
            env[e["name"]] = e["value"]
    master = env["MASTER_ADDR"]
    for name in ("MASTER_ADDR", "PET_MASTER_ADDR"):
        assert env[name] == master
        env[name] = "127.0.0.1"  # <job>-0.<job>: worker 0, which runs on this machine
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_job(tmp_path, spec_text: str) -> list[dict]:
    (tmp_path / "train.py").write_text(TRAIN)
    spec = parse_job(load_yaml(spec_text, "job.yaml"))
    service, job = render(spec)
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    argv = container["command"] + container.get("args", [])
    workers = [
        subprocess.Popen(
            argv,
            cwd=tmp_path,
            env=worker_env(container, i),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(job["spec"]["completions"])
    ]
    results = []
    try:
        for w in workers:
            out, err = w.communicate(timeout=240)
            assert w.returncode == 0, err[-3000:]
            results += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    return results


def job(**fields) -> str:
    """A multi-node job spec on a free port, with these fields (command, nodes, ...)."""
    spec = {"apiVersion": "gpuctl/v1", "kind": "Job", "name": "ddp", "image": "pytorch"}
    return json.dumps(spec | fields | {"master_port": free_port()})  # JSON is YAML


def test_a_bare_torchrun_on_every_worker_forms_one_group(tmp_path):
    results = run_job(
        tmp_path, job(command=["torchrun"], args=["train.py"], nodes=2, nproc_per_node=2)
    )
    # 2 workers × 2 processes, one group: every rank once, all-reduce over all of them
    assert sorted(r["rank"] for r in results) == [0, 1, 2, 3]
    assert {r["world_size"] for r in results} == {4}
    assert {r["sum"] for r in results} == {1.0 + 2 + 3 + 4}
    assert sorted(r["node_rank"] for r in results) == ["0", "0", "1", "1"]


def test_one_process_per_worker_with_init_process_group_env(tmp_path):
    results = run_job(tmp_path, job(command=["python", "train.py"], nodes=3, gpus=8))
    # RANK is the worker's index and WORLD_SIZE the number of workers: not 3 × 8
    assert sorted(r["rank"] for r in results) == [0, 1, 2]
    assert {r["world_size"] for r in results} == {3}
    assert {r["sum"] for r in results} == {6.0}
