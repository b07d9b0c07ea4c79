"""make-room keeps a gang's topology domain: the waiting job's workers all in one block when
they must share one, and an evicted pod of a gang kept within a block back in that block.
Nodes labelled as EKS labels p4d/p5 nodes (topology.k8s.aws/network-node-layer-3, the block;
tests/data/topology/eks-p4de.yaml cites the source)."""

from __future__ import annotations

from gpuctl.reclaim.core import room
from tests.reclaim.test_room import node, owners_of, pod

BLOCK = "topology.k8s.aws/network-node-layer-3"


def _node(name, block):
    return node(name, labels={BLOCK: block})


def _kept(name, on, gpus, gang, owner="Job"):
    """A pod of GANG, which must keep within one block (required pod affinity to itself)."""
    labels = {"gang": gang, "jobset.sigs.k8s.io/jobset-name": gang}
    p = pod(name, on, gpus, owner=owner, labels=labels)
    term = {"labelSelector": {"matchLabels": {"gang": gang}}, "topologyKey": BLOCK}
    p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}  # fmt: skip
    return p


def test_a_job_within_a_block_gets_room_in_one_block():
    nodes = [_node("n1", "b1"), _node("n2", "b1"), _node("n3", "b2"), _node("n4", "b2")]
    pods = [pod("a", "n1", 8), pod("c", "n3", 8)]  # n2 and n4 free, in different blocks
    loose = room.plan(nodes, pods, [], owners_of(pods), room.Want(2, 8))
    assert loose.fits_now  # one worker on n2, one on n4
    result = room.plan(nodes, pods, [], owners_of(pods), room.Want(2, 8, within=(BLOCK,)))
    assert not result.fits_now and result.found and len(result.evicted) == 1
    blocks = {next(n for n in nodes if n["metadata"]["name"] == w)["metadata"]["labels"][BLOCK] for w in result.placement}  # fmt: skip
    assert len(blocks) == 1 and sum(result.placement.values()) == 2, result.placement


def test_an_evicted_pod_of_a_gang_kept_in_a_block_goes_back_only_into_that_block():
    nodes = [_node("n1", "b1"), _node("n2", "b1"), _node("n3", "b2")]
    stay = [pod("y", "n2", 4, owner=None), pod("x", "n3", 4, owner=None)]  # no controller

    def plan(gang_pods):
        pods = [*gang_pods, *stay]
        return room.plan(nodes, pods, [], owners_of(pods), room.Want(1, 8))

    # only the gang (4 GPUs on n1, 4 on n2) can go; back, one of its pods fits in b1 (n2)
    # and the other only on n3, another block: not a plan for a gang kept within a block
    kept = plan([_kept("g0", "n1", 4, "g"), _kept("g1", "n2", 4, "g")])
    assert not kept.found, kept.plan
    loose = plan([pod("g0", "n1", 4, owner="Job", labels={"jobset.sigs.k8s.io/jobset-name": "g"}),
                  pod("g1", "n2", 4, owner="Job", labels={"jobset.sigs.k8s.io/jobset-name": "g"})])  # fmt: skip
    assert loose.found and {loose.moves["ml/g0"], loose.moves["ml/g1"]} == {"n2", "n3"}


def test_the_waiting_jobs_domain_is_read_from_its_pending_pods():
    pending = [_kept(f"w{i}", None, 8, "w", owner="Job") for i in range(2)]
    for p in pending:
        p["metadata"]["labels"]["job-name"] = "train"
        del p["spec"]["nodeName"]
    want = room.want_of_pods("train", pending)
    assert want is not None and want.within == (BLOCK,) and want.workers == 2
    assert want.what == f"train: 2×8 nvidia.com/gpu within one {BLOCK} domain"
