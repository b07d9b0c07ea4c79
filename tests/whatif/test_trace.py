"""The openb CSV format: what is read, and every bad input named by file, line and field."""

import pytest

from gpuctl.common.errors import SpecError
from gpuctl.whatif.core.trace import Node, Pod, parse_nodes, parse_pods
from tests.whatif import openb

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"


def test_nodes_and_pods_are_read_with_extra_columns_and_blank_lines():
    nodes = parse_nodes(
        "\ufeff" + NODE_HEADER + "n1,96000,393216,8,G2\n\nn2, 32000 ,131072,0,\n", "n.csv"
    )
    assert nodes == [Node("n1", 96000, 393216, 8, "G2"), Node("n2", 32000, 131072, 0, "")]
    pods = parse_pods(
        POD_HEADER
        + "p1,12000,16384,1,460,,LS\n"
        + 'p2,4000,8192,8,1000,"V100M16|V100M32",BE\n'
        + "p3,88000,327680,0,0,,BE\n",
        "p.csv",
    )
    assert pods == [
        Pod("p1", 12000, 16384, 1, 460),
        Pod("p2", 4000, 8192, 8, 1000, ("V100M16", "V100M32")),
        Pod("p3", 88000, 327680, 0, 0),
    ]
    assert [p.gpu_request for p in pods] == [460, 8000, 0]


def test_columns_in_any_order_and_gpu_spec_optional():
    pods = parse_pods("gpu_milli,num_gpu,name,memory_mib,cpu_milli\n500,1,a,10,20\n", "p.csv")
    assert pods == [Pod("a", 20, 10, 1, 500)]


def test_the_openb_trace_reads_as_its_source_describes():
    nodes, pods = openb.load()
    # figures from SOURCE.md
    assert (len(nodes), sum(n.gpus for n in nodes)) == (1213, 6212)
    assert len(pods) == 8152
    assert sum(1 for p in pods if p.gpus == 1 and p.gpu_milli < 1000) == 3078
    assert sum(1 for p in pods if p.gpus == 1 and p.gpu_milli == 1000) == 3911
    assert sum(1 for p in pods if p.gpus > 1) == 75
    assert sum(1 for p in pods if p.gpus == 0) == 1088


@pytest.mark.parametrize(
    "text, where",
    [
        ("", "n.csv: empty"),
        ("sn,cpu_milli,memory_mib,gpu\n", "n.csv:1: model: missing column"),
        (NODE_HEADER, "n.csv: no nodes"),
        (NODE_HEADER + "a,1,2,3\n", "n.csv:2: 4 fields where the header has 5"),
        (NODE_HEADER + "a,1,2,x,G2\n", "n.csv:2: gpu: 'x' is not a whole number from 0 to 64"),
        (NODE_HEADER + "a,1,2,-1,G2\n", "n.csv:2: gpu: '-1' is not a whole number"),
        (NODE_HEADER + "a,1,2,65,G2\n", "n.csv:2: gpu: '65' is not a whole number from 0 to 64"),
        (NODE_HEADER + "a,1.5,2,1,G2\n", "n.csv:2: cpu_milli: '1.5' is not a whole number"),
        (NODE_HEADER + "a,1,2,1,G\n\na,1,2,1,G\n", "n.csv:4: sn: node 'a' is listed twice"),
        (NODE_HEADER + ",1,2,1,G\n", "n.csv:2: sn: empty node name"),
        ("sn,sn,cpu_milli,memory_mib,gpu,model\n", "n.csv:1: sn: column named twice"),
        (NODE_HEADER + 'a,"1,2,1,G\n', "n.csv:2: not CSV"),
    ],
)
def test_bad_nodes_name_file_line_and_field(text, where):
    with pytest.raises(SpecError) as e:
        parse_nodes(text, "n.csv")
    assert str(e.value).startswith(where)


@pytest.mark.parametrize(
    "row, where",
    [
        ("p,1,2,0,500", "p.csv:2: gpu_milli: 500 with num_gpu 0"),
        ("p,1,2,1,0", "p.csv:2: gpu_milli: 0: a pod with GPUs needs a share"),
        ("p,1,2,1,1001", "p.csv:2: gpu_milli: '1001' is not a whole number from 0 to 1000"),
        ("p,1,2,2,500", "p.csv:2: gpu_milli: 500 with num_gpu 2: a pod with several GPUs"),
        ("p,1,99999999999999,1,5", "p.csv:2: memory_mib: '99999999999999' is not a whole"),
        ("p,1,2,٣,500", "p.csv:2: num_gpu: '٣' is not a whole number"),
    ],
)
def test_bad_pods_name_file_line_and_field(row, where):
    with pytest.raises(SpecError) as e:
        parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + row + "\n", "p.csv")
    assert str(e.value).startswith(where)


def test_a_trace_longer_than_the_row_limit_is_refused_while_it_is_read():
    from gpuctl.whatif.core import trace

    def lines():
        yield "sn,cpu_milli,memory_mib,gpu,model\n"
        for i in range(trace.MAX_NODES + 10**9):  # never all read: refused at the limit
            yield f"n{i},1000,10,8,H100\n"

    with pytest.raises(SpecError, match=f"more than {trace.MAX_NODES:,} rows"):
        trace.parse_nodes(lines(), "n.csv")
