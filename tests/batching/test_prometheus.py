"""The batcher's metrics as Prometheus exposition text, read back by prometheus_client's
parser: cumulative buckets at the right bounds, one labelled series per batcher."""

from prometheus_client.parser import text_string_to_metric_families

from gpuctl.batching.metrics import MetricsRecorder
from gpuctl.batching.prometheus import exposition
from gpuctl.common import batcher_metrics as names


def snapshot(waits, runs, sizes=()):
    r = MetricsRecorder()
    for size in sizes:
        r.dispatched([0.0] * size)
    if waits:
        r.dispatched(waits)
    for run in runs:
        r.finished(run, ok=True, latencies=[run])
    return r.snapshot(queue_depth=0, max_queue=8, in_flight=0)


def samples(text):
    return [s for f in text_string_to_metric_families(text) for s in f.samples]


def bucket(text, name, le, **labels):
    (s,) = [
        s
        for s in samples(text)
        if s.name == name + "_bucket" and s.labels.get("le") == le
        and all(s.labels.get(k) == v for k, v in labels.items())
    ]  # fmt: skip
    return s.value


def test_time_buckets_are_cumulative_at_their_bounds():
    text = exposition(snapshot(waits=[0.0004, 0.001, 0.003, 20.0], runs=[0.02, 0.2]))
    assert bucket(text, names.WAIT, "0.0005") == 1
    assert bucket(text, names.WAIT, "0.001") == 2  # a bound holds its own value (le)
    assert bucket(text, names.WAIT, "0.005") == 3
    assert bucket(text, names.WAIT, "10.0") == 3
    assert bucket(text, names.WAIT, "+Inf") == 4  # past the last bound
    assert bucket(text, names.RUN, "0.025") == 1 and bucket(text, names.RUN, "0.25") == 2
    assert bucket(text, names.LATENCY, "+Inf") == 2


def test_batch_sizes_by_powers_of_two():
    text = exposition(snapshot(waits=[], runs=[], sizes=(1, 3, 8, 9)))
    assert [bucket(text, names.BATCH_SIZE, le) for le in ("1.0", "2.0", "4.0", "8.0", "16.0")] == [
        1, 1, 2, 3, 4,
    ]  # fmt: skip
    (total,) = [s.value for s in samples(text) if s.name == names.BATCH_SIZE + "_sum"]
    assert total == 21


def test_several_batchers_are_told_apart_by_their_labels():
    a, b = snapshot([0.001], []), snapshot([0.001, 0.002], [])
    text = exposition((a, {"model": "a"}), (b, {"model": 'b"\\\n'}))
    requests = {s.labels["model"]: s.value for s in samples(text) if s.name == names.REQUESTS}
    assert requests == {"a": 1, 'b"\\\n': 2}
