"""Partitionable devices (KEP-4815): a pool's shared counters limit which of its devices are
free together (gpuctl.gpus.dra), on a partitionable A100 as NVIDIA's DRA driver publishes it
with DynamicMIG (tests/data/dra/partitionable, citing its source); and the fit check counts
what the counters leave, keeping "not now" apart from "never"."""

from __future__ import annotations

import os

import pytest
import yaml

from gpuctl.gpus import dra
from tests.gpu_cluster import node, seed
from tests.gpus.test_dra import CLASSES, DIR, allocated, rows
from tests.jobs.test_submit import write

NODE = "a100-dynmig-1"
SLICES = [d for d in yaml.safe_load_all(open(os.path.join(DIR, "partitionable", "nvidia-a100-dynamic-mig.yaml"))) if d]  # fmt: skip
MIB = 1 << 20


def free_by_profile(view: dra.DraView) -> dict[str | None, tuple[int, int, int]]:
    """partition → (count, allocated, free) on the node."""
    return {a.partition: (a.count, a.allocated, a.free) for a in view.accelerators(NODE)}


def test_free_devices_are_those_the_counters_leave_room_for():
    view = dra.view(CLASSES, SLICES)
    # nothing held: each kind is free alone (a claim of one kind could take them all)
    assert free_by_profile(view) == {None: (1, 0, 1), "1g.10gb": (4, 0, 4), "7g.40gb": (1, 0, 1)}
    # one 1g.10gb held: its memory slices are gone, so the whole GPU and the 7g.40gb are not free
    held = dra.view(CLASSES, SLICES, [allocated("ml", "one", ("gpu.nvidia.com", NODE, "gpu-0-mig-1g10gb-15-2"), device_class="mig.nvidia.com")])  # fmt: skip
    assert free_by_profile(held) == {None: (1, 0, 0), "1g.10gb": (4, 1, 3), "7g.40gb": (1, 0, 0)}
    (whole,) = [a for a in held.accelerators(NODE) if a.partition is None]
    assert whole.to_dict()["blocked"] == 1
    # the whole GPU held: nothing else is
    gpu = dra.view(CLASSES, SLICES, [allocated("ml", "all", ("gpu.nvidia.com", NODE, "gpu-0"))])
    assert free_by_profile(gpu) == {None: (1, 1, 0), "1g.10gb": (4, 0, 0), "7g.40gb": (1, 0, 0)}


def test_devices_sharing_counters_are_no_problem_and_rows_keep_their_memory():
    view = dra.view(CLASSES, SLICES)
    assert view.problems(NODE) == ()  # the counters keep the GPU and its MIG devices apart
    assert ("nvidia", "A100-40GB", "mig.nvidia.com", "1g.10gb", 4, 0, 4, 9984 * MIB) in rows(
        view, NODE
    )


def test_a_counter_set_the_pool_does_not_publish_limits_nothing():
    (_, devices) = SLICES
    view = dra.view(CLASSES, [devices])  # the counters' slice missing
    assert free_by_profile(view)["1g.10gb"] == (4, 0, 4)
    assert view.problems(NODE) == ("pool a100-dynmig-1 of gpu.nvidia.com: 1 of 2 ResourceSlices of generation 1 published",)  # fmt: skip


@pytest.mark.integration
def test_the_fit_check_counts_what_the_counters_leave(cli, kube, kube_api, tmp_path):
    seed(kube_api, node(NODE, 0, gfd=False), *CLASSES, *SLICES)
    path = write(tmp_path, "name: train\nimage: x\nmig: 1g.10gb\ngpu_type: a100\nnodes: 4\n")
    r = cli("submit", path, "--dry-run", "--multinode", "indexed-job")
    assert r.code == 0 and "can never fit" not in r.err, r
    seed(kube_api, allocated("default", "big", ("gpu.nvidia.com", NODE, "gpu-0-mig-7g40gb-0-0"), device_class="mig.nvidia.com"))  # fmt: skip
    r = cli("submit", path, "--dry-run", "--multinode", "indexed-job")
    # the 7g.40gb holds every memory slice: no 1g.10gb is free now, yet all four fit later
    assert "can never fit" not in r.err and "0 of 4 matching devices free" in r.err, r
    r = cli("submit", write(tmp_path, "name: train\nimage: x\nmig: 1g.10gb\ngpu_type: a100\nnodes: 5\n"), "--dry-run", "--multinode", "indexed-job")  # fmt: skip
    assert r.code == 1 and "can never fit" in r.err, r


def test_the_sandbox_s_scheduler_allocates_within_the_counters():
    from gpuctl.k8s.claims import MIG_CLASS, Choice, ClaimRequest
    from gpuctl.sim import dra_driver

    profile = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    four = ClaimRequest((Choice("gpu", MIG_CLASS, (profile,)),), 4)
    results = dra_driver.allocate(dra.view(CLASSES, SLICES), four, NODE)
    assert [r["device"] for r in results or []] == [f"gpu-0-mig-1g10gb-15-{p}" for p in (0, 2, 4, 6)]  # fmt: skip
    held = [allocated("ml", "big", ("gpu.nvidia.com", NODE, "gpu-0-mig-7g40gb-0-0"), device_class=MIG_CLASS)]  # fmt: skip
    one = ClaimRequest((Choice("gpu", MIG_CLASS, (profile,)),), 1)
    assert dra_driver.allocate(dra.view(CLASSES, SLICES, held), one, NODE) is None
