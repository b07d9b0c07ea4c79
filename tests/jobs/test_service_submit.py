"""Submitting a kind: Service spec to the Kubernetes API emulator (with KEDA's upstream CRD
served, or without KEDA), through the official client: all objects or none, the autoscaler
the cluster has, a rollout sized by the GPU quota, and jobs list/get/delete knowing it."""

import os

import pytest

from tests import ROOT
from tests.jobs.test_submit import add_node

EX = os.path.join(ROOT, "examples")
SPEC = (
    "apiVersion: gpuctl/v1\nkind: Service\nname: chat\nimage: example/chat:1\ngpus: 1\n"
    "port: 8000\nautoscale: {min: 1, max: 4, gpu_busy: 70}\n"
)

pytestmark = pytest.mark.integration


@pytest.fixture
def api(kube_api):
    from kubernetes import client

    return (
        client.CoreV1Api(kube_api),
        client.AppsV1Api(kube_api),
        client.CustomObjectsApi(kube_api),
        client.AutoscalingV2Api(kube_api),
    )


def write(tmp_path, text):
    p = tmp_path / "svc.yaml"
    p.write_text(text)
    return str(p)


def test_with_keda_submit_creates_deployment_service_and_scaled_object(cli, api, kube, tmp_path):
    core, apps, custom, _ = api
    kube.install_crds("ScaledObject")  # the emulator checks the object against KEDA's CRD
    add_node(core, "gpu-a", 8, "a100")
    r = cli("submit", os.path.join(EX, "inference-service.yaml"))
    assert r.code == 0, r
    deploy = apps.read_namespaced_deployment("classifier", "default")
    assert deploy.spec.replicas == 1
    assert core.read_namespaced_service("classifier", "default").spec.ports[0].port == 8000
    so = custom.get_namespaced_custom_object(
        "keda.sh", "v1alpha1", "default", "scaledobjects", "classifier"
    )
    trigger = so["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and 'namespace="default"' in trigger["metadata"]["query"]
    assert "ScaledObject/classifier" in r.err

    r = cli("jobs", "list", "-o", "json")
    assert r.code == 0, r
    assert '"kind": "Deployment"' in r.out and '"name": "classifier"' in r.out
    r = cli("jobs", "get", "classifier", "-o", "json")
    assert r.code == 0 and '"Deployment"' in r.out
    r = cli("jobs", "why", "classifier", "-o", "json")
    assert r.code == 0, r

    r = cli("jobs", "delete", "classifier", "--yes")
    assert r.code == 0, r
    assert r.err.index("ScaledObject/classifier") < r.err.index("Deployment/classifier")
    assert apps.list_namespaced_deployment("default").items == []
    assert core.list_namespaced_service("default").items == []
    assert (
        custom.list_namespaced_custom_object("keda.sh", "v1alpha1", "default", "scaledobjects")[
            "items"
        ]
        == []
    )


def test_without_keda_submit_makes_an_hpa_and_prints_the_adapter_rule(cli, api, kube, tmp_path):
    core, _, _, autoscaling = api
    add_node(core, "gpu-a", 8, "a100")
    r = cli("submit", write(tmp_path, SPEC))
    assert r.code == 0, r
    hpa = autoscaling.read_namespaced_horizontal_pod_autoscaler("chat", "default")
    metric = hpa.spec.metrics[0].external
    assert metric.metric.name == "gpuctl-default-chat-gpu-busy" and metric.target.value == "70"
    assert "externalRules:" in r.err and "as: gpuctl-default-chat-gpu-busy" in r.err


def test_asking_for_keda_where_there_is_none_creates_nothing(cli, api, kube, tmp_path):
    core, apps, _, _ = api
    add_node(core, "gpu-a", 8, "a100")
    r = cli("submit", write(tmp_path, SPEC), "--autoscaler", "keda")
    assert r.code == 1 and "no KEDA" in r.err
    assert apps.list_namespaced_deployment("default").items == []


@pytest.mark.parametrize("hard, surge", [("6", (2, 0)), ("5", (1, 0)), ("4", (0, 1))])
def test_the_rollout_surges_only_into_gpus_the_quota_leaves(cli, api, kube, tmp_path, hard, surge):
    core, apps, _, _ = api
    add_node(core, "gpu-a", 8, "a100")
    core.create_namespaced_resource_quota(
        "default",
        {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": hard}}},
    )
    r = cli("submit", write(tmp_path, SPEC))  # up to 4 replicas of 1 GPU
    assert r.code == 0, r
    rolling = apps.read_namespaced_deployment("chat", "default").spec.strategy.rolling_update
    assert (rolling.max_surge, rolling.max_unavailable) == surge


def test_the_rollout_is_sized_by_the_resource_shared_replicas_are_offered_as(
    cli, api, kube, tmp_path
):
    """On a real time-sliced node whose replicas keep the name nvidia.com/gpu
    (tests/data/nodes), a `shared: true` service's surge must fit the nvidia.com/gpu quota."""
    from tests.node_corpus import corpus

    core, apps, _, _ = api
    core.create_node(corpus()["gfd-t4-shared"])
    core.create_namespaced_resource_quota(
        "default",
        {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}},
    )
    r = cli("submit", write(tmp_path, SPEC + "shared: true\n"))  # up to 4 replicas of 1
    assert r.code == 0, r
    deploy = apps.read_namespaced_deployment("chat", "default")
    limits = deploy.spec.template.spec.containers[0].resources.limits
    assert limits == {"nvidia.com/gpu": "1"}
    rolling = deploy.spec.strategy.rolling_update  # no GPU left for a surge pod
    assert (rolling.max_surge, rolling.max_unavailable) == (0, 1)


def test_a_failed_create_leaves_nothing_behind(cli, api, kube, tmp_path):
    """A Service of that name exists, not gpuctl's: its create fails, and the Deployment
    created before it is removed again; theirs is left alone."""
    core, apps, _, _ = api
    kube.install_crds("ScaledObject")
    add_node(core, "gpu-a", 8, "a100")
    core.create_namespaced_service(
        "default", {"metadata": {"name": "chat"}, "spec": {"ports": [{"port": 1}]}}
    )
    r = cli("submit", write(tmp_path, SPEC))
    assert r.code == 1, r
    assert "already exists" in r.err
    assert apps.list_namespaced_deployment("default").items == []
    assert [s.metadata.name for s in core.list_namespaced_service("default").items] == ["chat"]


def test_wait_is_refused_for_a_service(cli, tmp_path):
    r = cli("submit", write(tmp_path, SPEC), "--wait")
    assert r.code == 2 and "runs until it is deleted" in r.err


def test_keda_logs_in_to_prometheus_by_a_secret_reference(cli, api, kube, tmp_path):
    core, _, custom, _ = api
    kube.install_crds("ScaledObject", "TriggerAuthentication")  # KEDA's own CRDs check them
    add_node(core, "gpu-a", 8, "a100")
    text = SPEC.replace(
        "gpu_busy: 70}",
        "gpu_busy: 70, prometheus: 'https://prom.corp:9090', "
        "prometheus_auth: {secret: prom-creds, mode: basic}}",
    )
    r = cli("submit", write(tmp_path, text))
    assert r.code == 0, r
    group = ("keda.sh", "v1alpha1", "default")
    auth = custom.get_namespaced_custom_object(*group, "triggerauthentications", "chat-prometheus")
    assert {ref["key"] for ref in auth["spec"]["secretTargetRef"]} == {"username", "password"}
    so = custom.get_namespaced_custom_object(*group, "scaledobjects", "chat")
    assert so["spec"]["triggers"][0]["authenticationRef"] == {"name": "chat-prometheus"}
    assert "TriggerAuthentication/chat-prometheus, ScaledObject/chat created" in r.err

    r = cli("jobs", "delete", "chat", "--yes")
    assert r.code == 0, r
    assert r.err.index("ScaledObject/chat") < r.err.index("TriggerAuthentication/chat-prometheus")
    assert custom.list_namespaced_custom_object(*group, "triggerauthentications")["items"] == []


def test_submit_refuses_credentials_in_the_prometheus_url_before_any_request(cli, kube, tmp_path):
    text = SPEC.replace("gpu_busy: 70}", "gpu_busy: 70, prometheus: 'https://a:s3cr3t@p:9090'}")
    served = len(kube.requests())
    r = cli("submit", write(tmp_path, text), "--yes")
    assert r.code == 2 and "carries credentials" in r.err and "s3cr3t" not in r.err + r.out, r
    assert len(kube.requests()) == served
