"""`gpuctl mig configure --node/--selector` against the Kubernetes API emulator; a thread
plays the GPU Operator's mig-manager by flipping nvidia.com/mig.config.state."""

import json
import textwrap
import threading
import time

import pytest
import yaml

from tests.clirun import run_gpuctl as run


def add_node(kube_api, name, labels):
    from kubernetes import client

    client.CoreV1Api(kube_api).create_node(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    )


def labels_of(kube_api, name):
    from kubernetes import client

    return client.CoreV1Api(kube_api).read_node(name).metadata.labels or {}


def operator(kube_api, names, final="success", delay=0.2):
    """Waits until each node carries the new config label, then goes pending → final."""
    from kubernetes import client

    core = client.CoreV1Api(kube_api)

    def work():
        deadline = time.monotonic() + 20
        todo = set(names)
        while todo and time.monotonic() < deadline:
            for n in list(todo):
                if labels_of(kube_api, n).get("nvidia.com/mig.config") == "all-1g.10gb":
                    core.patch_node(
                        n, {"metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}}}
                    )
                    time.sleep(delay)
                    core.patch_node(
                        n, {"metadata": {"labels": {"nvidia.com/mig.config.state": final}}}
                    )
                    todo.discard(n)
            time.sleep(0.05)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t


H100_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/mig.config": "all-disabled",
    "nvidia.com/mig.config.state": "success",
}


def test_label_node_and_follow_state_to_success(kube, kube_api, capsys):
    add_node(kube_api, "gpu-1", dict(H100_LABELS))
    t = operator(kube_api, ["gpu-1"])
    code, out, err = run(
        capsys,
        "mig",
        "configure",
        "--node",
        "gpu-1",
        "-c",
        "all-1g.10gb",
        "--yes",
        "--timeout",
        "20",
    )
    t.join(5)
    assert code == 0, err
    assert "all-disabled -> all-1g.10gb" in out
    assert "gpu-1: pending" in err and "gpu-1: success" in err
    assert labels_of(kube_api, "gpu-1")["nvidia.com/mig.config"] == "all-1g.10gb"
    # Again: already applied, nothing patched, done at once.
    code, out, err = run(
        capsys,
        "mig",
        "configure",
        "--node",
        "gpu-1",
        "-c",
        "all-1g.10gb",
        "--yes",
        "--timeout",
        "5",
    )
    assert code == 0 and "already set" in out and "success (already on this config)" in err


def test_selector_failed_state_is_an_error_naming_the_node(kube, kube_api, capsys):
    add_node(kube_api, "gpu-a", dict(H100_LABELS, pool="mig"))
    add_node(kube_api, "gpu-b", dict(H100_LABELS, pool="other"))
    t = operator(kube_api, ["gpu-a"], final="failed")
    code, _, err = run(
        capsys,
        "mig",
        "configure",
        "--selector",
        "pool=mig",
        "-c",
        "all-1g.10gb",
        "--yes",
        "--timeout",
        "20",
    )
    t.join(5)
    assert code == 1 and "failed to apply MIG config 'all-1g.10gb' on gpu-a" in err
    assert labels_of(kube_api, "gpu-b")["nvidia.com/mig.config"] == "all-disabled"
    # Asking again reports the failure at once instead of waiting for the timeout.
    start = time.monotonic()
    code, _, err = run(
        capsys,
        "mig",
        "configure",
        "--selector",
        "pool=mig",
        "-c",
        "all-1g.10gb",
        "--yes",
        "--timeout",
        "20",
    )
    assert code == 1 and "on gpu-a" in err and "to retry" in err
    assert time.monotonic() - start < 10
    assert any(q.get("labelSelector") == "pool=mig" for _, _, q in kube.requests())


def test_timeout_names_nodes_and_state(kube, kube_api, capsys):
    add_node(kube_api, "gpu-1", dict(H100_LABELS))
    code, _, err = run(
        capsys,
        "mig",
        "configure",
        "--node",
        "gpu-1",
        "-c",
        "all-1g.10gb",
        "--yes",
        "--timeout",
        "2",
    )
    assert code == 1 and "timed out after 2s" in err and "gpu-1 (state: success)" in err


