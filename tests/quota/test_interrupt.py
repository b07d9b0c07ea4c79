"""`quota set` stopped by a real SIGINT while a create hangs: exit 130, and the message says
what was undone."""

from tests import children
from tests.jobs.test_submit_faults import gpuctl_process
from tests.standins.faults import delay, wait_until


def test_ctrl_c_while_the_quota_is_being_created_is_130_and_says_what_was_undone(
    kube_api, proxied_kube
):
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    rule = proxied_kube.on("POST", "/api/v1/namespaces/team-a/resourcequotas", delay(5))
    proc = gpuctl_process("quota", "set", "team-a", "--gpus", "4")
    code, out, err = children.interrupt_when(proc, rule.fired)
    assert code == 130, err
    assert "gpuctl: interrupted; " in err and "Namespace/team-a" in err, err
    assert wait_until(
        lambda: "team-a" not in [n.metadata.name for n in core.list_namespace().items], 10
    )


def test_ctrl_c_while_a_kueue_queue_is_being_created_is_130(kube, kube_api, proxied_kube):
    from kubernetes import client

    from tests.gpu_cluster import node, seed

    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    seed(kube_api, node("gpu-1"))
    rule = proxied_kube.on("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", delay(5))
    proc = gpuctl_process(
        "quota", "set", "team-a", "--gpus", "2", "--gpu-label-key", "nvidia.com/gpu.product"
    )
    # a loaded machine starts Python slowly
    code, out, err = children.interrupt_when(proc, rule.fired, 120)
    assert code == 130, err
    assert "gpuctl: interrupted; " in err and "ResourceFlavor/" in err, err
    custom = client.CustomObjectsApi(kube_api)
    assert wait_until(
        lambda: (
            not custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors")[
                "items"
            ]
        ),
        10,
    )
