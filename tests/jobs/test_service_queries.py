"""A service's autoscaling queries against a real Prometheus holding DCGM-exporter series
(in each scrape setup's labels) and the batcher's own series: each query yields its own
service's value, per replica, and nothing of another service's; an overloaded service's
value crosses its target."""

import urllib.parse

import pytest

from gpuctl.batching.metrics import MetricsRecorder
from gpuctl.common import batcher_metrics as names
from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.core import autoscale, serving
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.core.spec import parse_job
from tests.cluster_data import gpu
from tests.standins.prometheus import Series

pytestmark = pytest.mark.integration

NS = "ml"
POD_1, POD_2, POD_3 = "chat-7d9f8b6c4-x2x9k", "chat-7d9f8b6c4-q5w2z", "chat-6b4c8d5f7-t7xdn"
OTHER_SERVICE = "chat-v2-55fdd4b9c-zwzwz"  # chat-v2's pod, in the same namespace
OTHER_NAMESPACE = "chat-7d9f8b6c4-bbbbb"  # a service called chat elsewhere
EXPORTER = {"pod": "nvidia-dcgm-exporter-k8x2p", "namespace": "gpu-operator"}


def exported(pod, namespace):
    """The labels under a ServiceMonitor with honorLabels false (the GPU Operator's)."""
    return {
        **EXPORTER,
        "container": "nvidia-dcgm-exporter",
        "exported_pod": pod,
        "exported_namespace": namespace,
        "exported_container": "main",
    }


def dcgm_series():
    series = []
    # POD_1 holds two whole GPUs (90 % and 70 %: its mean 80), labelled as the GPU
    # Operator's ServiceMonitor relabels them; one of them is scraped twice
    series += gpu("Hostname", "node-a", 0, 90, extra=exported(POD_1, NS))
    series += gpu("Hostname", "node-a", 1, 70, extra=exported(POD_1, NS))
    series += [
        Series(s.name, {**s.labels, "instance": "10.9.9.9:9400"}, s.value)
        for s in gpu("Hostname", "node-a", 1, 70, extra=exported(POD_1, NS))
    ]
    # POD_2 on one GPU at 40 %, with the holder's labels as they are (honorLabels true)
    series += gpu("Hostname", "node-b", 0, 40, pod=POD_2, namespace=NS)
    # POD_3 on a MIG slice, busy half the time (GR_ENGINE_ACTIVE 0.5)
    series += gpu("Hostname", "node-c", 0, 50, pod=POD_3, namespace=NS, mig=(1, "1g.10gb", 9856))
    # not the service's: another service's pod, the same name elsewhere, a free GPU
    series += gpu("Hostname", "node-b", 1, 100, pod=OTHER_SERVICE, namespace=NS)
    series += gpu("Hostname", "node-d", 0, 100, pod=OTHER_NAMESPACE, namespace="other")
    series += gpu(
        "Hostname", "node-d", 1, 100, extra={**EXPORTER, "container": "nvidia-dcgm-exporter"}
    )
    return series


def batcher_series(pod, namespace, queue, rps, latency_s):
    """What Prometheus scrapes from one replica's gpuctl.batching.prometheus endpoint: the
    queue gauge, and counters growing at RPS requests a second of LATENCY_S each."""
    labels = {"namespace": namespace, "pod": pod, "container": "main", "job": "ml/chat"}

    def counter(per_second):
        return lambda age: per_second * (1800 - age)

    return [
        Series(names.QUEUE_DEPTH, labels, queue),
        Series(names.REQUESTS, labels, counter(rps)),
        Series(names.LATENCY + "_count", labels, counter(rps)),
        Series(names.LATENCY + "_sum", labels, counter(rps * latency_s)),
    ]


