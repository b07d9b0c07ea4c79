"""`jobs why` points to make-room when a job waits for room that moves could make: the
nodes it may use have enough GPUs free in total, but no node enough for a worker."""

from gpuctl.jobs.diagnose import _scattered
from gpuctl.k8s.fit import check_fit
from gpuctl.k8s.placement import Placement
from tests.reclaim.test_room import fragmented, node


def _gpus(per_worker: int) -> Placement:
    return Placement("nvidia.com/gpu", per_worker)


def test_scattered_free_gpus_point_to_make_room():
    nodes, pods = fragmented()  # 10 GPUs free over 4 nodes, at most 5 on one
    report = check_fit(nodes, pods, _gpus(8), 1, [])
    assert not report.fits_now and _scattered(report)


def test_not_when_it_fits_or_when_the_gpus_are_not_there():
    nodes, pods = fragmented()
    assert not _scattered(check_fit(nodes, pods, _gpus(4), 1, []))
    assert not _scattered(check_fit(nodes, pods, _gpus(8), 2, []))  # 16 > 10 free
    assert not _scattered(check_fit([node("small", 4)], [], _gpus(8), 1, []))
