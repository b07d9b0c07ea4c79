"""Frame building for `gpuctl top` (pure): bars, N/A, levels, sorting, process rows, JSON shape."""

import json

import pytest

from gpuctl.gpus.sample import GpuSample, MigDevice, NodeSample, Process, to_dict
from gpuctl.top.node.core import frame as topframe


def gpu(index, util=50, used=1000, total=81559, temp=50, power=300.0, mig=0, pending=None, **kw):
    return GpuSample(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA H100 80GB HBM3",
        utilization_gpu=util,
        utilization_memory=util,
        memory_used_mib=used,
        memory_total_mib=total,
        temperature_c=temp,
        power_w=power,
        power_limit_w=700.0,
        fan_percent=None,
        clock_sm_mhz=1980,
        clock_mem_mhz=2619,
        mig_mode=mig,
        mig_mode_pending=mig if pending is None else pending,
        **kw,
    )


def test_bar_lengths():
    assert topframe.bar(0, 4) == "    "
    assert topframe.bar(1, 4) == "████"
    assert topframe.bar(0.5, 4) == "██  "
    assert topframe.bar(1 / 16, 2) == "▏ "
    assert topframe.bar(2.0, 3) == "███"  # clipped
    assert topframe.bar(None, 3) == "···"
    assert all(len(topframe.bar(f / 100, 7)) == 7 for f in range(101))


def test_missing_readings_are_na():
    g = GpuSample(
        index=0,
        uuid=None,
        name=None,
        utilization_gpu=None,
        utilization_memory=None,
        memory_used_mib=None,
        memory_total_mib=None,
        temperature_c=None,
        power_w=None,
        power_limit_w=None,
        fan_percent=None,
        clock_sm_mhz=None,
        clock_mem_mhz=None,
        mig_mode=None,
        mig_mode_pending=None,
    )
    row = topframe.build_frame(NodeSample([g])).gpus[0]
    for c in (row.name, row.mig, row.util, row.memory, row.temp, row.power, row.fan, row.clocks):
        assert (c.text, c.level) == ("N/A", topframe.NONE)
    assert set(row.util_bar.text) == {"·"}


def test_levels_follow_thresholds():
    frame = topframe.build_frame(
        NodeSample(
            [
                gpu(0, util=0, used=0, temp=40, power=60.0),
                gpu(1, util=80, used=60000, temp=80, power=650.0),
                gpu(2, util=100, used=78000, temp=90, power=700.0),
            ]
        )
    )
    levels = [(r.util.level, r.memory.level, r.temp.level, r.power.level) for r in frame.gpus]
    assert levels == [
        ("idle", "ok", "ok", "ok"),
        ("ok", "warn", "warn", "warn"),
        ("ok", "crit", "crit", "warn"),
    ]
    assert frame.gpus[1].memory.text == "58.6/79.6G" and frame.gpus[1].power.text == "650/700W"
    assert frame.gpus[0].name.text == "H100 80GB HBM3"


def test_pending_mig_mode_is_flagged():
    frame = topframe.build_frame(NodeSample([gpu(0, mig=0, pending=1), gpu(1, mig=1)]))
    assert (frame.gpus[0].mig.text, frame.gpus[0].mig.level) == ("Off→On*", "warn")
    assert frame.gpus[1].mig.text == "On"
    assert "pending a GPU reset" in frame.summary
    assert "pending" not in topframe.build_frame(NodeSample([gpu(0)])).summary


@pytest.mark.parametrize(
    "sort,order",
    [
        ("index", [0, 1, 2, 3]),
        ("util", [2, 0, 3, 1]),
        ("memory", [1, 3, 0, 2]),
        ("temp", [3, 1, 0, 2]),
        ("power", [0, 1, 2, 3]),
    ],
)
def test_sorting(sort, order):
    sample = NodeSample(
        [
            gpu(0, util=40, used=100, temp=50, power=400.0),
            gpu(1, util=None, used=9000, temp=60, power=300.0),
            gpu(2, util=90, used=10, temp=40, power=None),
            gpu(3, util=40, used=500, temp=70, power=None),
        ]
    )
    assert [r.index for r in topframe.build_frame(sample, sort=sort).gpus] == order
    with pytest.raises(ValueError):
        topframe.build_frame(sample, sort="name")


def test_mig_rows_and_process_rows():
    g = gpu(
        0,
        util=None,
        mig=1,
        mig_devices=[
            MigDevice(1, 0, "MIG-a", "3g.40gb", 5000, 40448, 4, 4),
            MigDevice(2, 0, "MIG-b", "1g.10gb", 0, 9856, None, None),
        ],
        processes=[Process(11, "small", "ann", 100, 1, 0), Process(12, "big", None, 4900, 1, 0)],
    )
    h = gpu(1, processes=[Process(13, None, "bob", None)])
    frame = topframe.build_frame(NodeSample([g, h]))
    (m1, m2) = frame.gpus[0].mig_rows
    assert (m1.label, m1.profile.text, m1.placement.text, m1.processes) == (
        "1/0",
        "3g.40gb",
        "4:4",
        2,
    )
    assert (m2.placement.text, m2.processes) == ("N/A", 0)
    assert [(p.gpu, p.pid, p.user, p.memory.text, p.name) for p in frame.processes] == [
        ("0:1/0", 12, "N/A", "4,900 MiB", "big"),
        ("0:1/0", 11, "ann", "100 MiB", "small"),
        ("1", 13, "bob", "N/A", "N/A"),
    ]
    assert frame.summary.startswith("2 GPUs: 2 busy, 0 idle; 3 processes")


def test_json_shape_has_the_documented_fields():
    sample = NodeSample([gpu(0, processes=[Process(5, "p", "u", 10)])], driver_version="1.2")
    data = json.loads(json.dumps(to_dict(sample)))
    g = data["gpus"][0]
    for key in (
        "index",
        "uuid",
        "name",
        "utilization_gpu",
        "utilization_memory",
        "memory_used_mib",
        "memory_total_mib",
        "temperature_c",
        "power_w",
        "power_limit_w",
        "mig_mode",
        "mig_devices",
        "processes",
    ):
        assert key in g
    assert g["fan_percent"] is None
    assert g["processes"] == [
        {"pid": 5, "name": "p", "user": "u", "used_memory_mib": 10, "gi_id": None, "ci_id": None}
    ]
