"""The live cluster view against a real Prometheus: the figures Prometheus aggregates equal
those gpuctl computes from every GPU, a frame asks a constant number of queries and fetches
per-GPU values only for the rows on screen; and `--once -o json` decodes its answers as they
stream, in memory well below their size."""

import json
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.common.errors import BackendError
from gpuctl.dcgm import metrics
from gpuctl.dcgm.holders import Exporter
from gpuctl.top.cluster import service as cluster
from gpuctl.top.cluster.core import live, usage
from tests.clirun import run_gpuctl as gpuctl
from tests.cluster_data import A100, gpu, mixed_cluster, stranded_cluster

pytestmark = pytest.mark.integration  # Prometheus and stand-in servers

ROWS = 3


def live_frame(
    url: str, sort: str = "index", rows: int = ROWS, window: str = "10m", exp: Exporter = Exporter()
):
    client = Prometheus(url)
    found = cluster.figures(client, window, 5.0, exp, sort, rows)
    page = cluster.rows_on_screen(client, window, 5.0, exp, found, sort, rows)
    return found, page


def row(r: usage.ClusterGpuRow) -> str:
    return json.dumps(usage.gpus_out([r])[0]) + f" mean={r.mean_utilization}"


def assert_live_equals_full(
    url: str, sorts=live.SORT_KEYS, rows: int = ROWS, window="10m", exp: Exporter = Exporter()
):
    full = cluster.snapshot(Prometheus(url), window, 5.0, exp)
    for sort in sorts:
        found, page = live_frame(url, sort, rows, window, exp)
        s, f = found.summary, full.summary
        counts = ("gpus", "idle_gpus", "idle_allocated_gpus", "mig_gpus", "mig_slices",
                  "idle_mig_slices", "idle_allocated_mig_slices")  # fmt: skip
        assert [getattr(s, c) for c in counts] == [getattr(f, c) for c in counts]
        assert (s.request_shape, s.stranded_gpus) == (f.request_shape, f.stranded_gpus)
        assert s.mean_utilization == pytest.approx(f.mean_utilization)
        for mine, theirs in ((s.busiest, f.busiest), (s.idlest, f.idlest)):
            assert mine is not None and theirs is not None
            assert mine.node == theirs.node
            assert mine.mean_utilization == pytest.approx(theirs.mean_utilization)
        assert [
            (n.namespace, n.gpus, n.idle_gpus, n.mig_slices, n.idle_mig_slices)
            for n in found.namespaces
        ] == [
            (n.namespace, n.gpus, n.idle_gpus, n.mig_slices, n.idle_mig_slices)
            for n in full.namespaces
        ]
        assert [n.mean_utilization for n in found.namespaces] == pytest.approx(
            [n.mean_utilization for n in full.namespaces]
        )
        expected = live.page_rows(full.rows, sort, rows)
        if sort == "index":
            assert [row(r) for r in page] == [row(r) for r in expected]
        else:  # Prometheus breaks ties (topk): the same readings, each row one of the cluster's
            value = live.reading(sort)
            assert [value(r) for r in page] == [value(r) for r in expected], sort
            assert {row(r) for r in page} <= {row(r) for r in full.rows}, sort


def test_live_figures_equal_the_full_frame(prometheus_with):
    """Both host label spellings, a GPU scraped twice, MIG devices, idle and held GPUs."""
    assert_live_equals_full(prometheus_with(mixed_cluster()).url)