def test_dry_run_and_unknown_node_change_nothing(kube, kube_api, capsys):
    add_node(kube_api, "gpu-1", dict(H100_LABELS))
    code, out, _ = run(
        capsys, "mig", "configure", "--node", "gpu-1", "-c", "all-1g.10gb", "--dry-run"
    )
    assert code == 0 and "dry run" in out
    assert labels_of(kube_api, "gpu-1")["nvidia.com/mig.config"] == "all-disabled"
    code, _, err = run(capsys, "mig", "configure", "--node", "nope", "-c", "all-1g.10gb", "--yes")
    assert code == 1 and "no node 'nope'" in err


def test_bad_operator_namespace_is_refused_before_any_request(kube, capsys):
    code, _, err = run(
        capsys, "mig", "configure", "--node", "gpu-1", "-c", "all-1g.10gb", "-n", "GPU_Op", "--yes"
    )
    assert code == 2 and "not a valid namespace name" in err
    assert kube.requests() == []


def test_config_file_checked_against_node_gpu_before_labelling(kube, kube_api, capsys, tmp_path):
    add_node(kube_api, "gpu-1", dict(H100_LABELS))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        textwrap.dedent("""\
        version: v1
        mig-configs:
          too-big:
            - devices: all
              mig-enabled: true
              mig-devices:
                3g.40gb: 3
        """)
    )
    code, _, err = run(
        capsys, "mig", "configure", "--node", "gpu-1", "-f", str(cfg), "-c", "too-big", "--yes"
    )
    assert code == 2 and "c.yaml:7" in err and "3g.40gb ×3" in err
    assert labels_of(kube_api, "gpu-1")["nvidia.com/mig.config"] == "all-disabled"


def test_render_configmap_for_a_custom_layout(capsys):
    code, out, _ = run(
        capsys,
        "mig",
        "configure",
        "--layout",
        "3g.40gb=1,2g.20gb=2",
        "-c",
        "half-and-half",
        "--render-configmap",
    )
    assert code == 0
    cm = yaml.safe_load(out)
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["namespace"] == "gpu-operator"
    inner = yaml.safe_load(cm["data"]["config.yaml"])
    assert inner == {
        "version": "v1",
        "mig-configs": {
            "half-and-half": [
                {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 2}}
            ]
        },
    }
    code, out, _ = run(capsys, "mig", "configure", "--layout", "all-3g.40gb", "--render-configmap")
    entries = yaml.safe_load(yaml.safe_load(out)["data"]["config.yaml"])["mig-configs"][
        "all-3g.40gb"
    ]
    h100 = next(e for e in entries if "0x233010DE" in e["device-filter"])
    assert h100["mig-devices"] == {"3g.40gb": 2}


def test_render_configmap_of_one_config_from_a_file_keeps_the_configmap_name(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        textwrap.dedent("""\
        version: v1
        mig-configs:
          small:
            - devices: all
              mig-enabled: true
              mig-devices:
                1g.10gb: 7
          off:
            - devices: all
              mig-enabled: false
        """)
    )
    code, out, err = run(
        capsys,
        "mig",
        "configure",
        "-f",
        str(cfg),
        "-c",
        "small",
        "--render-configmap",
        "--configmap-name",
        "team-mig",
    )
    assert code == 0, err
    cm = yaml.safe_load(out)
    assert cm["metadata"] == {"name": "team-mig", "namespace": "gpu-operator"}
    assert list(yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"]) == ["small"]
    code, out, _ = run(capsys, "mig", "configure", "-f", str(cfg), "--render-configmap")
    cm = yaml.safe_load(out)
    assert cm["metadata"]["name"] == "custom-mig-config"
    assert list(yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"]) == ["small", "off"]


def add_configmap(kube_api, name, text):
    from kubernetes import client

    client.CoreV1Api(kube_api).create_namespaced_config_map(
        "gpu-operator",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "gpu-operator"},
            "data": {"config.yaml": textwrap.dedent(text)},
        },
    )


OPERATOR_CONFIG = """\
    version: v1
    mig-configs:
      all-disabled:
        - devices: all
          mig-enabled: false
      all-1g.10gb:
        - devices: all
          mig-enabled: true
          mig-devices:
            1g.10gb: 7
      broken:
        - devices: all
          mig-enabled: true
          mig-devices:
            1g.10gb: 8
    """


