"""`gpuctl share timeslice|off` under faults, through a proxy in front of the API emulator:
a step the cluster refuses takes back, newest first, what was done before it."""

import json

from gpuctl.k8s import device_plugin
from gpuctl.sharing.core import config as sharing
from tests.gpu_cluster import daemonset, node, seed
from tests.standins.faults import race_creator, reply

NS, CM = "gpu-operator", "dp-config"
FORBIDDEN = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": 'nodes "gpu-2" is forbidden: User "dev" cannot patch resource',
        "reason": "Forbidden",
        "code": 403,
    }
)


def core_api(api):
    from kubernetes import client

    return client.CoreV1Api(api)


def label(api, name):
    return (core_api(api).read_node(name).metadata.labels or {}).get(device_plugin.CONFIG_LABEL)


def config_maps(api):
    return {c.metadata.name: c.data for c in core_api(api).list_namespaced_config_map(NS).items}


def test_a_refused_label_takes_back_the_labels_and_the_config_map_before_it(
    cli, kube_api, proxied_kube
):
    seed(
        kube_api, node("gpu-1"), node("gpu-2"), daemonset("nvidia-device-plugin", NS, config_map=CM)
    )
    proxied_kube.on("PATCH", "/api/v1/nodes/gpu-2", reply(403, FORBIDDEN))
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1,gpu-2", "--yes")
    assert r.code == 1 and "not allowed by the cluster" in r.err, r
    assert (
        f"the changes made before the failure were undone: label of node gpu-1, ConfigMap/{CM}"
        in r.err
    )
    assert label(kube_api, "gpu-1") is None and label(kube_api, "gpu-2") is None
    assert CM not in config_maps(kube_api)


def test_a_refused_off_takes_the_key_it_added_out_again(cli, kube_api, proxied_kube):
    seed(
        kube_api,
        node("gpu-1", labels={device_plugin.CONFIG_LABEL: "ts-4"}),
        daemonset("nvidia-device-plugin", NS, config_map=CM, operator_style=False),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CM, "namespace": NS},
            "data": {"ts-4": device_plugin.config_text(sharing.make_sharing("time-slicing", 4))},
        },
    )
    proxied_kube.on("PATCH", "/api/v1/nodes/gpu-1", reply(403, FORBIDDEN))
    r = cli("share", "off", "--node", "gpu-1", "--yes")
    assert r.code == 1 and "the changes made before the failure were undone" in r.err, r
    assert set(config_maps(kube_api)[CM]) == {"ts-4"}  # the 'default' it added is gone
    assert label(kube_api, "gpu-1") == "ts-4"


def test_a_rollback_leaves_a_config_map_another_client_made_with_the_same_data(
    cli, kube_api, proxied_kube
):
    """Another client creates the device plugin's ConfigMap, with the very keys gpuctl
    writes, while gpuctl's create goes unanswered: same name, same data, but not made by this
    attempt (no token), so the rollback leaves it."""
    seed(kube_api, node("gpu-1"), daemonset("nvidia-device-plugin", NS, config_map=CM))

    def theirs(obj):
        core_api(kube_api).create_namespaced_config_map(NS, obj)

    rule = proxied_kube.on("POST", f"/api/v1/namespaces/{NS}/configmaps", race_creator(theirs))
    r = cli("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--yes")
    assert rule.fired.is_set() and r.code == 1, r
    assert CM in config_maps(kube_api), r.err  # theirs is still there
    assert "nothing was changed" in r.err
    assert label(kube_api, "gpu-1") is None
