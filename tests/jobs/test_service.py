"""kind: Service specs: parsing, rendering, and every object against its upstream schema
(kubernetes-validate for the Deployment, Service and HPA; KEDA's own CRD for the
ScaledObject)."""

import os

import pytest

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.core import autoscale, serving
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.core.spec import parse_job
from gpuctl.jobs.sources import load_job
from gpuctl.k8s import apis
from tests import ROOT
from tests.crd_schema import assert_valid_cr, errors
from tests.k8s_schema import assert_valid

BASE = "apiVersion: gpuctl/v1\nkind: Service\nname: chat\nimage: example/chat:1\nport: 8000\n"


def spec(text: str):
    return parse_job(load_yaml(text, "svc.yaml"))


def refusal(text: str) -> str:
    with pytest.raises(SpecError) as e:
        spec(text)
    return str(e.value)


def valid(obj: dict) -> None:
    if obj["apiVersion"] == apis.KEDA_API_VERSION:
        assert_valid_cr(obj)
    else:
        assert_valid(obj)


@pytest.mark.parametrize(
    "extra",
    [
        "",
        "autoscale: {min: 1, max: 8, gpu_busy: 70}\n",
        "autoscale: {max: 4, queue_depth: 8, window: 1m}\nmetrics_port: 9400\n",
        "autoscale: {min: 0, max: 4, rps: 50}\nmig: 1g.10gb\n",
        "autoscale: {min: 2, max: 3, latency_ms: 250, prometheus: 'http://prom:9090'}\n",
    ],
)
@pytest.mark.parametrize("autoscaler", autoscale.AUTOSCALERS)
def test_every_object_of_a_service_is_valid_upstream(extra, autoscaler):
    gpus = "" if "mig:" in extra else "gpus: 1\n"
    s = spec(BASE + gpus + "liveness: {path: /livez, period: 20s}\n" + extra)
    if autoscaler == autoscale.HPA and "min: 0" in extra:
        return  # an HPA cannot scale to zero (see test_hpa_refuses_scale_to_zero)
    objs = render(s, "gpu-type", serving.Target("ml", autoscaler=autoscaler))
    kinds = [o["kind"] for o in objs]
    assert kinds[:2] == ["Deployment", "Service"]
    assert all(o["metadata"]["namespace"] == "ml" for o in objs)
    for obj in objs:
        valid(obj)
    if "autoscale" in extra:
        assert kinds[2] == (
            "ScaledObject" if autoscaler == autoscale.KEDA else "HorizontalPodAutoscaler"
        )


def test_the_scaled_object_names_the_deployment_its_bounds_and_the_target():
    s = spec(
        BASE + "gpus: 1\nautoscale: {min: 1, max: 8, gpu_busy: 70, prometheus: 'http://p:9090'}\n"
    )
    _, _, so = render(s, "gpu-type", serving.Target("ml"))
    assert so["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "chat",
    }
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (1, 8)
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "Value"
    assert trigger["metadata"]["threshold"] == "70"
    assert trigger["metadata"]["serverAddress"] == "http://p:9090"
    assert 'exported_namespace="ml"' in trigger["metadata"]["query"]


def test_keda_refuses_what_the_crd_refuses():
    s = spec(BASE + "autoscale: {max: 2, rps: 5}\n")
    so = render(s, "gpu-type", serving.Target("ml"))[-1]
    assert not errors(so)
    so["spec"]["minReplicas"] = so["spec"].pop("minReplicaCount")  # the HPA's name for it
    assert errors(so)
    so["spec"]["minReplicaCount"] = so["spec"].pop("minReplicas")
    so["spec"]["triggers"] = []  # KEDA needs one
    assert errors(so)


