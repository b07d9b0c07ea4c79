"""Gangs replayed on the synthetic network layout: each placed gang's workers within one
domain of its level, a gang no domain holds refused (never, stranded by the topology, or no
room at all), the free GPUs per block and spine; `gpuctl whatif --gang-csv` as a user runs
it."""

import json
from collections import Counter

import pytest

from gpuctl.common.errors import SpecError, UsageError
from gpuctl.whatif.core.gangs import Gang, Layout, parse_gangs, replay_gangs
from gpuctl.whatif.core.trace import Node


def eights(n: int) -> list[Node]:
    return [Node(f"n{i:02d}", 96000, 786432, 8, "A100") for i in range(n)]


def test_the_layout_fills_blocks_then_spines_in_order_skipping_nodes_without_gpus():
    nodes = [*eights(5), Node("cpu", 1, 1, 0, "")]
    where = Layout(2, 2).domains(nodes)
    assert "cpu" not in where
    assert [where[n.name]["block"] for n in nodes[:5]] == ["block-0", "block-0", "block-1", "block-1", "block-2"]  # fmt: skip
    assert [where[n.name]["spine"] for n in nodes[:5]] == ["spine-0"] * 4 + ["spine-1"]


def test_a_pair_kept_in_a_block_is_refused_where_only_two_blocks_have_one_node_each():
    # two blocks of 3 nodes: pairs take 2 of one block, 2 of the other; the third pair finds
    # one free node in each block: refused within a block, placed anywhere
    nodes, layout = eights(6), Layout(3, 1)
    within = replay_gangs(nodes, [Gang("pair", 2, 8, "block")], layout, 1, 1000)
    assert (within.arrived, len(within.placed), within.refused_for_domain) == (3, 2, 1)
    where = layout.domains(nodes)
    for workers in within.placed.values():
        assert len({where[n]["block"] for n in workers}) == 1, workers
    free = {d.name: d.free for d in within.domains if d.level == "block"}
    assert free == {"block-0": 8, "block-1": 8}
    anywhere = replay_gangs(nodes, [Gang("pair", 2, 8, None)], layout, 1, 1000)
    assert (len(anywhere.placed), anywhere.refused_for_domain, anywhere.allocated) == (3, 0, 48)


def test_a_gang_larger_than_any_block_never_fits_and_fits_a_spine():
    nodes, layout = eights(8), Layout(2, 2)
    block = replay_gangs(nodes, [Gang("trio", 3, 8, "block")], layout, 7, 1000)
    assert (len(block.placed), block.refused_never, block.refused_for_domain) == (0, block.arrived, 0)  # fmt: skip
    spine = replay_gangs(nodes, [Gang("trio", 3, 8, "spine")], layout, 7, 1000)
    assert len(spine.placed) == 2 and spine.refused_never == 0
    where = layout.domains(nodes)
    for workers in spine.placed.values():
        assert len({where[n]["spine"] for n in workers}) == 1, workers


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_placed_gang_is_within_one_domain_and_no_node_is_overcommitted(seed):
    nodes = [*eights(12), *(Node(f"t{i}", 1, 1, 4, "T4") for i in range(6))]
    layout = Layout(4, 2)
    gangs = [
        Gang("big", 4, 8, "spine"),
        Gang("pair", 2, 4, "block"),
        Gang("one", 1, 2, None),
        Gang("quad", 3, 4, "block"),
    ]
    run = replay_gangs(nodes, gangs, layout, seed, 1300)
    where = layout.domains(nodes)
    size = {n.name: n.gpus for n in nodes}
    used: Counter[str] = Counter()
    kinds = {g.name: g for g in gangs}
    for name, workers in run.placed.items():
        gang = kinds[name.split("#")[0]]
        assert len(workers) == gang.workers
        if gang.within:
            assert len({where[n][gang.within] for n in workers}) == 1, (name, workers)
        for n in workers:
            used[n] += gang.gpus
    assert all(used[n] <= size[n] for n in used)
    cluster = [d for d in run.domains if d.level == "cluster"]
    assert [d.free for d in cluster] == [sum(size.values()) - sum(used.values())]
    for level in ("block", "spine"):
        assert sum(d.free for d in run.domains if d.level == level) == cluster[0].free
    assert run.refused_never + run.refused_for_domain + run.refused_for_room + len(run.placed) == run.arrived  # fmt: skip


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("name,workers,num_gpu,within\na,2,8,rack\n", "within", 2),
        ("name,workers,num_gpu,within\na,2,8,\nb,0,8,block\n", "workers", 3),
        ("name,workers,num_gpu,within\na,2,0,block\n", "num_gpu", 2),
        ("name,workers,num_gpu\na,2,8\n", "within", 1),
    ],
)
def test_a_bad_gang_row_names_its_line_and_field(text, field, line):
    with pytest.raises(SpecError) as e:
        parse_gangs(text, "gangs.csv")
    assert (e.value.field, e.value.line) == (field, line)


def test_a_layout_of_zero_is_refused():
    with pytest.raises(UsageError, match="0 nodes per block"):
        Layout(0, 2)


NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},96000,786432,8,A100\n" for i in range(6))  # fmt: skip
GANGS = "name,workers,num_gpu,within\npair,2,8,block\n"


@pytest.fixture
def files(tmp_path):
    nodes, gangs = tmp_path / "nodes.csv", tmp_path / "gangs.csv"
    nodes.write_text(NODES)
    gangs.write_text(GANGS)
    return str(nodes), str(gangs)


def test_whatif_gangs_reports_per_domain(cli, files):
    nodes, gangs = files
    r = cli("whatif", "--node-csv", nodes, "--gang-csv", gangs, "--layout", "3,1", "--demand", "1", "-o", "json")  # fmt: skip
    assert r.code == 0, r
    assert "6 nodes, 48 GPUs; synthetic layout: 3 nodes a block, 1 blocks a spine" in r.err
    (run,) = json.loads(r.out)["runs"][:1]
    assert (run["gangs_placed"], run["refused_for_domain"]) == (2, 1)
    blocks = {d["domain"]: d["free"] for d in run["domains"] if d["level"] == "block"}
    assert blocks == {"block-0": 8, "block-1": 8}
    table = cli("whatif", "--node-csv", nodes, "--gang-csv", gangs, "--layout", "3,1", "--demand", "1")  # fmt: skip
    assert table.code == 0 and "Free GPUs per domain" in table.out and "NO DOMAIN" in table.out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--layout", "3"), "--layout '3': two whole numbers"),
        (("--pod-csv", "x.csv"), "--gang-csv replays onto --node-csv"),
    ],
)
def test_whatif_gangs_usage_errors(cli, files, extra, message):
    nodes, gangs = files
    r = cli("whatif", "--node-csv", nodes, "--gang-csv", gangs, *extra)
    assert r.code == 2 and message in r.err, r
