"""The pure part of the live cluster view: the figures query, reading its answer, and which
nodes and rows a screen shows (tests/top/test_live.py checks it against a real Prometheus)."""

import pytest

from gpuctl.common.errors import UsageError
from gpuctl.dcgm import holders
from gpuctl.dcgm.holders import Exporter, Holder
from gpuctl.top.cluster.core import live, usage


def test_the_figures_query_ranks_only_for_a_sort_by_value():
    by_node = live.figures_query("10m", 5.0, Exporter(), "index", 31)
    assert "topk" not in by_node and "bottomk" not in by_node
    assert "topk(31, " in live.figures_query("10m", 5.0, Exporter(), "power", 31)
    assert "bottomk(31, " in live.figures_query("10m", 5.0, Exporter(), "idle", 31)
    for sort in live.SORT_KEYS:
        query = live.figures_query("30m", 2.5, Exporter(), sort, 10)
        assert "[30m]" in query and "< bool 2.5" in query
        assert "label_replace(" in query and "UUID!=" not in query  # no per-GPU postings merge


def test_the_figures_query_applies_the_holder_rule_and_checks_its_options():
    query = live.figures_query("10m", 5.0, holders.exporter(["my-dcgm"], ["my-job"]), "index")
    for matchers, _ in holders.held_branches(holders.exporter(["my-dcgm"], ["my-job"])):
        assert matchers in query
    with pytest.raises(UsageError, match="--sort: unknown key 'name'"):
        live.figures_query("10m", 5.0, Exporter(), "name")
    with pytest.raises(UsageError, match="--window"):
        live.figures_query("10", 5.0, Exporter())


def fig(figure: str, value: float, **labels) -> usage.Sample:
    return ({"figure": figure, **labels}, value)


def test_reading_the_figures():
    answer = [
        # node-2 (Hostname): 3 whole GPUs, 1 idle, and one GPU split into 2 MIG devices, 1
        # idle: 4 physical GPUs, means summing to 171; node-10 (hostname): 1 busy
        fig("node_idle", 2, Hostname="node-2", idle="0"),
        fig("node_idle", 1, Hostname="node-2", idle="1"),
        fig("node_idle", 1, Hostname="node-2", idle="0", kind="mig"),
        fig("node_idle", 1, Hostname="node-2", idle="1", kind="mig"),
        fig("node_sum", 171.0, Hostname="node-2"),
        fig("node_gpus", 4, Hostname="node-2"),
        fig("node_idle", 1, hostname="node-10", idle="0"),
        fig("node_sum", 90.0, hostname="node-10"),
        fig("node_gpus", 1, hostname="node-10"),
        fig("node_idle", 1, instance="10.0.0.1:9400", idle="1"),  # no host label at all
        fig("node_sum", 0.0, instance="10.0.0.1:9400"),
        fig("node_gpus", 1, instance="10.0.0.1:9400"),
        fig("idle_held", 1),
        fig("idle_held", 1, kind="mig"),
        # the namespace in whichever label its holder branch names it
        fig("ns_idle", 2, exported_namespace="ml", idle="0"),
        fig("ns_idle", 1, exported_namespace="ml", idle="1", kind="mig"),
        fig("ns_sum", 151.0, exported_namespace="ml"),
        fig("ns_idle", 1, pod_namespace="research", idle="1"),
        fig("ns_sum", 1.0, pod_namespace="research"),
        fig("ns_idle", 1, idle="0"),  # a holder without a namespace
        fig("ns_sum", 60.0),
        fig("shapes", 3, n="1"),
        fig("shapes", 3, n="2"),  # a tie: the larger shape
        fig("free", 2, n="1"),  # two nodes with one free GPU: stranded for a shape of 2
        fig("free", 1, n="4"),
        fig("page", 97.0, Hostname="node-2", UUID="a"),
        fig("page", 96.0, hostname="node-10", UUID="b"),
        fig("page", 95.0, Hostname="node-2", UUID="c"),
        fig("signals", 3, signal="sm_active"),
        fig("signals", 2, signal="gpu_util"),
    ]
    found = live.read_figures(answer)
    s = found.summary
    assert s.signal == "sm_active 3, gpu_util 2"
    assert (s.gpus, s.idle_gpus, s.idle_allocated_gpus) == (6, 2, 1)
    assert (s.mig_gpus, s.mig_slices, s.idle_mig_slices, s.idle_allocated_mig_slices) == (
        1, 2, 1, 1
    )  # fmt: skip
    assert s.mean_utilization == pytest.approx(261 / 7)  # over the 5 GPUs and 2 MIG devices
    assert (s.busiest.node, s.busiest.mean_utilization) == ("node-10", 90.0)
    assert (s.idlest.node, s.idlest.mean_utilization) == ("10.0.0.1:9400", 0.0)
    assert (s.request_shape, s.stranded_gpus) == (2, 2)
    assert [
        (n.namespace, n.gpus, n.mig_slices, n.mean_utilization, n.idle_gpus, n.idle_mig_slices)
        for n in found.namespaces
    ] == [
        ("ml", 2, 1, pytest.approx(151 / 3), 0, 1),
        ("-", 1, 0, 60.0, 0, 0),
        ("research", 1, 0, 1.0, 1, 0),
    ]
    assert found.node_gpus == {"node-2": 5, "node-10": 1, "10.0.0.1:9400": 1}  # rows
    assert found.page == ["node-2", "node-10"]
    assert live.page_nodes(found, "util", 3) == ["node-2", "node-10"]