def test_service_selects_the_deployments_pods_and_serves_its_ports():
    s = spec(
        BASE.replace("port: 8000\n", "")
        + "ports: [{name: http, port: 8000}, {name: grpc, port: 9000}]\nmetrics_port: 9400\n"
    )
    deploy, svc = render(s, "gpu-type", serving.Target("ml"))
    assert svc["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert [p["port"] for p in svc["spec"]["ports"]] == [8000, 9000, 9400]
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"] == {"tcpSocket": {"port": 8000}}  # the default
    annotations = deploy["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9400"


@pytest.mark.parametrize(
    "free, expect",
    [
        (None, (1, 0)),  # no quota
        (8, (0, 1)),  # 8 GPUs for 8 pods at most: no pod more, an old one goes first
        (10, (2, 0)),
        (100, (8, 0)),  # never more than the pods there are
    ],
)
def test_rollout_never_takes_more_gpus_than_the_quota_leaves(free, expect):
    r = serving.rollout_within(per_pod=1, peak=8, free=free)
    assert (r.max_surge, r.max_unavailable) == expect
    if free is not None:
        assert 8 + r.max_surge <= free or r.max_surge == 0


def test_rollout_counts_gpus_per_pod():
    r = serving.rollout_within(per_pod=4, peak=2, free=12)
    assert (r.max_surge, r.max_unavailable) == (1, 0)  # 2 pods x 4 + 1 x 4 = 12


@pytest.mark.parametrize(
    "extra, field, words",
    [
        ("autoscale: {min: 1, max: 8}\n", "autoscale", "one signal"),
        ("autoscale: {max: 8, rps: 1, gpu_busy: 5}\n", "autoscale.rps", "one signal"),
        ("autoscale: {min: 9, max: 8, rps: 1}\n", "autoscale.min", "more than max"),
        ("autoscale: {min: 0, max: 8, gpu_busy: 50}\n", "autoscale.min", "never wake"),
        ("autoscale: {max: 8, gpu_busy: 150}\n", "autoscale.gpu_busy", "percentage"),
        ("autoscale: {max: 8, rps: 1, window: 5 minutes}\n", "autoscale.window", "duration"),
        ("autoscale: {max: 8, rps: 1, speed: 3}\n", "autoscale.speed", "unknown field"),
        ("retries: 2\n", "retries", "kind Job only"),
        ("nodes: 2\n", "nodes", "kind Job only"),
        ("ports: [{name: http, port: 1}]\n", "ports", "not both"),
        ("readiness: {path: healthz}\n", "readiness.path", "absolute"),
    ],
)
def test_what_a_service_spec_may_not_say(extra, field, words):
    message = refusal(BASE + extra)
    assert "svc.yaml:" in message and field in message and words in message


def test_a_service_needs_a_port_and_a_name_its_pods_can_carry():
    assert "port" in refusal(BASE.replace("port: 8000\n", ""))
    assert "DNS-1035" in refusal(BASE.replace("name: chat", "name: 1chat"))
    assert "at most 46" in refusal(BASE.replace("name: chat", "name: " + "c" * 47))


def test_a_job_may_not_say_what_only_a_service_does():
    job = "apiVersion: gpuctl/v1\nname: train\nimage: x\n"
    for extra in ("port: 80\n", "autoscale: {max: 2, rps: 1}\n", "replicas: 2\n"):
        assert "kind Service only" in refusal(job + extra)


def test_initial_replicas_sit_within_the_autoscalers_bounds():
    s = spec(BASE + "replicas: 1\nautoscale: {min: 3, max: 8, rps: 10}\n")
    (deploy, *_) = render(s, "gpu-type", serving.Target("ml"))
    assert deploy["spec"]["replicas"] == 3 and s.pods == 3


def test_the_shipped_example_renders_a_deployment_service_and_scaled_object():
    s, _ = load_job(os.path.join(ROOT, "examples", "inference-service.yaml"))
    objs = render(s)
    assert [o["kind"] for o in objs] == ["Deployment", "Service", "ScaledObject"]
    for obj in objs:
        valid(obj)


def test_the_hpa_reads_the_metric_the_adapter_rule_serves():
    s = spec(BASE + "autoscale: {max: 4, queue_depth: 8}\n")
    hpa = render(s, "gpu-type", serving.Target("ml", autoscaler=autoscale.HPA))[-1]
    promql = autoscale.query("chat", "ml", s.serving.autoscale)
    rule = autoscale.adapter_rule("chat", "ml", s.serving.autoscale, promql, mig=False)
    metric = hpa["spec"]["metrics"][0]["external"]
    assert metric["metric"]["name"] == rule["name"]["as"]
    assert metric["target"] == {"type": "Value", "value": "8"}
    assert rule["metricsQuery"] == promql


def test_render_prints_the_objects_and_for_an_hpa_the_adapter_rule_on_stderr(cli):
    path = os.path.join(ROOT, "examples", "inference-service.yaml")
    r = cli("render", path, "--autoscaler", "hpa", "-n", "ml")
    assert r.code == 0, r
    assert "kind: HorizontalPodAutoscaler" in r.out and "namespace: ml" in r.out
    assert "externalRules:" in r.err and "externalRules" not in r.out
    r = cli("render", path)
    assert r.code == 0 and "kind: ScaledObject" in r.out and "namespace: default" in r.out
    # only the allocation an offline render assumed
    assert r.err == (
        "classifier: GPUs as the device plugin's nvidia.com/gpu (no cluster read; "
        "--allocation dra asks through DRA ResourceClaims)\n"
    )


@pytest.mark.parametrize(
    "mode, keys", [("basic", ["username", "password"]), ("bearer", ["bearerToken"])]
)
def test_prometheus_credentials_come_from_a_secret_by_a_trigger_authentication(mode, keys):
    # KEDA's prometheus scaler (keda.sh/docs/2.20/scalers/prometheus): authModes in the
    # trigger's metadata, the credentials as TriggerAuthentication parameters of those names
    s = spec(
        BASE + "gpus: 1\nautoscale: {max: 4, gpu_busy: 60, prometheus: 'https://prom.corp:9090', "
        f"prometheus_auth: {{secret: prom-creds, mode: {mode}}}}}\n"
    )
    objs = render(s, "gpu-type", serving.Target("ml"))
    assert [o["kind"] for o in objs] == [
        "Deployment",
        "Service",
        "TriggerAuthentication",
        "ScaledObject",
    ]
    auth, so = objs[2], objs[3]
    for obj in (auth, so):
        assert_valid_cr(obj)  # KEDA's own CRDs (gpuctl/sim/crds)
    assert auth["spec"] == {
        "secretTargetRef": [{"parameter": k, "name": "prom-creds", "key": k} for k in keys]
    }
    (trigger,) = so["spec"]["triggers"]
    assert trigger["authenticationRef"] == {"name": auth["metadata"]["name"]}
    assert trigger["metadata"]["authModes"] == mode
    assert trigger["metadata"]["serverAddress"] == "https://prom.corp:9090"
    assert auth["metadata"]["labels"] == so["metadata"]["labels"]  # deleted with the service


@pytest.mark.parametrize(
    "url",
    [
        "https://admin:s3cr3t@prom.corp:9090",
        "https://s3cr3t@prom.corp:9090",
        "https://prom.corp:9090/?token=s3cr3t",
    ],
)
def test_a_prometheus_url_with_credentials_is_refused_and_not_repeated(url):
    message = refusal(BASE + f"gpus: 1\nautoscale: {{max: 4, gpu_busy: 60, prometheus: '{url}'}}\n")
    assert "svc.yaml:" in message and "autoscale.prometheus" in message
    assert "carries credentials" in message and "s3cr3t" not in message


def test_prometheus_auth_says_a_secret_and_a_mode_keda_knows():
    auth = "autoscale: {max: 4, rps: 5, prometheus_auth: %s}\n"
    assert "missing required field 'secret'" in refusal(BASE + auth % "{mode: basic}")
    assert "autoscale.prometheus_auth.mode" in refusal(BASE + auth % "{secret: s, mode: tls}")
    assert "a valid Secret name" in refusal(BASE + auth % "{secret: Not_A_Name}")