def test_live_figures_count_dra_claimed_gpus_as_the_rows_do(prometheus_with):
    """GPUs whose series name no pod (dcgm-exporter without --kubernetes-enable-dra) but a
    DRA claim allocates (Exporter.claimed, read from the cluster's ResourceClaims) are held
    by the claim's pod in the figures as in the rows: idle held, per namespace, the request
    shape and the stranded GPUs; a pod the series names stands."""
    node_d = [gpu("Hostname", "node-d", i, util) for i, util in enumerate((1, 80, 2, 0, 0))]
    node_e = [
        gpu("Hostname", "node-e", 0, util, model=A100, mig=(gi, "3g.40gb", 40192))
        for gi, util in ((1, 1), (2, 50))
    ]
    server = prometheus_with(mixed_cluster() + sum(node_d + node_e, []))
    claimed = {
        "GPU-node-d-0000": ("ml", "dra-0"),  # idle
        "GPU-node-d-0001": ("ml", "dra-0"),  # busy: dra-0 holds 2
        "GPU-node-d-0002": ("team-b", "dra-1"),  # idle
        "GPU-node-a-0000": ("other", "x"),  # its series name ml/train-0: that stands
        "MIG-4d3b1c5e-94a1-5f6e-9a7c-1f0e2d3c4b5a": ("ml", "mig-0"),  # no series has it
    }
    # one pod holds both 3g.40gb devices of node-e's GPU (DraView.mig_holders)
    exp = Exporter(claimed=claimed, claimed_mig={("GPU-node-e-0000", "3g.40gb"): ("team-b", "m")})
    assert_live_equals_full(server.url, exp=exp)
    found, _ = live_frame(server.url, exp=exp)
    plain, _ = live_frame(server.url)
    s = found.summary
    assert s.idle_allocated_gpus == plain.summary.idle_allocated_gpus + 2
    assert s.idle_allocated_mig_slices == plain.summary.idle_allocated_mig_slices + 1
    team_b = {n.namespace: n for n in found.namespaces}["team-b"]
    assert (team_b.gpus, team_b.mig_slices) == (1, 2)
    assert "other" not in {n.namespace for n in found.namespaces}


def profiling_only(series: list) -> list:
    """A whole GPU's series from an exporter whose counters file has the profiling fields
    but not DCGM_FI_DEV_GPU_UTIL: its engine activity is its busy signal."""
    return [s for s in series if s.name != "DCGM_FI_DEV_GPU_UTIL"]


def test_live_figures_judge_a_gpu_by_the_one_busy_signal_rule(prometheus_with):
    """SM_ACTIVE, else GR_ENGINE_ACTIVE, else GPU_UTIL (whole GPUs): a whole GPU reporting
    only its engine activity counts in the live figures as in the full frame."""
    data = mixed_cluster() + profiling_only(
        gpu("Hostname", "node-p", 0, 70, pod="prof-0", namespace="ml")
        + gpu("Hostname", "node-p", 1, 1, pod="prof-1", namespace="ml")
    )
    server = prometheus_with(data)
    full = cluster.snapshot(Prometheus(server.url), "10m", 5.0, Exporter())
    [busy, idle] = [r for r in full.rows if r.node == "node-p"]
    assert (busy.utilization_gpu, busy.idle, idle.idle) == (pytest.approx(70.0), False, True)
    assert_live_equals_full(server.url)


def test_live_figures_follow_the_window(prometheus_with):
    server = prometheus_with(mixed_cluster())
    assert_live_equals_full(server.url, sorts=("index", "idle"), window="30m")


def test_live_stranded_figure(prometheus_with):
    """Most pods hold 2 GPUs: s1's last free GPU can take none of them; s2's two can."""
    server = prometheus_with(stranded_cluster())
    found, _ = live_frame(server.url)
    assert (found.summary.request_shape, found.summary.stranded_gpus) == (2, 1)
    assert_live_equals_full(server.url, sorts=("index",), rows=12)


@pytest.fixture(scope="module")
def clusters():
    """8 GPUs on 4 nodes, and 480 GPUs on 60 nodes, each in a Prometheus."""
    from tests.standins.prometheus import load_blocks, start_prometheus

    big = [
        s
        for n in range(60)
        for i in range(8)
        for s in gpu(
            "Hostname",
            f"big-{n}",
            i,
            (7 * n + 3 * i) % 100,
            pod=f"p{n}-{i}",
            namespace=f"team-{n % 5}",
        )
    ]
    servers = [start_prometheus(load_blocks(data, time.time())) for data in (mixed_cluster(), big)]
    yield servers
    for s in servers:
        s.stop()


