"""`gpuctl mig` on a simulated node of another vendor's accelerators: MIG is NVIDIA's, so a
usage error says so (exit 2) instead of calling MI300X an unknown GPU model, before any
simulated node is opened; an NVIDIA node beside it is still read."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "args",
    [
        ("show", "--simulate", "8xMI300X"),
        ("profiles", "--simulate", "4xA100-40GB,4xMI300X"),
        ("export", "--simulate", "8xMI300X"),
    ],
)
def test_mig_on_amd_gpus_says_mig_is_nvidias(cli, args):
    r = cli("mig", *args)
    assert r.code == 2, r
    assert "MIG is NVIDIA's" in r.err and "unknown GPU model" not in r.err
    assert "compute and memory partition modes" in r.err


def test_the_environment_s_amd_node_is_refused_unless_the_option_names_an_nvidia_one(
    cli, monkeypatch
):
    monkeypatch.setenv("GPUCTL_SIMULATE", "8xMI300X")
    r = cli("mig", "show")
    assert r.code == 2 and "MIG is NVIDIA's" in r.err, r
    r = cli("mig", "show", "--simulate", "1xH100-80GB", "-o", "json")
    assert r.code == 0, r  # the option names this node: an NVIDIA one
