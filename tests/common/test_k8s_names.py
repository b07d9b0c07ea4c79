"""Kubernetes naming rules: whole-string matches and the API's length limits."""

import pytest

from gpuctl.common import k8s_names as n


@pytest.mark.parametrize(
    "check, good, bad",
    [
        (
            n.dns1123_label,
            ["a", "team-a", "0abc", "a" * 63],
            ["", "A", "-a", "a-", "a.b", "a" * 64, "train\n", "a_b"],
        ),
        (
            n.dns1123_subdomain,
            ["a.b", "high", "a" * 253],
            ["", "A.b", "a..b", ".a", "a" * 254, "high\n"],
        ),
        (n.dns1035_label, ["train", "a1"], ["1train", "", "Train", "train\n"]),
        (
            n.label_key,
            ["gpu-type", "nvidia.com/gpu.product", "a_b.C", "x/y"],
            ["", "/a", "a/", "bad key", "A.com/x", "a" * 64, "gpu-type\n", "a/b/c"],
        ),
        (
            n.label_value,
            ["", "a100", "NVIDIA-H100-80GB-HBM3", "a_b.c"],
            ["-a", "a-", "bad value", "a" * 64, "a100\n"],
        ),
    ],
)
def test_names(check, good, bad):
    assert [v for v in good if not check(v)] == []
    assert [v for v in bad if check(v)] == []