def test_an_empty_answer_is_an_empty_cluster():
    found = live.read_figures([])
    assert found.summary.gpus == 0 and found.summary.mean_utilization is None
    assert found.summary.busiest is None and found.summary.request_shape is None
    assert found.namespaces == [] and live.page_nodes(found, "index", 30) == []


def test_by_node_the_screen_takes_nodes_in_natural_order_until_full():
    found = live.read_figures(
        [fig("node_idle", n, Hostname=f"node-{i}", idle="0") for i, n in ((10, 8), (2, 8), (1, 4))]
    )
    assert live.page_nodes(found, "index", 4) == ["node-1"]
    assert live.page_nodes(found, "index", 5) == ["node-1", "node-2"]
    assert live.page_nodes(found, "index", 30) == ["node-1", "node-2", "node-10"]


def row(node, gpu, util=None, mean=None, temp=None) -> usage.ClusterGpuRow:
    return usage.ClusterGpuRow(
        node,
        gpu,
        None,
        None,
        None,
        util,
        mean,
        None,
        None,
        temp,
        None,
        (Holder(None, "p", None),),
        None,
    )


def test_rows_in_the_order_of_a_sort():
    rows = [
        row("n-1", "0", 50, 1),
        row("n-1", "1", None, 30),
        row("n-10", "0", 90, 1),
        row("n-2", "0", 50, None),
    ]
    assert [(r.node, r.gpu) for r in live.page_rows(rows, "util", 3)] == [
        ("n-10", "0"),
        ("n-1", "0"),  # 50 %, before n-2's 50 % in node order
        ("n-2", "0"),
    ]
    assert [(r.node, r.gpu) for r in live.page_rows(rows, "idle", 4)] == [
        ("n-1", "0"),
        ("n-10", "0"),
        ("n-1", "1"),
        ("n-2", "0"),  # no mean: last
    ]
    assert live.page_rows(rows, "index", 2) == rows[:2]
    assert live.page_rows(rows, "temp", 2) == rows[:2]  # no reading anywhere: node order


def test_nodes_on_screen_are_matched_exactly_whatever_their_names():
    matchers = usage.on_nodes(["node.1", 'we"ird\\', "tab\there", "node.1"])
    names = '"node\\\\.1|tab\\\\x{9}here|we\\"ird\\\\\\\\"'
    assert matchers == (
        f"Hostname=~{names}",
        f'Hostname="", hostname=~{names}',
        f'Hostname="", hostname="", instance=~{names}',
    )