@pytest.fixture(scope="module")
def value():
    """`value(promql)`: the one value an instant query yields, evaluated when the loaded data
    ends. Evaluated later (a slow start under load), `rate` would be past the newest sample
    by more than a scrape interval, extrapolate less and read low."""
    import time

    from tests.standins.prometheus import load_blocks, start_prometheus

    series = dcgm_series()
    series += batcher_series(POD_1, NS, queue=10, rps=5, latency_s=0.2)
    series += batcher_series(POD_2, NS, queue=30, rps=15, latency_s=0.3)
    series += batcher_series(OTHER_SERVICE, NS, queue=500, rps=900, latency_s=9)
    series += batcher_series(OTHER_NAMESPACE, "other", queue=700, rps=900, latency_s=9)
    now = time.time()
    server = start_prometheus(load_blocks(series, now))

    def value(promql):
        query = urllib.parse.urlencode({"query": promql, "time": f"{now:.3f}"})
        answer = server.api("/api/v1/query?" + query)
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        assert len(result) <= 1, result  # KEDA refuses a query with several series
        return float(result[0]["value"][1]) if result else None

    yield value
    server.stop()


def trigger_query(name, signal, target):
    """The query of the ScaledObject `gpuctl render` makes for service NAME."""
    text = (
        f"apiVersion: gpuctl/v1\nkind: Service\nname: {name}\nimage: x\nport: 80\n"
        f"autoscale: {{max: 8, {signal}: {target}}}\n"
    )
    so = render(parse_job(load_yaml(text, "s.yaml")), "gpu-type", serving.Target(NS))[-1]
    return so["spec"]["triggers"][0]["metadata"]["query"]


@pytest.mark.parametrize(
    "signal, target, expected",
    [
        # per pod: (90+70)/2 = 80, 40, 50 (the MIG slice); their mean
        ("gpu_busy", 50, (80 + 40 + 50) / 3),
        ("queue_depth", 16, (10 + 30) / 2),  # queued per replica
        ("rps", 5, (5 + 15) / 2),  # requests per second per replica
        ("latency_ms", 200, 1000 * (5 * 0.2 + 15 * 0.3) / (5 + 15)),  # mean of every request
    ],
)
def test_the_query_yields_the_services_own_load_and_crosses_its_target(
    value, signal, target, expected
):
    got = value(trigger_query("chat", signal, target))
    assert got == pytest.approx(expected, rel=1e-3)
    assert got > target  # overloaded: KEDA (or the HPA) adds replicas


@pytest.mark.parametrize("signal", ["gpu_busy", "queue_depth", "rps", "latency_ms"])
def test_another_service_gets_its_own_value_and_an_idle_one_none(value, signal):
    other = value(trigger_query("chat-v2", signal, 1))
    expected = {"gpu_busy": 100, "queue_depth": 500, "rps": 900, "latency_ms": 9000}[signal]
    assert other == pytest.approx(expected, rel=1e-3)
    assert value(trigger_query("idle", signal, 1)) is None  # KEDA reads no value as 0


def test_the_adapter_rule_serves_the_same_value(value):
    text = "apiVersion: gpuctl/v1\nkind: Service\nname: chat\nimage: x\nport: 80\nautoscale: {max: 8, gpu_busy: 50}\n"
    s = parse_job(load_yaml(text, "s.yaml"))
    promql = autoscale.query("chat", NS, s.serving.autoscale)
    rule = autoscale.adapter_rule("chat", NS, s.serving.autoscale, promql, mig=False)
    assert value(rule["seriesQuery"].replace("{", "count({", 1) + ")") > 0  # it is listed
    assert value(rule["metricsQuery"]) == pytest.approx((80 + 40 + 50) / 3, rel=1e-3)


def test_the_batchers_exposition_is_what_the_queries_read():
    """The names the queries read are those gpuctl.batching.prometheus writes."""
    from prometheus_client.parser import text_string_to_metric_families

    from gpuctl.batching.prometheus import exposition

    recorder = MetricsRecorder()
    recorder.dispatched([0.001, 0.002])
    recorder.finished(0.01, ok=True, latencies=[0.011, 0.012])
    text = exposition(recorder.snapshot(queue_depth=3, max_queue=64, in_flight=0))
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[names.QUEUE_DEPTH].value == 3
    assert samples[names.REQUESTS].value == 2
    assert samples[names.LATENCY + "_count"].value == 2
    assert samples[names.LATENCY + "_sum"].value == pytest.approx(0.023)