@pytest.mark.parametrize("sort", ["index", "util"])
def test_queries_per_frame_do_not_grow_with_the_cluster(clusters, sort):
    asked = []
    for server in clusters:
        before = server.query_requests()
        live_frame(server.url, sort)
        asked.append(server.query_requests() - before)
    assert asked == [4, 4]  # the figures, then current/attributes/window for the rows


@pytest.mark.parametrize("sort", ["index", "util", "idle"])
def test_only_the_rows_on_screen_are_fetched(clusters, query_server, sort):
    """Through a recording stand-in in front of Prometheus: the answers for per-GPU values
    hold the nodes of the 3 rows on screen only; the figures are per node at most."""
    big = clusters[1]
    recorder = query_server(upstream=big.url)
    found, page = live_frame(recorder.url, sort)
    assert len(page) == ROWS and found.summary.gpus == 480
    figures, *per_gpu = recorder.exchanges
    assert "label_replace(" in figures[0] and len(per_gpu) == 3
    shown = {r.node for r in page}
    uuids = {r.uuid for r in page}
    for _, body in per_gpu:
        for series in json.loads(body)["data"]["result"]:
            labels = series["metric"]
            node = labels.get("Hostname") or labels["UUID"].rsplit("-", 1)[0].removeprefix("GPU-")
            assert node in shown, (node, shown)
    # At most the GPUs of the nodes on screen (8 each): per GPU a series of each metric a
    # row reads (7 of them under the default counters), its attributes and its mean.
    assert sum(len(json.loads(b)["data"]["result"]) for _, b in per_gpu) <= 9 * 8 * len(shown)
    assert len(shown) <= ROWS and uuids <= {f"GPU-{n}-{i:04d}" for n in shown for i in range(8)}
    assert len(json.loads(figures[1])["data"]["result"]) <= 2 * 60 * 2 + 30  # per node, not GPU


def test_once_sorts_too(prometheus_with, capsys):
    server = prometheus_with(mixed_cluster())
    code, out, err = gpuctl(
        capsys, "top", "--prometheus", server.url, "-o", "json", "--sort", "idle"
    )
    assert code == 0, err
    first = [(g["node"], g["gpu"]) for g in json.loads(out)["gpus"][:4]]
    # the lowest mean first: 0 %, then 1 % and 1 % (node order), 2 %
    assert first == [("node-a", "3"), ("node-10", "0/mig2"), ("node-a", "1"), ("node-a", "2")]
    code, out, err = gpuctl(capsys, "top", "--prometheus", server.url, "--sort", "bogus")
    assert code == 2 and "--sort: unknown key 'bogus'" in err


# ---- --once -o json streams ----------------------------------------------------------------

DEVICES = 2000
PAD = "x" * 2000  # long labels on every series, as an exporter could add


def synthetic_answers():
    """What a Prometheus could answer the snapshot's three queries with, 7 series a GPU."""

    def encode(result) -> bytes:
        doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return json.dumps(doc, separators=(",", ":")).encode()

    def labels(d: int, **more) -> dict:
        return {
            "UUID": f"GPU-{d:05d}",
            "Hostname": f"node-{d // 8}",
            "gpu": str(d % 8),
            "pad": PAD,
            **more,
        }

    current = [
        {"metric": labels(d, __name__=name), "value": [1.0, str(value)]}
        for d in range(DEVICES)
        for name, value in (
            (metrics.UTIL, d % 100),
            (metrics.FB_USED, 1000),
            (metrics.FB_FREE, 79000),
            (metrics.TEMP, 50),
            (metrics.POWER, 300.5),
        )
    ]
    attributes = [
        {
            "metric": labels(d, modelName="NVIDIA H100 80GB HBM3", pod=f"p{d}", namespace="ml"),
            "value": [1.0, "1"],
        }
        for d in range(DEVICES)
    ]
    means = [{"metric": labels(d), "value": [1.0, str(d % 100)]} for d in range(DEVICES)]
    return {"current": encode(current), "attributes": encode(attributes), "window": encode(means)}


