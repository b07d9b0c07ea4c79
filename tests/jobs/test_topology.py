"""A spec's `topology`: what it accepts, the exact error for what it refuses, and how each
engine keeps the pods within one domain (Kueue TAS, JobSet, pod affinity)."""

import dataclasses

import pytest

from gpuctl.gpus.topology import Constraint
from gpuctl.jobs.core import topology
from gpuctl.jobs.core.manifests import render
from tests.crd_schema import assert_valid_cr
from tests.jobs.test_spec import error_of, parse
from tests.k8s_schema import assert_valid

GANG = "apiVersion: gpuctl/v1\nname: train\nimage: nvcr.io/nvidia/pytorch:24.05-py3\ngpus: 8\n"


def test_topology_is_read_with_required_by_default():
    spec = parse(GANG + "nodes: 2\ntopology: {within: block}\n")
    assert spec.topology == Constraint("block", True)
    spec = parse(GANG + "nodes: 2\ntopology:\n  within: example.com/rack\n  required: false\n")
    assert spec.topology == Constraint("example.com/rack", False)
    assert parse(GANG + "nodes: 2\n").topology is None


def test_a_service_of_several_replicas_may_ask_for_topology():
    spec = parse(GANG + "kind: Service\nport: 8000\nreplicas: 2\ntopology: {within: nvlink}\n")
    assert spec.topology == Constraint("nvlink", True)


@pytest.mark.parametrize(
    "extra, line, field, needle",
    [
        ("nodes: 2\ntopology: {within: Block!}\n", 6, "topology.within", "a topology name (host"),
        ("nodes: 2\ntopology: {}\n", 6, "topology", "missing required field 'within'"),
        ("nodes: 2\ntopology: block\n", 6, "topology", "expected a mapping"),
        ("nodes: 2\ntopology: {within: block, requird: false}\n", 6, "topology.requird",
         "did you mean 'required'"),
        ("nodes: 2\ntopology: {within: block, required: maybe}\n", 6, "topology.required", ""),
        ("topology: {within: block}\n", 5, "topology", "this job has one worker (nodes: 1)"),
        ("kind: Service\nport: 8000\ntopology: {within: block}\n", 7, "topology",
         "this service has one replica"),
        ("accelerator: tpu-v5e\ntpu_topology: 2x4\ntpu_slices: 2\ntopology: {within: zone}\n",
         8, "topology", "a multislice TPU job already keeps each slice"),
    ],
)  # fmt: skip
def test_bad_topology_names_file_line_and_field(extra, line, field, needle):
    e = error_of(GANG + extra)
    assert (e.file, e.line, e.field) == ("job.yaml", line, field)
    assert needle in str(e)


@pytest.mark.parametrize(
    "extra, engine",
    [
        ("nodes: 2\nmultinode: indexed-job\n", topology.AFFINITY),
        ("nodes: 2\nmultinode: jobset\n", topology.JOBSET),
        ("nodes: 2\nmultinode: jobset\nqueue: team-a\n", topology.KUEUE),
        ("kind: Service\nport: 8000\nreplicas: 3\n", topology.AFFINITY),
    ],
)
@pytest.mark.parametrize("required", [True, False])
def test_what_render_writes_reads_back_as_the_same_topology(extra, engine, required):
    """jobs why finds the topology in the created object, whichever engine wrote it."""
    key = "topology.k8s.aws/network-node-layer-3"
    spec = parse(GANG + extra + f"topology: {{within: block, required: {str(required).lower()}}}\n")
    if engine == topology.JOBSET and not required:
        engine = topology.AFFINITY  # JobSet's exclusive placement is required only
    kept = dataclasses.replace(spec.topology, key=key, engine=engine)
    objects = render(dataclasses.replace(spec, topology=kept))
    back = topology.of_job(objects[-1] if spec.serving is None else objects[0])
    assert (back.key, back.required) == (key, required)
    for obj in objects:
        if obj["apiVersion"].startswith(("v1", "apps/", "batch/")):
            assert_valid(obj)
        else:
            assert_valid_cr(obj)


def test_a_job_without_topology_reads_back_none():
    (job,) = render(parse(GANG))
    assert topology.of_job(job) is None


def test_render_without_a_cluster_says_what_it_assumed(cli, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(GANG + "nodes: 2\ntopology: {within: spine}\n")
    r = cli("render", str(path))
    assert r.code == 0, r
    assert (
        "train: no cluster was read: topology spine assumed to be "
        "topology.k8s.aws/network-node-layer-2 (gpuctl submit reads the nodes' labels); pods "
        "kept within one topology.k8s.aws/network-node-layer-2 domain (spine) by pod affinity "
        "(required)"
    ) in " ".join(r.err.split())
    r = cli("render", str(path), "--explain")
    assert "topology" in r.out and "within: spine" in r.out


def test_the_multinode_starter_shows_topology_and_renders_with_it(cli, tmp_path):
    r = cli("init", "multinode")
    assert "# topology: {within: block}" in r.out
    path = tmp_path / "job.yaml"
    path.write_text(r.out.replace("# topology: {within: block}", "topology: {within: block}"))
    r = cli("render", str(path), "--multinode", "jobset")
    assert r.code == 0, r
    assert (
        "alpha.jobset.sigs.k8s.io/exclusive-topology: topology.k8s.aws/network-node-layer-3"
        in r.out
    )


def test_a_pin_is_anded_into_every_node_affinity_term_and_picks_the_tightest_domain():
    from gpuctl.k8s.fit import DomainFit

    key = "topology.k8s.aws/network-node-layer-3"
    spec = parse(GANG + "gpu_type: [h100, h200]\nnodes: 2\nmultinode: indexed-job\ntopology: {within: block}\n")  # fmt: skip
    kept = dataclasses.replace(spec.topology, key=key, engine=topology.AFFINITY)
    roomy = [DomainFit("nn-big", ("a", "b", "c"), 24, 3, 3), DomainFit("nn-two", ("d", "e"), 16, 2, 2)]  # fmt: skip
    assert topology.pin_to(kept, roomy, 2) == "nn-two"  # leaves the big block for a big gang
    assert topology.pin_to(kept, roomy, 4) is None
    assert topology.pin_to(dataclasses.replace(kept, engine=topology.KUEUE), roomy, 2) is None
    pinned = dataclasses.replace(kept, pinned="nn-two")
    job = render(dataclasses.replace(spec, topology=pinned), "gpu-type")[-1]
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms and all(
        t["matchExpressions"][-1] == {"key": key, "operator": "In", "values": ["nn-two"]}
        and len(t["matchExpressions"]) > 1  # the GPU type's own expression kept
        for t in terms
    )
    assert_valid(job)
