"""`gpuctl alerts render`: every variant passes `promtool check rules`, and `promtool test
rules` shows each alert firing and not firing on crafted DCGM series."""

import itertools
import json
import os
import subprocess

import pytest
import yaml

from gpuctl.app import main
from gpuctl.dcgm import holders

H100 = "NVIDIA H100 80GB HBM3"
# The target labels a GPU Operator ServiceMonitor scrape puts on every series.
EXPORTER_POD = {
    "pod": "nvidia-dcgm-exporter-x7k2p",
    "namespace": "gpu-operator",
    "container": "nvidia-dcgm-exporter",
    "job": "nvidia-dcgm-exporter",
}


def render(capsys, *args) -> tuple:
    capsys.readouterr()
    try:
        main(["alerts", "render", *args])
        code: int | str | None = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def rules_file(tmp_path, capsys, *args, name="rules.yml") -> str:
    code, out, err = render(capsys, *args)
    assert code == 0, err
    path = tmp_path / name
    path.write_text(out)
    return str(path)


def promtool_run(promtool, *args, cwd=None):
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def series(name, value_text, **labels) -> dict:
    lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{lab}}}", "values": value_text}


def gpu_labels(host="n1", gpu="0", host_label="Hostname", **extra) -> dict:
    return {host_label: host, "gpu": gpu, "UUID": f"GPU-{host}-{gpu}", "modelName": H100, **extra}


def case(inputs, alertname, eval_time, expected) -> dict:
    return {
        "interval": "1m",
        "input_series": inputs,
        "alert_rule_test": [
            {"eval_time": eval_time, "alertname": alertname, "exp_alerts": expected}
        ],
    }


def alert(labels: dict, summary: str, description: str) -> dict:
    return {
        "exp_labels": labels,
        "exp_annotations": {"summary": summary, "description": description},
    }


