"""DRA's CEL selectors (gpuctl.gpus.dra_cel) on real devices (tests/data/dra): the Kubernetes
CEL library functions selectors use (quantity, semver), the environment's rules (a domain a
device lacks is empty, a missing attribute is an error), and one evaluation per distinct
value of what a selector reads."""

from __future__ import annotations

import copy

import pytest

from gpuctl.gpus import dra
from gpuctl.gpus.dra_cel import SelectorError, selector, version
from tests.gpus.test_dra import CLASSES, SLICES

DEVICES = dra.view(CLASSES, SLICES).devices
BY_NAME = {(d.pool, d.name): d for d in DEVICES}
T4 = BY_NAME[("harpatil4220c-g9kfm-gpu-c-rd8r8", "gpu-0")]
MIG = BY_NAME[("aks-migpool-68842551-vmss000001", "gpu-0-mig-19-2-1")]
AMD = BY_NAME[("gpu-operator-2", "gpu-32-160")]
NV = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"


@pytest.mark.parametrize(
    ("expression", "device", "expected"),
    [
        (f"{CAP}.memory.isGreaterThan(quantity('14Gi'))", T4, True),
        (f"{CAP}.memory.isGreaterThan(quantity('15Gi'))", T4, False),
        (f"{CAP}.memory.compareTo(quantity('16106127360')) == 0", T4, True),
        (f"{CAP}.memory.isLessThan(quantity('10Gi'))", MIG, True),
        (f"{CAP}.memory.isLessThan(quantity('10G'))", MIG, False),  # 9728Mi: above 10^10 bytes
        (f"{CAP}.memory.asInteger() == 10200547328", MIG, True),
        (f"{NV}.driverVersion.isGreaterThan(semver('580.95.5'))", T4, True),  # 580.126.20
        (f"{NV}.driverVersion.compareTo(semver('580.95.5')) == 0", MIG, True),
        (f"{NV}.driverVersion.major() == 580 && {NV}.cudaComputeCapability.minor() == 5", T4, True),
        (f"{NV}.profile == '1g.10gb' && {NV}.type == 'mig'", MIG, True),
        (f"'profile' in {NV} && {NV}.profile == '1g.10gb'", T4, False),
        (f"{NV}.productName.matches('^NVIDIA A100')", MIG, True),
        ("device.attributes['gpu.amd.com'].partitionProfile == 'dpx_nps1'", AMD, True),
        ("device.capacity['gpu.amd.com'].computeUnits.compareTo(quantity('152')) >= 0", AMD, True),
        ("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0003:00'", AMD, True),
        ("device.attributes['example.com'].size() == 0", T4, True),  # a domain it lacks: empty
        ("device.driver == 'gpu.nvidia.com' && !device.allowMultipleAllocations", T4, True),
    ],
)
def test_kubernetes_cel_library_on_real_devices(expression, device, expected):
    assert selector(expression).matches(device) is expected


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        (f"{NV}.profile == '1g.10gb'", "no such member"),  # a whole GPU has no profile
        (f"{NV}.productName == 1", "no matching overload"),
        (f"{CAP}.memory.isGreaterThan(semver('1.0.0'))", "no such overload"),
        ("quantity('lots').sign() == 1", "not a quantity"),
        ("device.driver ==", "does not compile"),
    ],
)
def test_a_failing_selector_says_why_in_one_line(expression, why):
    with pytest.raises(SelectorError) as e:
        selector(expression).matches(T4)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_semver_precedence():
    assert (
        version("1.0.0-alpha") < version("1.0.0-alpha.1") < version("1.0.0-beta") < version("1.0.0")
    )
    assert version("1.0.0+build.1") == version("1.0.0") and version("01.0.0") is None


def test_one_evaluation_per_distinct_value_of_what_a_selector_reads():
    same_model = []
    for i in range(500):  # devices that differ in their uuid and PCI address only
        d = copy.deepcopy(T4)
        object.__setattr__(d, "attributes", {**T4.attributes, "gpu.nvidia.com/uuid": f"GPU-{i}"})
        same_model.append(d)
    by_model = selector(
        f"{NV}.productName == 'Tesla T4' && {CAP}.memory.isGreaterThan(quantity('8Gi'))"
    )
    assert all(by_model.matches(d) for d in same_model) and len(by_model.answers) == 1
    by_uuid = selector(f"{NV}.uuid == 'GPU-7'")
    assert sum(by_uuid.matches(d) for d in same_model) == 1 and len(by_uuid.answers) == 500
    whole = selector(f"{NV}.exists(k, k == 'uuid')")  # reads every key: not keyed
    assert all(whole.matches(d) for d in same_model[:3]) and whole.answers == {}
