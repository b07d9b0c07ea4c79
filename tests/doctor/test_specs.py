"""`gpuctl doctor --spec`: a job spec's GPU request against the cluster's nodes, placed as
submit places it, on the real node corpus (tests/data/nodes) in the API emulator."""

import json

from gpuctl.doctor.core import checks as doctor
from gpuctl.doctor.core import spec_checks
from gpuctl.k8s.placement import AUTO, GpuRequest
from tests.doctor.test_doctor import DCGM, PLUGIN
from tests.gpu_cluster import seed
from tests.node_corpus import corpus

NODES = corpus()


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(f"apiVersion: gpuctl/v1\nname: {p.stem}\nimage: x\n{text}")
    return str(p)


def spec_checks_of(data):
    return [c for c in data["checks"] if c["name"] == spec_checks.NAME]


def test_h100_spec_fails_on_a_cluster_without_h100_naming_file_and_offer(cli, kube_api, tmp_path):
    seed(kube_api, NODES["gfd-a100-80gb"], NODES["gfd-l4"], NODES["karpenter-p4d"], PLUGIN, DCGM)
    job = write(tmp_path, "job.yaml", "gpus: 1\ngpu_type: h100\n")
    r = cli("doctor", "--spec", job, "-o", "json")
    assert r.code == 1, r
    data = json.loads(r.out)
    assert data["ok"] is False
    [check] = spec_checks_of(data)
    assert check["status"] == "fail"
    detail = check["detail"]
    assert detail.startswith(f"{job}: gpu_type h100 selects no node with nvidia.com/gpu")
    assert "the GPU nodes have A100-40GB (1 node), A100-80GB (1 node), L4 (1 node)" in detail
    # the table says it too, and exits 1 as doctor's other failures do
    r = cli("doctor", "--spec", job)
    assert r.code == 1 and "selects no node" in r.out and "job.yaml" in r.out


def test_h100_spec_passes_where_h100_nodes_are_gfd_or_gpuctl_labelled(cli, kube_api, tmp_path):
    seed(kube_api, NODES["gfd-h100"], NODES["gpuctl-h100"], NODES["gfd-l4"], PLUGIN, DCGM)
    job = write(tmp_path, "job.yaml", "gpus: 8\ngpu_type: h100\n")
    r = cli("doctor", "--spec", job, "-o", "json")
    assert r.code == 0, r
    [check] = spec_checks_of(json.loads(r.out))
    assert check["status"] == "pass"
    h100 = sorted(NODES[s]["metadata"]["name"] for s in ("gfd-h100", "gpuctl-h100"))
    assert check["detail"] == f"{job}: gpu_type h100 selects 2 node(s): {', '.join(h100)}"


def test_a_directory_of_specs_is_each_checked(cli, kube_api, tmp_path):
    seed(kube_api, NODES["gfd-t4"], PLUGIN, DCGM)
    write(tmp_path, "a-t4.yaml", "gpu_type: t4\n")
    write(tmp_path, "b-l4.yml", "gpu_type: l4\n")
    (tmp_path / "notes.txt").write_text("not a spec")
    r = cli("doctor", "--spec", str(tmp_path), "-o", "json")
    assert r.code == 1, r
    got = [(c["status"], c["detail"].split(":")[0]) for c in spec_checks_of(json.loads(r.out))]
    assert got == [("pass", str(tmp_path / "a-t4.yaml")), ("fail", str(tmp_path / "b-l4.yml"))]


def test_a_bad_spec_is_an_input_error_naming_file_line_and_field(cli, kube_api, tmp_path):
    seed(kube_api, NODES["gfd-h100"], PLUGIN, DCGM)
    job = write(tmp_path, "bad.yaml", "gpus: 1\nmig: 9g.99gb\n")
    r = cli("doctor", "--spec", job)
    assert r.code == 2, r
    assert f"{job}:5: mig:" in r.err


def test_mig_request_on_a_mig_single_node():
    single = [NODES["gfd-a100-mig-single"], NODES["gfd-h100"]]
    ok = spec_checks.check_spec("m.yaml", GpuRequest(0, "1g.5gb"), single, AUTO)
    assert ok.status == doctor.PASS and "r7525-a100-mig" in ok.detail
    # a slice the node does not offer
    other = spec_checks.check_spec("m.yaml", GpuRequest(0, "2g.10gb"), single, AUTO)
    assert other.status == doctor.FAIL
    assert "A100-40GB MIG single 1g.5gb (1 node)" in other.detail
    # whole GPUs of the MIG-single node's model: only its slices are there
    whole = spec_checks.check_spec("w.yaml", GpuRequest(1, gpu_types=("a100",)), single, AUTO)
    assert whole.status == doctor.FAIL and "only as MIG slices" in whole.detail