def test_config_name_checked_against_the_operator_configmap(kube, kube_api, capsys):
    add_node(kube_api, "gpu-1", dict(H100_LABELS))
    add_configmap(kube_api, "default-mig-parted-config", OPERATOR_CONFIG)
    code, _, err = run(capsys, "mig", "configure", "--node", "gpu-1", "-c", "all-1g.10g", "--yes")
    assert code == 2 and "no MIG config 'all-1g.10g'" in err
    assert "configs: all-disabled, all-1g.10gb, broken" in err
    code, _, err = run(capsys, "mig", "configure", "--node", "gpu-1", "-c", "broken", "--yes")
    assert code == 2 and "default-mig-parted-config config.yaml:15" in err
    assert "GPU 0 (H100-80GB): 1g.10gb ×8" in err
    assert labels_of(kube_api, "gpu-1")["nvidia.com/mig.config"] == "all-disabled"
    t = operator(kube_api, ["gpu-1"])
    code, out, err = run(
        capsys,
        "mig",
        "configure",
        "--node",
        "gpu-1",
        "-c",
        "all-1g.10gb",
        "--yes",
        "--timeout",
        "20",
    )
    t.join(5)
    assert code == 0 and "not checked" not in out, err


def test_set_based_selector_and_bad_selector(kube, kube_api, capsys):
    add_node(kube_api, "gpu-a", dict(H100_LABELS, pool="mig"))
    add_node(kube_api, "gpu-b", dict(H100_LABELS, pool="other"))
    add_node(kube_api, "gpu-c", dict(H100_LABELS, pool="spare"))
    code, out, err = run(
        capsys,
        "mig",
        "configure",
        "--selector",
        "pool in (mig,other)",
        "-c",
        "all-1g.10gb",
        "--dry-run",
    )
    assert code == 0, err
    assert "node gpu-a:" in out and "node gpu-b:" in out and "gpu-c" not in out
    sent = len(kube.requests())
    code, _, err = run(
        capsys, "mig", "configure", "--selector", "pool in ()", "-c", "all-1g.10gb", "--dry-run"
    )
    assert code == 2 and "label selector" in err
    assert not any("nodes" in path for _, path, _ in kube.requests()[sent:])  # nothing sent


def test_a_configmap_mig_parted_cannot_read_is_refused_before_labelling(kube, kube_api, capsys):
    # mig-manager parses the whole file: a config with all counts 0 makes every config of
    # the ConfigMap unusable to it, the good one too
    add_node(kube_api, "gpu-1", dict(H100_LABELS))
    add_configmap(
        kube_api,
        "custom-mig-config",
        """\
        version: v1
        mig-configs:
          all-1g.10gb:
            - devices: all
              mig-enabled: true
              mig-devices: {1g.10gb: 7}
          zeros:
            - devices: all
              mig-enabled: true
              mig-devices: {1g.10gb: 0}
        """,
    )
    code, _, err = run(capsys, "mig", "configure", "--node", "gpu-1", "-c", "all-1g.10gb", "--yes")
    assert code == 2 and "all counts are 0" in err
    assert "mig-parted refuses the whole file for it" in err
    assert labels_of(kube_api, "gpu-1")["nvidia.com/mig.config"] == "all-disabled"


def test_an_early_driver_name_is_accepted_with_a_note(kube, kube_api, capsys):
    labels = dict(H100_LABELS, **{"nvidia.com/gpu.product": "NVIDIA-GB200"})
    add_node(kube_api, "gb-1", labels)
    add_configmap(
        kube_api,
        "custom-mig-config",
        """\
        version: v1
        mig-configs:
          all-3g.95gb:
            - devices: all
              mig-enabled: true
              mig-devices: {"3g.95gb": 2}
        """,
    )
    code, out, err = run(
        capsys, "mig", "configure", "--node", "gb-1", "-c", "all-3g.95gb", "--dry-run"
    )
    assert code == 0, err
    assert "3g.95gb is what an earlier GB200 driver called 3g.93gb" in out


