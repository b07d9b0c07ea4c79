"""The pure part of the cluster view: samples -> rows, idle detection, summaries."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuctl.common.errors import UsageError
from gpuctl.dcgm import holders, metrics
from gpuctl.dcgm.promql import duration_seconds
from gpuctl.top.cluster.core import usage


def sample(name, value, **labels):
    return ({"__name__": name, **labels}, value)


def dev(host="n1", gpu="0", **more):
    return {"Hostname": host, "gpu": gpu, "UUID": f"GPU-{host}-{gpu}", **more}


def frame(current, attributes=(), means=(), threshold=5.0):
    return usage.build_frame(current, attributes, means, threshold)


def test_queries_do_not_depend_on_the_cluster_and_check_the_window():
    q = usage.queries("15m")
    assert "[15m]" in q.window_util and "[15m]" not in q.current
    for expr in (q.current, q.attributes, q.window_util):
        assert "Hostname" in expr and "hostname" in expr
    assert usage.queries("15m") == q
    for bad in ("15", "m", "1.5h", "10m]", "", "0s", "-5m"):
        with pytest.raises(UsageError):
            usage.queries(bad)
    assert duration_seconds("1h30m", "--window") == 5400


def test_unknown_and_nan_values_are_missing_not_zero():
    d = dev()
    f = frame(
        [sample(metrics.FB_USED, 100.0, **d), sample(metrics.TEMP, math.nan, **d)],
        attributes=[(d, 1.0)],
    )
    row = f.rows[0]
    assert row.utilization_gpu is None and row.temperature_c is None
    assert row.memory_used_mib == 100 and row.memory_total_mib is None  # no FB_FREE
    assert row.idle is None  # no utilization in the window: unknown, not idle
    assert f.summary.idle_gpus == 0 and f.summary.mean_utilization is None
    assert f.summary.busiest is None


def test_a_mig_split_gpu_has_the_board_readings_and_its_devices_none():
    """dcgm-exporter repeats a GPU's temperature and power on each of its MIG devices'
    series (NVIDIA/dcgm-exporter#317): they belong to the GPU, shown once, not per device."""
    mig = [dev(GPU_I_ID=str(i), GPU_I_PROFILE="1g.10gb") for i in (7, 8)]
    current = []
    for i, m in enumerate(mig):
        current += [
            sample(metrics.GR_ACTIVE, 0.25 * (i + 1), **m),
            sample(metrics.TEMP, 50.0, **m),
            sample(metrics.POWER, 574.0, **m),
        ]
    attrs = [({**m, "modelName": "NVIDIA A100-SXM4-40GB"}, 1.0) for m in mig]
    f = frame(current, attrs, [(mig[0], 25.0), (mig[1], 2.0)])
    assert [
        (r.gpu, r.model, r.utilization_gpu, r.power_w, r.temperature_c, r.idle) for r in f.rows
    ] == [
        ("0/mig7", "NVIDIA A100-SXM4-40GB MIG 1g.10gb", 25.0, None, None, False),
        ("0/mig8", "NVIDIA A100-SXM4-40GB MIG 1g.10gb", 50.0, None, None, True),
    ]
    [gpu] = usage.mig_gpus(f.rows)
    assert (gpu.node, gpu.gpu, gpu.model, gpu.temperature_c, gpu.power_w, gpu.slices) == (
        "n1", "0", "NVIDIA A100-SXM4-40GB", 50.0, 574.0, 2
    )  # fmt: skip
    s = f.summary
    assert (s.gpus, s.mig_gpus, s.mig_slices, s.idle_gpus, s.idle_mig_slices) == (1, 1, 2, 0, 1)
    assert usage.frame_to_dict(f)["mig_gpus"] == [
        {"node": "n1", "gpu": "0", "uuid": "GPU-n1-0", "model": "NVIDIA A100-SXM4-40GB",
         "mig_slices": 2, "temperature_c": 50.0, "power_w": 574.0}
    ]  # fmt: skip


def test_mig_board_series_are_the_gpus_readings_and_make_no_row():
    board = dev()
    mig = [dev(GPU_I_ID=str(i), GPU_I_PROFILE="1g.10gb") for i in (7, 8)]
    current = [sample(metrics.POWER, 250.0, **board), sample(metrics.TEMP, 55.0, **board)]
    for i, m in enumerate(mig):
        current += [
            sample(metrics.GR_ACTIVE, 0.25 * (i + 1), **m),
            sample(metrics.TEMP, 50.0 + i, **m),
        ]
    f = frame(current, [(m, 1.0) for m in mig], [(mig[0], 25.0), (mig[1], 2.0)])
    assert [r.gpu for r in f.rows] == ["0/mig7", "0/mig8"]
    [gpu] = usage.mig_gpus(f.rows)
    assert (gpu.temperature_c, gpu.power_w, gpu.slices) == (55.0, 250.0, 2)


def test_the_table_shows_a_mig_split_gpu_once_with_its_board_readings():
    from gpuctl.top.cluster import views

    whole = dev("n1", "1")
    mig = [dev(GPU_I_ID=str(i), GPU_I_PROFILE="1g.10gb") for i in (7, 8)]
    current = [sample(metrics.UTIL, 40.0, **whole), sample(metrics.POWER, 300.0, **whole)]
    for m in mig:
        current += [sample(metrics.GR_ACTIVE, 0.5, **m), sample(metrics.POWER, 574.0, **m)]
    f = frame(current, [(m, 1.0) for m in [whole, *mig]], [(m, 50.0) for m in [whole, *mig]])
    text = views.render_plain(f, "10m", 5.0)
    assert text.startswith("Cluster 2 GPUs, 1 split into 2 MIG slices · ")
    assert text.count("574W") == 1 and "300W" in text  # the split GPU's power once
    lines = text.splitlines()
    gpu0 = next(i for i, ln in enumerate(lines) if "(MIG, 2 slices)" in ln)
    assert "0/mig7" in lines[gpu0 + 1] and "0/mig8" in lines[gpu0 + 2]


def test_the_best_busy_signal_wins_and_the_row_names_it():
    d = dev()
    f = frame([sample(metrics.UTIL, 70.0, **d), sample(metrics.GR_ACTIVE, 0.2, **d)])
    assert (f.rows[0].utilization_gpu, f.rows[0].signal) == (20.0, "gr_engine_active")
    f = frame([sample(metrics.UTIL, 70.0, **d), sample(metrics.SM_ACTIVE, 0.05, **d)])
    assert (f.rows[0].utilization_gpu, f.rows[0].signal) == (5.0, "sm_active")
    assert f.summary.signal == "sm_active"


def test_devices_without_uuid_are_told_apart_by_node_and_index():
    devs = [{"Hostname": h, "gpu": g} for h in ("a", "b") for g in ("0", "1")]
    f = frame(
        [sample(metrics.UTIL, 10.0 * i, **d) for i, d in enumerate(devs)],
        attributes=[(d, 1.0) for d in devs],
        means=[(d, 10.0 * i) for i, d in enumerate(devs)],
    )
    assert [(r.node, r.gpu, r.uuid, r.utilization_gpu, r.mean_utilization) for r in f.rows] == [
        ("a", "0", None, 0.0, 0.0),
        ("a", "1", None, 10.0, 10.0),
        ("b", "0", None, 20.0, 20.0),
        ("b", "1", None, 30.0, 30.0),
    ]


def test_node_name_falls_back_to_the_scrape_instance():
    d = {"gpu": "0", "UUID": "GPU-x"}
    f = frame(
        [sample(metrics.UTIL, 1.0, **d)], attributes=[({**d, "instance": "10.1.2.3:9400"}, 1.0)]
    )
    assert f.rows[0].node == "10.1.2.3:9400"


def test_the_fullest_attributes_win_deterministically():
    d = dev()
    attrs = [
        (d, 1.0),
        ({**d, "pod": "p", "namespace": "ns", "modelName": "M"}, 1.0),
        ({**d, "modelName": "M"}, 1.0),
    ]
    for order in (attrs, attrs[::-1]):
        row = frame([sample(metrics.UTIL, 1.0, **d)], order).rows[0]
        assert (row.pod, row.namespace, row.model) == ("p", "ns", "M")


def test_natural_order_and_summaries():
    current, attrs, means = [], [], []
    for host, util, pod in (("node-10", 80.0, "a"), ("node-2", 1.0, "b"), ("node-2", 3.0, None)):
        d = dev(host, str(len(current)))
        current.append(sample(metrics.UTIL, util, **d))
        attrs.append(({**d, **({"pod": pod, "namespace": "team"} if pod else {})}, 1.0))
        means.append((d, util))
    f = frame(current, attrs, means)
    assert [r.node for r in f.rows] == ["node-2", "node-2", "node-10"]
    s = f.summary
    assert (s.gpus, s.idle_gpus, s.idle_allocated_gpus) == (3, 2, 1)
    assert (s.busiest.node, s.idlest.node, s.idlest.mean_utilization) == ("node-10", "node-2", 2.0)
    assert [(n.namespace, n.gpus, n.idle_gpus, n.mean_utilization) for n in f.namespaces] == [
        ("team", 2, 1, pytest.approx(40.5))
    ]


def test_memory_total_includes_reserved_memory_when_reported():
    d, old = dev("n1", "0"), dev("n1", "1")
    current = [
        sample(metrics.FB_USED, 1000.0, **d),
        sample(metrics.FB_FREE, 80000.0, **d),
        sample(metrics.FB_RESERVED, 559.0, **d),
        sample(metrics.FB_USED, 1000.0, **old),  # an exporter before 4.3.1-4.4.0: no reserved
        sample(metrics.FB_FREE, 80000.0, **old),
    ]
    rows = frame(current).rows
    assert [(r.memory_used_mib, r.memory_total_mib) for r in rows] == [
        (1000, 81559),
        (1000, 81000),
    ]


def test_every_pod_sharing_a_gpu_is_a_holder():
    """Time-slicing / MPS: dcgm-exporter gives one series per pod, and the device's own for
    the per-process fields; the scrape (honorLabels: false) renames the pods' labels."""
    d = dev("n1", "0")
    exporter_pod = {
        "pod": "nvidia-dcgm-exporter-x",
        "namespace": "gpu-operator",
        "container": "nvidia-dcgm-exporter",
        "job": "nvidia-dcgm-exporter",
    }
    attrs = [({**d, **exporter_pod}, 1.0)] + [
        (
            {
                **d,
                **exporter_pod,
                "exported_pod": p,
                "exported_namespace": ns,
                "exported_container": "c",
            },
            1.0,
        )
        for ns, p in (("team-b", "z"), ("team-a", "y"), ("team-a", "x"))
    ]
    f = frame([sample(metrics.UTIL, 2.0, **d)], attrs, means=[(d, 2.0)])
    row = f.rows[0]
    assert [(h.namespace, h.pod) for h in row.holders] == [
        ("team-a", "x"),
        ("team-a", "y"),
        ("team-b", "z"),
    ]
    assert (row.namespace, row.pod) == ("team-a", "x")  # the first, for -o json's pod/namespace
    assert row.idle_allocated and f.summary.idle_allocated_gpus == 1
    # One GPU, counted once in each namespace whose pods hold it.
    assert [(n.namespace, n.gpus, n.idle_gpus) for n in f.namespaces] == [
        ("team-a", 1, 1),
        ("team-b", 1, 1),
    ]
    doc = usage.frame_to_dict(f)["gpus"][0]
    assert (doc["pod"], doc["namespace"]) == ("x", "team-a")
    assert doc["holders"] == [
        {"namespace": "team-a", "pod": "x", "container": "c"},
        {"namespace": "team-a", "pod": "y", "container": "c"},
        {"namespace": "team-b", "pod": "z", "container": "c"},
    ]


def test_a_gpu_with_only_the_exporters_pod_is_free():
    d = dev("n1", "0")
    exporter_pod = {"pod": "dcgm-exporter-abcde", "namespace": "mon", "container": "exporter"}
    f = frame([sample(metrics.UTIL, 0.0, **d)], [({**d, **exporter_pod}, 1.0)], means=[(d, 0.0)])
    assert f.rows[0].holders == () and f.rows[0].idle is True
    assert f.summary.idle_allocated_gpus == 0 and f.namespaces == []
    named = holders.exporter(["something-else"], [])
    f = usage.build_frame(
        [sample(metrics.UTIL, 0.0, **d)], [({**d, **exporter_pod}, 1.0)], [(d, 0.0)], 5.0, named
    )
    assert f.rows[0].pod == "dcgm-exporter-abcde"  # not recognised: taken as a holder


def test_threshold_is_strict():
    d = dev()
    assert frame([sample(metrics.UTIL, 5.0, **d)], means=[(d, 5.0)]).rows[0].idle is False
    assert frame([sample(metrics.UTIL, 4.9, **d)], means=[(d, 4.99)]).rows[0].idle is True


devices = st.lists(
    st.tuples(
        st.sampled_from(["n1", "n2", "node-3"]),
        st.integers(0, 7),
        st.one_of(st.none(), st.floats(0, 100)),
        st.one_of(st.none(), st.sampled_from(["p1", "p2"])),
        st.sampled_from(["", "1", "2"]),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(devices, st.floats(0, 100))
def test_summary_counts_are_consistent(devs, threshold):
    current, attrs, means = [], [], []
    for host, index, mean, pod, gi in devs:
        d = dev(host, str(index), **({"GPU_I_ID": gi} if gi else {}))
        current.append(sample(metrics.FB_USED, 1.0, **d))
        attrs.append(({**d, **({"pod": pod, "namespace": "ns"} if pod else {})}, 1.0))
        if mean is not None:
            means.append((d, mean))
    f = frame(current, attrs, means, threshold)
    s = f.summary
    whole = [r for r in f.rows if r.board is None]
    split = {(r.node, r.gpu.partition("/")[0]) for r in f.rows if r.board is not None}
    assert s.devices == len(f.rows) == len({r.node + r.gpu for r in f.rows})
    assert (s.gpus, s.mig_gpus, s.mig_slices) == (
        len(whole) + len(split), len(split), len(f.rows) - len(whole)
    )  # fmt: skip
    assert s.idle_allocated_gpus <= s.idle_gpus <= s.gpus - s.mig_gpus
    assert s.idle_allocated_mig_slices <= s.idle_mig_slices <= s.mig_slices
    assert s.idle_gpus + s.idle_mig_slices == sum(
        1 for r in f.rows if r.mean_utilization is not None and r.mean_utilization < threshold
    )
    assert sum(n.gpus + n.mig_slices for n in f.namespaces) == sum(1 for r in f.rows if r.pod)
    assert sum(n.idle_gpus for n in f.namespaces) == s.idle_allocated_gpus
    assert sum(n.idle_mig_slices for n in f.namespaces) == s.idle_allocated_mig_slices
    free_whole = sum(1 for r in whole if not r.pod)
    assert (s.stranded_gpus or 0) <= free_whole
    assert (s.request_shape is None) == (not any(r.pod for r in whole))
    if s.mean_utilization is not None:
        assert s.idlest.mean_utilization <= s.mean_utilization + 1e-9
        assert s.busiest.mean_utilization >= s.mean_utilization - 1e-9


def test_live_frame_is_cut_to_the_screen_and_says_so():
    from rich.console import Console

    from gpuctl.top.cluster import views

    devs = [dev(f"n{i}", "0") for i in range(40)]
    f = frame(
        [sample(metrics.UTIL, 50.0, **d) for d in devs],
        attributes=[(d, 1.0) for d in devs],
        means=[(d, 50.0) for d in devs],
    )
    console = Console(width=160, record=True, force_terminal=False)
    console.print(views.render(f, "10m", 5.0, max_rows=10, error="HTTP 503"))
    text = console.export_text()
    assert "stale: HTTP 503" in text
    assert "30 more GPUs or MIG slices not shown" in text
    assert sum(1 for ln in text.splitlines() if ln.startswith("n")) == 10


def test_label_values_cannot_drive_the_terminal():
    from gpuctl.top.cluster import views

    d = {**dev("evil\x1b[2Jnode", "0"), "pod": "p\x1b]0;pwned\x07", "namespace": "ns\n"}
    f = frame([sample(metrics.UTIL, 1.0, **d)], attributes=[(d, 1.0)], means=[(d, 1.0)])
    text = views.render_plain(f, "10m", 5.0)
    assert "\x1b" not in text and "\x07" not in text
    assert "evil?[2Jnode" in text and "ns?/p?]0;pwned?" in text


def held_frame(nodes):
    """nodes: {host: [pod or None per GPU, or ("mig", pod)]} -> a frame."""
    current, attrs = [], []
    for host, gpus in nodes.items():
        for i, holder in enumerate(gpus):
            mig = isinstance(holder, tuple)
            pod = holder[1] if mig else holder
            d = dev(host, str(i), **({"GPU_I_ID": "1", "GPU_I_PROFILE": "1g.10gb"} if mig else {}))
            current.append(sample(metrics.UTIL, 50.0, **d))
            attrs.append(({**d, **({"pod": pod, "namespace": "ns"} if pod else {})}, 1.0))
    return frame(current, attrs)


def test_stranded_gpus_are_free_ones_the_common_request_cannot_use():
    f = held_frame(
        {
            # pods of 2 GPUs are the most common; s1 keeps one GPU free: stranded
            "s1": ["p1", "p1", "p2", "p2", "p3", "p3", "p4", None],
            "s2": ["q1", "q1", None, None],  # two free: a 2-GPU pod fits
            "s3": [None] * 8,  # an empty node is not stranded
            "s4": [("mig", None), ("mig", "m1")],  # MIG devices: neither shape nor free GPU
        }
    )
    assert (f.summary.request_shape, f.summary.stranded_gpus) == (2, 1)
    doc = usage.frame_to_dict(f)["summary"]
    assert (doc["request_shape_gpus"], doc["stranded_gpus"]) == (2, 1)


def test_stranded_shape_ties_go_to_the_larger_request():
    f = held_frame({"a": ["x", "y", "big", "big", "big", "big"], "b": ["b4"] * 4 + [None] * 3})
    assert f.summary.request_shape == 4  # two 1-GPU pods, two 4-GPU pods (big, b4)
    assert f.summary.stranded_gpus == 3


def test_no_pod_holding_a_whole_gpu_means_no_shape():
    f = held_frame({"a": [None, None], "b": [("mig", "m")]})
    assert (f.summary.request_shape, f.summary.stranded_gpus) == (None, None)