def test_mig_request_on_a_mixed_node_and_an_explicit_label_key():
    mixed = [NODES["gfd-a100-mig-mixed"]]
    ok = spec_checks.check_spec("m.yaml", GpuRequest(0, "7g.40gb"), mixed, AUTO)
    assert ok.status == doctor.PASS and "node-with-mig" in ok.detail
    # a key the nodes do not carry selects none of them
    keyed = spec_checks.check_spec(
        "t.yaml", GpuRequest(1, gpu_types=("h100",)), [NODES["gfd-h100"]], "gpu-type"
    )
    assert keyed.status == doctor.FAIL


def test_a_spec_without_gpus_passes():
    check = spec_checks.check_spec("cpu.yaml", GpuRequest(0), [NODES["gfd-h100"]], AUTO)
    assert check.status == doctor.PASS and "asks for no GPU" in check.detail


def pending(name, gpu_type, managed=True):
    """A pending worker of a job submitted without a cluster read: the affinity `render`
    gives GPU_TYPE under every scheme gpuctl knows."""
    from gpuctl.k8s.labels import MANAGED
    from gpuctl.k8s.placement import place
    from tests.gpu_cluster import pod

    p = pod(name, "ml", 1, phase="Pending", node_name=None)
    p["metadata"]["labels"] = dict(MANAGED) if managed else {}
    p["spec"]["affinity"] = place(GpuRequest(1, gpu_types=(gpu_type,))).affinity
    return p


def test_gpuctl_pods_pending_on_an_affinity_no_node_meets_are_named(cli, kube_api):
    seed(kube_api, NODES["gfd-a100-80gb"], NODES["karpenter-p4d"], PLUGIN, DCGM)
    seed(kube_api, pending("train-h100-0", "h100"), pending("train-a100-0", "a100"))
    seed(kube_api, pending("theirs-0", "h100", managed=False))
    r = cli("doctor", "-o", "json")
    assert r.code == 0, r  # a node autoscaler may still add such a node: a warning
    (check,) = [c for c in json.loads(r.out)["checks"] if c["name"] == spec_checks.PENDING]
    assert check["status"] == "warn"
    assert check["detail"].startswith(
        "ml/train-h100-0 pending: their nodeSelector / node affinity selects no node "
        "(the GPU nodes have A100-40GB (1 node), A100-80GB (1 node))"
    )
    assert "theirs-0" not in check["detail"] and "train-a100-0" not in check["detail"]


def test_pending_pods_that_may_run_pass_and_none_pending_adds_no_check():
    a100 = [NODES["gfd-a100-80gb"]]
    check = spec_checks.check_pending([pending("w-0", "a100")], a100)
    assert check is not None and check.status == doctor.PASS
    assert spec_checks.check_pending([], a100) is None


def test_a_missing_file_or_an_empty_directory_is_an_input_error_before_any_request(
    cli, kube, tmp_path
):
    before = len(kube.requests())
    r = cli("doctor", "--spec", str(tmp_path / "nope.yaml"))
    assert r.code == 2 and "nope.yaml" in r.err and "cannot read file" in r.err
    r = cli("doctor", "--spec", str(tmp_path))
    assert r.code == 2 and "holds no .yaml or .yml file" in r.err
    assert len(kube.requests()) == before


def test_other_vendors_specs_select_their_own_nodes(cli, kube_api, tmp_path):
    seed(
        kube_api,
        NODES["gfd-h100"],
        NODES["neuron-trn2-karpenter"],
        NODES["amd-mi300x-vf"],
        PLUGIN,
        DCGM,
    )
    trn2 = write(tmp_path, "trn2.yaml", "accelerator: trainium2\ngpus: 16\n")
    r = cli("doctor", "--spec", trn2, "-o", "json")
    [check] = spec_checks_of(json.loads(r.out))
    name = NODES["neuron-trn2-karpenter"]["metadata"]["name"]
    assert check["status"] == "pass", check
    assert check["detail"] == f"{trn2}: accelerator Trainium2 selects 1 node(s): {name}"
    gaudi = write(tmp_path, "gaudi.yaml", "accelerator: gaudi2\n")
    [check] = spec_checks_of(json.loads(cli("doctor", "--spec", gaudi, "-o", "json").out))
    assert check["status"] == "fail"
    assert check["detail"].startswith(
        f"{gaudi}: accelerator Gaudi2 selects no node with habana.ai/gaudi"
    )