def run_unit_tests(promtool, tmp_path, rules_path, cases, name="tests.yml"):
    doc = {
        "rule_files": [os.path.basename(rules_path)],
        "evaluation_interval": "1m",
        "tests": cases,
    }
    (tmp_path / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = promtool_run(promtool, "test", "rules", name, cwd=os.path.dirname(rules_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["-o", "json"],
        ["--format", "prometheusrule"],
        ["--format", "prometheusrule", "-o", "json", "--label", "release=kps"],
        ["--exporter-container", "a.b,c", "--exporter-job", 'j"1', "--exporter-job", "j2"],
        ["--exporter-container", "", "--exporter-job", ""],
        [
            "--high-util",
            "60",
            "--high-util-window",
            "10m",
            "--high-util-for",
            "0s",
            "--idle-window",
            "1h",
            "--idle-for",
            "2h",
            "--memory",
            "90",
            "--memory-for",
            "1m",
            "--temperature",
            "80",
            "--temperature-for",
            "1m30s",
            "--xid-window",
            "1h",
        ],
    ],
)
def test_promtool_accepts_every_variant(promtool, tmp_path, capsys, args):
    path = rules_file(tmp_path, capsys, *args)
    if "prometheusrule" in args:
        doc = yaml.safe_load(open(path))
        assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
        assert doc["metadata"] == {
            "name": "gpuctl-gpu-alerts",
            "namespace": "monitoring",
            **({"labels": {"release": "kps"}} if "--label" in args else {}),
        }
        # promtool reads rule files; the CRD's spec is exactly one.
        path = str(tmp_path / "spec.yml")
        spec = doc["spec"]
        open(path, "w").write(json.dumps(spec) if "json" in args else yaml.safe_dump(spec))
    if "json" in args:
        json.loads(open(path).read())  # really JSON, and promtool still reads it
    proc = promtool_run(promtool, "check", "rules", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 6 rules found" in proc.stdout
    names = [r["alert"] for g in yaml.safe_load(open(path))["groups"] for r in g["rules"]]
    assert names == [
        "GPUHighUtilization",
        "GPUIdleAllocated",
        "GPUBusySignalDutyCycleOnly",
        "GPUMemoryNearFull",
        "GPUTemperatureHigh",
        "GPUXidError",
    ]


def test_promtool_rejects_a_broken_rule(promtool, tmp_path):
    """The check above is meaningful: promtool does fail on bad PromQL."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "groups:\n- name: g\n  rules:\n  - alert: X\n    expr: avg by (Hostname (DCGM_FI_DEV_GPU_UTIL)\n"
    )
    assert promtool_run(promtool, "check", "rules", str(bad)).returncode != 0


def test_default_rules_fire_and_stay_quiet(promtool, tmp_path, capsys):
    path = rules_file(tmp_path, capsys)
    util, gr = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    held = {"pod": "nb-1", "namespace": "research", "container": "main"}
    mig = lambda gi: {"GPU_I_ID": str(gi), "GPU_I_PROFILE": "3g.40gb"}  # noqa: E731
    high = lambda host, value, rest="": alert(  # noqa: E731
        {"severity": "warning", "Hostname": host},
        f"GPUs on {host} are saturated",
        f"The GPUs of {host} averaged {value}% utilization over 5m, above 80% for 15m.",
    )
    cases = [
        # High utilization: a node's GPUs averaging 90 % (n1), on a `hostname` node (n2),
        # and MIG devices reporting only GR_ENGINE_ACTIVE (n4); n3 averages 72.5 %.
        case(
            [
                series(util, "95x40", **gpu_labels("n1", "0")),
                series(util, "85x40", **gpu_labels("n1", "1")),
                series(util, "95x40", **gpu_labels("n2", "0", host_label="hostname")),
                series(util, "95x40", **gpu_labels("n3", "0")),
                series(util, "50x40", **gpu_labels("n3", "1")),
                series(gr, "0.9x40", **gpu_labels("n4", "0", **mig(1))),
                series(gr, "0.9x40", **gpu_labels("n4", "0", **mig(2))),
                # dcgm-exporter 3.x reports GPU_UTIL as 0 for MIG devices: it must not count.
                series(util, "0x40", **gpu_labels("n4", "0", **mig(1))),
                series(util, "0x40", **gpu_labels("n4", "0", **mig(2))),
            ],
            "GPUHighUtilization",
            "30m",
            [high("n1", 90), high("n2", 95), high("n4", 90)],
        ),
        # ...but not before it has lasted --high-util-for (15m).
        case([series(util, "95x40", **gpu_labels("n1", "0"))], "GPUHighUtilization", "12m", []),
        # A 100/0 square wave averages 50 %: spikes alone do not page anyone.
        case(
            [series(util, " ".join(["100", "0"] * 20), **gpu_labels("n1", "0"))],
            "GPUHighUtilization",
            "30m",
            [],
        ),
        # Idle allocated: a held GPU at 1 % fires; unheld, busy, or held only 20 min, not.
        case(
            [
                series(util, "1x80", **gpu_labels("n1", "0", **held)),
                series(util, "1x80", **gpu_labels("n1", "1")),
                series(
                    util,
                    "50x80",
                    **gpu_labels(
                        "n1",
                        "2",
                        **held,
                    ),
                ),
                series(util, "_x59 1x20", **gpu_labels("n1", "3", **held)),
                series(
                    gr, "0.01x80", **gpu_labels("n2", "0", host_label="hostname", **held, **mig(2))
                ),
                # A busy MIG slice whose GPU_UTIL reads 0 (as dcgm-exporter reports it) is not idle.
                series(gr, "0.8x80", **gpu_labels("n3", "0", **held, **mig(1))),
                series(util, "0x80", **gpu_labels("n3", "0", **held, **mig(1))),
            ],
            "GPUIdleAllocated",
            "70m",
            [
                alert(
                    {"severity": "warning", **gpu_labels("n1", "0", **held)},
                    "GPU 0 on n1 is held by a pod but idle",
                    "research/nb-1 holds GPU 0 on n1 whose utilization averaged 1% over 30m "
                    "(threshold 5%).",
                ),
                alert(
                    {
                        "severity": "warning",
                        "Hostname": "n2",
                        **gpu_labels("n2", "0", host_label="hostname", **held, **mig(2)),
                    },
                    # the slice named: seven slices of a GPU are not seven alerts on "GPU 0"
                    "GPU 0 MIG slice 2 (3g.40gb) on n2 is held by a pod but idle",
                    "research/nb-1 holds GPU 0 MIG slice 2 (3g.40gb) on n2 whose utilization "
                    "averaged 1% over 30m (threshold 5%).",
                ),
            ],
        ),
        # ...and a held GPU idle since minute 0 has not yet been idle for --idle-for (30m).
        case(
            [series(util, "1x80", **gpu_labels("n1", "0", **held))], "GPUIdleAllocated", "25m", []
        ),
        # Memory near full: 98.75 % fires, 75 % does not.
        case(
            [
                series("DCGM_FI_DEV_FB_USED", "79000x30", **gpu_labels("n1", "0", **held)),
                series("DCGM_FI_DEV_FB_FREE", "1000x30", **gpu_labels("n1", "0", **held)),
                series("DCGM_FI_DEV_FB_USED", "60000x30", **gpu_labels("n1", "1")),
                series("DCGM_FI_DEV_FB_FREE", "20000x30", **gpu_labels("n1", "1")),
            ],
            "GPUMemoryNearFull",
            "20m",
            [
                alert(  # per device: whoever holds it
                    {"severity": "warning", **gpu_labels("n1", "0")},
                    "GPU 0 on n1 memory is nearly full",
                    "GPU 0 on n1 has used 98.75% of its memory for 15m (threshold 95%).",
                )
            ],
        ),
        # Temperature: one alert per board even with two MIG devices on it; 80 C is fine.
        case(
            [
                series("DCGM_FI_DEV_GPU_TEMP", "90x20", **gpu_labels("n1", "0", **held, **mig(1))),
                series("DCGM_FI_DEV_GPU_TEMP", "90x20", **gpu_labels("n1", "0", **mig(2))),
                series("DCGM_FI_DEV_GPU_TEMP", "80x20", **gpu_labels("n1", "1")),
            ],
            "GPUTemperatureHigh",
            "10m",
            [
                alert(
                    {"severity": "warning", **gpu_labels("n1", "0")},
                    "GPU 0 on n1 is hot",
                    "GPU 0 on n1 has been above 85 C for 5m (90 C now).",
                )
            ],
        ),
        # XID_ERRORS is a gauge that keeps the last XID code until dcgm-exporter restarts.
        # XID 79 at minute 20 on n1/0: fires at once, even though the pod that held the GPU
        # died with it (its series ends, a pod-less one starts at 79). n1/2 changed from an
        # old XID 31 to a new 48. n1/3's 79 is old news (an exporter restarted with it):
        # no alert; n1/1 never had one.
        case(
            [
                series("DCGM_FI_DEV_XID_ERRORS", "0x19 79 _x20", **gpu_labels("n1", "0", **held)),
                series("DCGM_FI_DEV_XID_ERRORS", "_x20 79x20", **gpu_labels("n1", "0")),
                series("DCGM_FI_DEV_XID_ERRORS", "0x40", **gpu_labels("n1", "1")),
                series("DCGM_FI_DEV_XID_ERRORS", "31x21 48x20", **gpu_labels("n1", "2")),
                series("DCGM_FI_DEV_XID_ERRORS", "79x40", **gpu_labels("n1", "3")),
            ],
            "GPUXidError",
            "25m",
            [
                alert(
                    {"severity": "critical", **gpu_labels("n1", "0")},
                    "GPU 0 on n1 reported an XID error",
                    "GPU 0 on n1 reported XID 79 in the last 10m; see "
                    "https://docs.nvidia.com/deploy/xid-errors/ and consider draining the node.",
                ),
                alert(
                    {"severity": "critical", **gpu_labels("n1", "2")},
                    "GPU 2 on n1 reported an XID error",
                    "GPU 2 on n1 reported XID 48 in the last 10m; see "
                    "https://docs.nvidia.com/deploy/xid-errors/ and consider draining the node.",
                ),
            ],
        ),
        # ...and it clears once the change is out of the 10m window, the gauge still at 79.
        case(
            [series("DCGM_FI_DEV_XID_ERRORS", "0x19 79x40", **gpu_labels("n1", "0"))],
            "GPUXidError",
            "35m",
            [],
        ),
        # An exporter restart resets the gauge to 0: no alert either.
        case(
            [series("DCGM_FI_DEV_XID_ERRORS", "79x20 0x20", **gpu_labels("n1", "0"))],
            "GPUXidError",
            "25m",
            [],
        ),
    ]
    run_unit_tests(promtool, tmp_path, path, cases)


def test_thresholds_and_durations_are_options(promtool, tmp_path, capsys):
    path = rules_file(
        tmp_path,
        capsys,
        "--high-util",
        "50",
        "--high-util-for",
        "0s",
        "--idle-util",
        "10",
        "--idle-window",
        "10m",
        "--idle-for",
        "5m",
        "--temperature",
        "75",
    )
    util = "DCGM_FI_DEV_GPU_UTIL"
    held = {"exported_pod": "nb", "exported_namespace": "team", **EXPORTER_POD}
    cases = [
        case(
            [series(util, "60x20", **gpu_labels("n1", "0"))],
            "GPUHighUtilization",
            "6m",
            [
                alert(
                    {"severity": "warning", "Hostname": "n1"},
                    "GPUs on n1 are saturated",
                    "The GPUs of n1 averaged 60% utilization over 5m, above 50% for 0s.",
                )
            ],
        ),
        case(
            [
                series(util, "8x30", **gpu_labels("n1", "0", **held)),
                series(util, "8x30", **gpu_labels("n1", "1", **EXPORTER_POD)),
            ],
            "GPUIdleAllocated",
            "20m",
            [
                alert(
                    {"severity": "warning", **gpu_labels("n1", "0", **held)},
                    "GPU 0 on n1 is held by a pod but idle",
                    "team/nb holds GPU 0 on n1 whose utilization averaged 8% over 10m "
                    "(threshold 10%).",
                )
            ],
        ),
        case([series(util, "8x30", **gpu_labels("n1", "0", **held))], "GPUIdleAllocated", "4m", []),
        case(
            [series("DCGM_FI_DEV_GPU_TEMP", "80x20", **gpu_labels("n1", "1"))],
            "GPUTemperatureHigh",
            "10m",
            [
                alert(
                    {"severity": "warning", **gpu_labels("n1", "1")},
                    "GPU 1 on n1 is hot",
                    "GPU 1 on n1 has been above 75 C for 5m (80 C now).",
                )
            ],
        ),
    ]
    run_unit_tests(promtool, tmp_path, path, cases)


def test_the_blog_rule_never_fires_on_a_saturated_gpu(promtool, tmp_path, capsys):
    """Why docs/alerts.md exists: rate() over the utilization gauge measures how fast the
    percentage changes, so a GPU pinned at 100 % for an hour reads as 0 — while ours fires."""
    (tmp_path / "blog.yml").write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "blog",
                        "rules": [
                            {
                                "alert": "HighGPUUsage",
                                "expr": "avg(rate(DCGM_FI_DEV_GPU_UTIL[1m])) by (instance) > 80",
                                "for": "5m",
                            }
                        ],
                    }
                ]
            }
        )
    )
    ours = rules_file(tmp_path, capsys)
    saturated = [
        series("DCGM_FI_DEV_GPU_UTIL", "100x60", instance="10.0.0.1:9400", **gpu_labels("n1", "0"))
    ]
    doc = {
        "rule_files": ["blog.yml", os.path.basename(ours)],
        "evaluation_interval": "1m",
        "tests": [
            case(saturated, "HighGPUUsage", "60m", []),
            case(
                saturated,
                "GPUHighUtilization",
                "60m",
                [
                    alert(
                        {"severity": "warning", "Hostname": "n1"},
                        "GPUs on n1 are saturated",
                        "The GPUs of n1 averaged 100% utilization over 5m, above 80% for 15m.",
                    )
                ],
            ),
        ],
    }
    (tmp_path / "blog-tests.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = promtool_run(promtool, "test", "rules", "blog-tests.yml", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--high-util", "150"], "--high-util: 150 is not a percentage"),
        (["--idle-util", "-1"], "--idle-util: -1 is not a percentage"),
        (["--temperature", "0"], "--temperature"),
        (["--idle-window", "30"], "--idle-window: '30' is not a Prometheus duration"),
        (["--high-util-for", "5 m"], "--high-util-for"),
        (["--xid-window", "0s"], "--xid-window: '0s' must be longer than zero"),
        # shorter than two rule evaluations, the change would never be seen
        (["--xid-window", "90s"], "--xid-window: '90s' is shorter than 2m"),
        (["--exporter-container", "a\x01b"], "--exporter-container"),
        (["--format", "prometheusrule", "--name", "Bad_Name"], "--name"),
        (["--format", "prometheusrule", "-n", "a.b"], "--namespace"),
        (
            ["-n", "a.b"],
            "--namespace",
        ),  # checked like every -n, though only a PrometheusRule has one
        (
            ["--format", "prometheusrule", "--label", "novalue"],
            "--label: 'novalue' is not KEY=VALUE",
        ),
        (["--format", "prometheusrule", "--label", "a=b c"], "--label"),
        # -l was --label's short form; in gpuctl -l is a label selector
        (["--format", "prometheusrule", "-l", "release=kps"], "use --label release=kps"),
    ],
)
def test_bad_options_exit_2_with_one_line(capsys, args, message):
    code, out, err = render(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.startswith("gpuctl: error: ") and message in err.splitlines()[0]
    assert "Traceback" not in err


def test_the_former_pod_label_option_is_ignored_with_a_warning(capsys):
    """--pod-label chose one setting for the whole cluster; the rules now handle both."""
    code, plain, _ = render(capsys)
    assert code == 0
    code, out, err = render(capsys, "--pod-label", "exported_pod")
    assert code == 0 and out == plain
    assert "--pod-label is ignored" in err


def test_label_without_prometheusrule_is_refused(capsys):
    from tests.clirun import run_gpuctl

    code, out, err = run_gpuctl(capsys, "alerts", "render", "--label", "release=prom")
    assert code == 2 and out == "" and "--label applies to --format prometheusrule" in err


# ---- who holds a GPU, under each scrape setting ----


def idle_alert(host, gpu, holder, labels, window="30m") -> dict:
    return alert(
        {"severity": "warning", **labels},
        f"GPU {gpu} on {host} is held by a pod but idle",
        f"{holder} holds GPU {gpu} on {host} whose utilization averaged 1% over {window} "
        "(threshold 5%).",
    )


def test_idle_allocated_finds_the_holder_under_both_honor_labels_settings(
    promtool, tmp_path, capsys
):
    """honorLabels false: the exporter pod takes pod/namespace/container and the holder's
    become exported_*; true: the holder's keep the plain names and a free GPU carries the
    exporter pod's. A shared GPU has a series per pod plus the device's own."""
    path = rules_file(tmp_path, capsys)
    util = "DCGM_FI_DEV_GPU_UTIL"
    exported = {"exported_pod": "train", "exported_namespace": "ml", "exported_container": "m"}
    holder_false = {**EXPORTER_POD, **exported}
    holder_true = {**EXPORTER_POD, "pod": "train", "namespace": "ml", "container": "m"}
    old = {**EXPORTER_POD, "pod_name": "old", "pod_namespace": "ml", "container_name": "m"}
    helm_pod = {
        "pod": "dcgm-exporter-1723456789-abcde",
        "namespace": "monitoring",
        "container": "exporter",
        "job": "dcgm-exporter-1723456789",
    }

    def share(host, pod, honor):
        names = ("pod", "namespace", "container") if honor else EXPORTED_NAMES
        return gpu_labels(host, "2", **{**EXPORTER_POD, **dict(zip(names, (pod, "nb", "c")))})

    inputs = [
        series(util, "1x80", **gpu_labels("f", "0", **holder_false)),
        series(util, "1x80", **gpu_labels("f", "1", **EXPORTER_POD)),  # free
        series(util, "1x80", **gpu_labels("t", "0", **holder_true)),
        series(util, "1x80", **gpu_labels("t", "1", **EXPORTER_POD)),  # free
        series(util, "1x80", **gpu_labels("o", "0", **old)),  # --use-old-namespace
        series(util, "1x80", **gpu_labels("h", "0", **helm_pod)),  # free, Helm chart
    ]
    for host, honor in (("f", False), ("t", True)):
        inputs += [
            series(util, "2x80", **gpu_labels(host, "2", **EXPORTER_POD)),  # the device's own
            series(util, "1x80", **share(host, "nb-a", honor)),
            series(util, "1x80", **share(host, "nb-b", honor)),
        ]
    expected = [
        idle_alert("f", "0", "ml/train", gpu_labels("f", "0", **holder_false)),
        idle_alert("t", "0", "ml/train", gpu_labels("t", "0", **holder_true)),
        idle_alert("o", "0", "ml/old", gpu_labels("o", "0", **old)),
    ] + [
        idle_alert(host, "2", f"nb/{pod}", share(host, pod, honor))
        for host, honor in (("f", False), ("t", True))
        for pod in ("nb-a", "nb-b")
    ]
    run_unit_tests(promtool, tmp_path, path, [case(inputs, "GPUIdleAllocated", "70m", expected)])


EXPORTED_NAMES = ("exported_pod", "exported_namespace", "exported_container")


@pytest.mark.parametrize(
    "options, exporter",
    [
        ([], holders.exporter()),
        # Names with regex characters: matched literally (`weird.name` is not `weirdXname`).
        (
            ["--exporter-container", "weird.name", "--exporter-job", "j|x"],
            holders.exporter(["weird.name"], ["j|x"]),
        ),
    ],
)
def test_the_rules_and_the_cluster_view_agree_on_every_label_combination(
    promtool, tmp_path, capsys, options, exporter
):
    """GPUIdleAllocated fires on exactly the series holders.holder (the cluster view's rule)
    names a holder for."""
    path = rules_file(tmp_path, capsys, *options, "--idle-window", "2m", "--idle-for", "0s")
    combos = itertools.product(
        ("", "ex-pod"),
        ("", "old-pod"),
        ("", "plain-pod"),
        ("", "nvidia-dcgm-exporter", "exporter", "main", "weird.name", "weirdXname"),
        ("", "nvidia-dcgm-exporter", "dcgm-exporter", "other", "j|x", "j"),
    )
    inputs, expected = [], []
    for i, (exported_pod, pod_name, pod, container, job) in enumerate(combos):
        labels = {
            "exported_pod": exported_pod,
            "exported_namespace": exported_pod and "ex-ns",
            "pod_name": pod_name,
            "pod_namespace": pod_name and "old-ns",
            "pod": pod,
            "namespace": pod and "plain-ns",
            "container": container,
            "job": job,
        }
        labels = gpu_labels("n1", str(i), **{k: v for k, v in labels.items() if v})
        inputs.append(series("DCGM_FI_DEV_GPU_UTIL", "1x3", **labels))
        holder = holders.holder(labels, exporter)
        if holder is not None:
            who = f"{holder.namespace}/{holder.pod}"
            expected.append(idle_alert("n1", str(i), who, labels, window="2m"))
    assert 0 < len(expected) < len(inputs)
    run_unit_tests(promtool, tmp_path, path, [case(inputs, "GPUIdleAllocated", "2m", expected)])


def test_memory_and_utilization_count_each_device_once(promtool, tmp_path, capsys):
    """Reserved memory is part of the total; a shared GPU's per-pod series (each pod's share
    of FB_USED and GPU_UTIL, and copies of the rest) neither split nor dilute it."""
    path = rules_file(tmp_path, capsys)
    used, free, reserved = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED"
    util = "DCGM_FI_DEV_GPU_UTIL"
    pod = lambda p: {"pod": p, "namespace": "nb", "container": "c"}  # noqa: E731
    inputs = [
        # n1/0: 98.75 % of used + free, 93.2 % of the total with reserved memory: quiet.
        series(used, "79000x30", **gpu_labels("n1", "0")),
        series(free, "1000x30", **gpu_labels("n1", "0")),
        series(reserved, "4559x30", **gpu_labels("n1", "0")),
        # n1/1: an exporter without FB_RESERVED: 98.75 %, fires.
        series(used, "79000x30", **gpu_labels("n1", "1")),
        series(free, "1000x30", **gpu_labels("n1", "1")),
        # n2/0 shared by two pods: 79000 MiB used in all (40000 + 39000), 1000 free.
        series(used, "79000x30", **gpu_labels("n2", "0")),
        series(used, "40000x30", **gpu_labels("n2", "0", **pod("a"))),
        series(used, "39000x30", **gpu_labels("n2", "0", **pod("b"))),
        series(free, "1000x30", **gpu_labels("n2", "0", **pod("a"))),
        series(free, "1000x30", **gpu_labels("n2", "0", **pod("b"))),
        series(reserved, "0x30", **gpu_labels("n2", "0", **pod("a"))),
        series(reserved, "0x30", **gpu_labels("n2", "0", **pod("b"))),
        # n3: one GPU at 90 % shared by two pods each busy 45 % of the time: saturated.
        series(util, "90x30", **gpu_labels("n3", "0")),
        series(util, "45x30", **gpu_labels("n3", "0", **pod("a"))),
        series(util, "45x30", **gpu_labels("n3", "0", **pod("b"))),
    ]
    memory_alert = lambda gpu_on_host, labels: alert(  # noqa: E731
        {"severity": "warning", **labels},
        f"{gpu_on_host} memory is nearly full",
        f"{gpu_on_host} has used 98.75% of its memory for 15m (threshold 95%).",
    )
    cases = [
        case(
            inputs,
            "GPUMemoryNearFull",
            "20m",
            [
                memory_alert("GPU 1 on n1", gpu_labels("n1", "1")),
                memory_alert("GPU 0 on n2", gpu_labels("n2", "0")),
            ],
        ),
        case(
            inputs,
            "GPUHighUtilization",
            "20m",
            [
                alert(
                    {"severity": "warning", "Hostname": "n3"},
                    "GPUs on n3 are saturated",
                    "The GPUs of n3 averaged 90% utilization over 5m, above 80% for 15m.",
                )
            ],
        ),
    ]
    run_unit_tests(promtool, tmp_path, path, cases)


def test_a_node_whose_gpus_report_only_a_duty_cycle_is_named(promtool, tmp_path, capsys):
    """GPUBusySignalDutyCycleOnly: n1 reports SM_ACTIVE (and the duty cycles), n2 GPU_UTIL
    only on its two GPUs, n3 two MIG slices of one GPU with GR_ENGINE_ACTIVE only: n2 and n3
    are named, with their physical GPUs (n3's split GPU counts once)."""
    path = rules_file(tmp_path, capsys)
    util, gr, sm = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE"
    inputs = [
        series(util, "100x80", **gpu_labels("n1", "0")),
        series(gr, "1x80", **gpu_labels("n1", "0")),
        series(sm, "0.02x80", **gpu_labels("n1", "0")),
        series(util, "50x80", **gpu_labels("n2", "0")),
        series(util, "50x80", **gpu_labels("n2", "1")),
        series(gr, "0.5x80", **gpu_labels("n3", "0", GPU_I_ID="1", GPU_I_PROFILE="1g.10gb")),
        series(gr, "0.2x80", **gpu_labels("n3", "0", GPU_I_ID="2", GPU_I_PROFILE="1g.10gb")),
    ]

    def named(host, n):
        return alert(
            {"severity": "info", "Hostname": host},
            f"GPUs on {host} report only a duty cycle",
            f"{n} GPU(s) of {host} report no DCGM_FI_PROF_SM_ACTIVE: their utilization is a "
            "duty cycle, 100% for a kernel on one SM. Enable the profiling fields in "
            "dcgm-exporter's counters file (gpuctl provision's GPU stack ships one).",
        )

    cases = [
        case(inputs, "GPUBusySignalDutyCycleOnly", "70m", [named("n2", 2), named("n3", 1)]),
        case(inputs, "GPUBusySignalDutyCycleOnly", "30m", []),  # not yet for an hour
    ]
    run_unit_tests(promtool, tmp_path, path, cases)


def test_rendered_promql_and_texts_stay_on_one_line(capsys):
    """A long expression or description is not folded over lines (PyYAML's default is to
    fold at 80 columns): each is found whole on its own line, as a reader copies it."""
    from tests.clirun import run_gpuctl

    code, out, err = run_gpuctl(capsys, "alerts", "render")
    assert code == 0, err
    lines = out.splitlines()
    rules = [r for g in yaml.safe_load(out)["groups"] for r in g["rules"]]
    for rule in rules:
        for text in (rule["expr"], *rule["annotations"].values()):
            if "\n" not in text:
                quoted = text.replace("'", "''")  # as a single-quoted YAML scalar
                assert any(text in line or quoted in line for line in lines), text


def default_series(labels: dict, busy: float, profiling="default", **values) -> list:
    """promtool input series of every field dcgm-exporter's default counters give a device
    (gpuctl.sim.dcgm_exporter.default_values), XID with its err_code/err_msg labels."""
    from gpuctl.sim.dcgm_exporter import default_values

    fields = default_values(busy, 1000, 80000, 559, mig="GPU_I_ID" in labels, profiling=profiling)
    fields.update(values)
    out = []
    for name, value in fields.items():
        extra = {"err_code": "0", "err_msg": "No Error"} if name == "DCGM_FI_DEV_XID_ERRORS" else {}
        out.append(series(name, f"{value:g}x80", **labels, **extra))
    return out


def test_the_rules_on_dcgm_exporters_default_counters(promtool, tmp_path, capsys):
    """Every device exports GPU_UTIL and GR_ENGINE_ACTIVE (and the rest of the default
    counters), scraped under the GPU Operator's ServiceMonitor (honorLabels false). n1: a
    busy GPU, and a time-sliced one whose engines are active half the time while its duty
    cycle reads 100 % (GR_ENGINE_ACTIVE copied on each pod's series, GPU_UTIL also the
    device's own total): n1 averages 70 %, not 95 %. n2: a MIG-split A100, both slices busy
    (their GPU_UTIL 0). n3: no profiling fields, a held GPU idle."""
    path = rules_file(tmp_path, capsys)
    util, gr = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

    def held(pod: str) -> dict:
        return {**EXPORTER_POD, "exported_pod": pod, "exported_namespace": "ml",
                "exported_container": "main"}  # fmt: skip

    shared = gpu_labels("n1", "1", **EXPORTER_POD)
    mig = lambda gi: {"GPU_I_ID": str(gi), "GPU_I_PROFILE": "3g.40gb"}  # noqa: E731
    inputs = default_series(gpu_labels("n1", "0", **held("train")), 90)
    inputs += [s for s in default_series(shared, 100) if s["series"].startswith(util)]
    for pod, share in (("a", 50), ("b", 50)):
        inputs += default_series(gpu_labels("n1", "1", **held(pod)), 50, **{util: share})
    inputs += default_series(gpu_labels("n2", "0", **held("infer-0"), **mig(1)), 95)
    inputs += default_series(gpu_labels("n2", "0", **held("infer-1"), **mig(2)), 90)
    inputs += default_series(gpu_labels("n3", "0", **held("notebook")), 1, profiling="off")
    assert {s["series"].split("{")[0] for s in inputs} >= {util, gr}
    high = alert(
        {"severity": "warning", "Hostname": "n2"},
        "GPUs on n2 are saturated",
        "The GPUs of n2 averaged 92.5% utilization over 5m, above 80% for 15m.",
    )
    idle = idle_alert("n3", "0", "ml/notebook", gpu_labels("n3", "0", **held("notebook")))
    cases = [
        case(inputs, "GPUHighUtilization", "30m", [high]),
        case(inputs, "GPUIdleAllocated", "70m", [idle]),
    ]
    run_unit_tests(promtool, tmp_path, path, cases, name="default-counters.yml")