def test_once_json_decodes_as_it_streams_in_bounded_memory(query_server, capsys):
    answers = synthetic_answers()

    def answer(query: str) -> bytes:
        if "avg_over_time" in query:
            return answers["window"]
        return answers["current" if query.startswith("max by (__name__") else "attributes"]

    server = query_server(answer)
    size = sum(len(a) for a in answers.values())
    assert gpuctl(capsys, "top", "--prometheus", server.url, "-o", "json")[0] == 0  # imports
    tracemalloc.start()
    try:
        code, out, err = gpuctl(capsys, "top", "--prometheus", server.url, "-o", "json")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        for body in answers.values():  # the same answers decoded whole
            json.loads(body)
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["gpus"]) == DEVICES and doc["summary"]["gpus"] == DEVICES
    assert doc["gpus"][0]["memory_total_mib"] == 80000 and doc["gpus"][0]["pod"] == "p0"
    assert peak < size / 4, (peak, size)  # the answers were never held whole
    assert whole > size  # ...as decoding them whole would need


def test_a_malformed_streamed_sample_is_one_error(query_server, capsys):
    body = b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"gpu":3},"value":[1,"5"]}]}}'
    server = query_server(lambda q: body)
    code, out, err = gpuctl(capsys, "top", "--prometheus", server.url, "--once")
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.startswith("gpuctl: error: Prometheus at ") and "malformed sample" in err


@pytest.mark.parametrize(
    "sample",
    [
        b'{"metric":{"figure":"shapes"},"value":[1,"3"]}',  # no "n" label
        b'{"metric":{"figure":"free","n":"many"},"value":[1,"3"]}',
        b'{"metric":{"figure":"idle_held"},"value":[1,"NaN"]}',
    ],
)
def test_figures_gpuctl_cannot_read_end_the_first_frame_with_one_error(query_server, sample):
    """The first live frame waits for the figures: an answer they cannot be read from must
    end that wait with an error naming Prometheus, never leave it waiting."""
    head = b'{"status":"success","data":{"resultType":"vector","result":['
    node = b'{"metric":{"figure":"node_count","Hostname":"a","idle":"0"},"value":[1,"1"]},'
    server = query_server(lambda q: head + node + sample + b"]}}")
    frames = cluster.LiveFrames(Prometheus(server.url), "10m", 5.0, Exporter(), "util", 0.2)
    waiting = ThreadPoolExecutor(1)
    try:
        first = waiting.submit(frames.frame, 4)  # a wait that never ends fails, not hangs
        with pytest.raises(BackendError, match="cluster figures with a sample gpuctl cannot read"):
            first.result(timeout=30)
    finally:
        frames.close()
        waiting.shutdown(wait=False)


def test_live_frames_refresh_the_figures_in_the_background(prometheus_with):
    """A small cluster's figures take milliseconds: refreshed about every frame, while each
    frame fetches its rows; a Prometheus gone makes the next frame fail (the view keeps the
    last one and says it is stale)."""
    server = prometheus_with(mixed_cluster())
    frames = cluster.LiveFrames(Prometheus(server.url), "10m", 5.0, Exporter(), "util", 0.2)
    try:
        deadline, seen = time.monotonic() + 30, []
        while frames.refreshes < 3 and time.monotonic() < deadline:
            frame, age = frames.frame(4)
            seen.append(([r.utilization_gpu for r in frame.rows], age))
            time.sleep(0.2)
        assert frames.refreshes >= 3 and all(age < 10 for _, age in seen)
        assert all(utils == [90.0, 60.0, 50.0, 40.0] for utils, _ in seen)
        # while it shuts down it may still answer: 503, or 422 from a query of its closing
        # storage (`execution: open block querier ...`), in a refresh under way meanwhile
        server.stop()
        with pytest.raises(BackendError, match="cannot reach Prometheus|answered HTTP (503|422)"):
            frames.frame(4)
    finally:
        frames.close()