def test_a_label_patch_that_fails_puts_back_the_labels_already_set(kube, kube_api, capsys):
    from kubernetes import client

    from gpuctl.adapters.kube import Kube
    from gpuctl.common.errors import GpuctlError
    from gpuctl.mig import service
    from gpuctl.runtime.workflow import Quiet

    add_node(kube_api, "gpu-a", dict(H100_LABELS, pool="mig"))
    add_node(kube_api, "gpu-b", dict(H100_LABELS, pool="mig"))
    with Kube() as k:
        plan = service.plan_cluster(k, None, "all-1g.10gb", (), "pool=mig", "gpu-operator", "x")
        assert [s.target for s in plan.steps] == ["node gpu-a", "node gpu-b"]
        client.CoreV1Api(kube_api).delete_node("gpu-b")  # gone between plan and apply
        with pytest.raises(GpuctlError) as e:
            service.configure_cluster(k, plan, 5, Quiet(), lambda *_: None)
    assert "the labels set before the failure were put back: node gpu-a" in e.value.message
    assert labels_of(kube_api, "gpu-a")["nvidia.com/mig.config"] == "all-disabled"


# GPU Feature Discovery's labels and the device plugin's resources on two H100 nodes, one per
# MIG strategy (NVIDIA/k8s-device-plugin internal/lm/mig-strategy.go: mixed counts each
# profile as nvidia.com/mig-<profile>, single renames the product -MIG-<profile> and counts
# the slices as nvidia.com/gpu); the mig-manager's config and state labels.
MIXED = {
    **H100_LABELS,
    "nvidia.com/gpu.count": "2",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/mig.config": "custom-1g-3g",
    "nvidia.com/mig-1g.10gb.count": "7",
    "nvidia.com/mig-3g.40gb.count": "2",
}
SINGLE = {
    **H100_LABELS,
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
    "nvidia.com/gpu.count": "14",
    "nvidia.com/mig.strategy": "single",
    "nvidia.com/mig.config": "all-1g.10gb",
    "nvidia.com/mig.config.state": "pending",
}


def test_mig_show_node_reads_a_cluster_nodes_config_state_and_slices(kube, kube_api, capsys):
    from tests.gpu_cluster import node, pod, seed

    mixed = {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"}
    seed(
        kube_api,
        node("gpu-1", gpus=0, labels=MIXED, alloc=mixed),
        node("gpu-2", gpus=14, labels=SINGLE),
        pod("a", "default", 2, resource="nvidia.com/mig-1g.10gb"),
        pod("b", "default", 1, resource="nvidia.com/mig-1g.10gb", phase="Pending"),
        pod("done", "default", 1, resource="nvidia.com/mig-3g.40gb", phase="Succeeded"),
        pod("c", "default", 3, node_name="gpu-2"),
    )
    code, out, err = run(capsys, "mig", "show", "--node", "gpu-1,gpu-2", "-o", "json")
    assert code == 0, err
    one, two = json.loads(out)
    assert one == {
        "node": "gpu-1",
        "model": "H100-80GB",
        "gpus": 2,
        "mig_strategy": "mixed",
        "mig_config": "custom-1g-3g",
        "mig_config_state": "success",
        "resources": [
            {"resource": "nvidia.com/gpu", "profile": None, "capacity": 0, "allocatable": 0,
             "in_use": 0},
            {"resource": "nvidia.com/mig-1g.10gb", "profile": "1g.10gb", "capacity": 7,
             "allocatable": 7, "in_use": 3},
            {"resource": "nvidia.com/mig-3g.40gb", "profile": "3g.40gb", "capacity": 2,
             "allocatable": 2, "in_use": 0},
        ],
    }  # fmt: skip
    assert (two["mig_strategy"], two["mig_config_state"]) == ("single", "pending")
    assert two["resources"] == [
        {"resource": "nvidia.com/gpu", "profile": "1g.10gb", "capacity": 14, "allocatable": 14,
         "in_use": 3},
    ]  # fmt: skip
    code, out, _ = run(capsys, "mig", "show", "--node", "gpu-2")
    assert (
        code == 0
        and "gpu-2: H100-80GB, MIG strategy single, mig.config all-1g.10gb (pending)" in out
    )
    assert "1g.10gb" in out and "14" in out
    code, _, err = run(capsys, "mig", "show", "--node", "nope")
    assert code == 1 and "no node 'nope'" in err
