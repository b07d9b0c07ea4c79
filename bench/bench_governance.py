"""Large clusters: the pure work of `gpuctl doctor`, `share timeslice` planning and
`quota list` on 5,000 GPU nodes and 50,000 pods, against the unavoidable cost of decoding
the API's JSON replies for the same objects (json.loads), measured in this run.
Target: each ≤ 1× the decode time (gpuctl's own work never dominates)."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import benchenv  # noqa: E402

from gpuctl.doctor.core import checks as doctor  # noqa: E402
from gpuctl.jobs.core import quota_check  # noqa: E402
from gpuctl.k8s import device_plugin  # noqa: E402
from gpuctl.quota.core import rules as quota  # noqa: E402
from gpuctl.sharing.core import config as sharing  # noqa: E402
from tests.gpu_cluster import daemonset, node, pod  # noqa: E402

NODES, PODS, NAMESPACES, RUNS = 5000, 50000, 200, 5


def median(fn) -> float:
    return benchenv.median(fn, RUNS)


def main() -> int:
    nodes = [node(f"gpu-{i}", labels={"pool": f"p{i % 10}"}) for i in range(NODES)]
    pods = [
        pod(f"p{i}", f"team-{i % NAMESPACES}", i % 3, node_name=f"gpu-{i % NODES}")
        for i in range(PODS)
    ]
    quotas = [
        {
            "metadata": {"name": "gpuctl-gpus", "namespace": f"team-{i}"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "64"}},
        }
        for i in range(NAMESPACES)
    ]
    ds = [
        daemonset("nvidia-device-plugin-daemonset", "gpu-operator", config_map="c"),
        daemonset("nvidia-dcgm-exporter", "gpu-operator"),
    ]
    configs = {"ts-4": device_plugin.config_text(sharing.make_sharing("time-slicing", 4))}
    replies = [json.dumps({"items": nodes}), json.dumps({"items": pods})]
    ts = sharing.make_sharing("time-slicing", 4)

    ref = median(lambda: [json.loads(r) for r in replies])
    rows = [
        ("doctor checks", median(lambda: doctor.run_checks(nodes, ds, "c", configs))),
        (
            "share plan (all nodes)",
            median(
                lambda: sharing.plan(
                    sharing.select_nodes(nodes, (), ()),
                    ts,
                    "ts-4",
                    device_plugin.parse_configs(configs),
                    False,
                )
            ),
        ),
        ("quota usage rows", median(lambda: quota.usage_rows(quotas, pods))),
        (
            "submit quota check",
            median(lambda: quota_check.check_job(quotas, pods, "team-1", "nvidia.com/gpu", 8)),
        ),
    ]
    print(
        f"reference: json.loads of {NODES} nodes + {PODS} pods  median {ref * 1000:.0f} ms "
        f"over {RUNS} runs"
    )
    ok = True
    for name, t in rows:
        ratio = t / ref
        ok &= ratio <= 1.0
        print(
            f"{name:<28} {t * 1000:7.1f} ms  ratio {ratio:.2f}  (target ≤ 1.0)  "
            f"{'OK' if ratio <= 1.0 else 'MISSED'}"
        )
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
