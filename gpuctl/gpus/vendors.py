"""Every vendor's accelerators as Kubernetes sees them: the extended resources its device plugin
advertises (and which of them count partitions of a device rather than devices), the labels
its feature discovery puts on a node that has them, and its DRA drivers and DeviceClasses.
Pure data, and the questions asked of it (`vendor_of`, `is_accelerator_resource`).

| vendor | device-plugin resources | discovery labels | DRA driver / classes | source |
|---|---|---|---|---|
| nvidia | `nvidia.com/gpu`, renamed `nvidia.com/gpu.shared`; MIG `nvidia.com/mig-<profile>[.shared]` | GFD `nvidia.com/gpu.present=true`, `nvidia.com/gpu.count` | `gpu.nvidia.com` / `gpu.nvidia.com`, `mig.nvidia.com`, `vfio.gpu.nvidia.com`; HAMi `hami-core-gpu.project-hami.io` | NVIDIA/k8s-device-plugin README; kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/…/deviceclass-*.yaml; Project-HAMi/k8s-dra-driver chart |
| amd | `amd.com/gpu`; mixed naming `amd.com/<spx,dpx,qpx,cpx>_<nps1,2,4,8>` | NFD `feature.node.kubernetes.io/amd-gpu=true` (`amd-vgpu` for VFs); the node labeller's `amd.com/gpu.*`, `beta.amd.com/gpu.*` | `gpu.amd.com` / `gpu.amd.com` | ROCm/k8s-device-plugin docs/user-guide/configuration.md ("Resource Naming Strategy"), cmd/k8s-node-labeller/main.go; ROCm/gpu-operator docs; ROCm/k8s-gpu-dra-driver helm-charts-k8s/templates/deviceclass.yaml |
| aws | `aws.amazon.com/neuron` (devices; `aws.amazon.com/neurondevice` its deprecated name), `aws.amazon.com/neuroncore` (cores of them) | none (Karpenter's `instance-accelerator-*` labels are the instance type's, not the stack's) | `neuron.aws.com` | aws-neuron/aws-neuron-sdk deploy/includes/k8s-neuron-device-plugin.rst, deploy/eks/dra.rst; aws-neuron-sdk PR #1006 (neurondevice deprecated) |
| google | `google.com/tpu` (the chips of the VM) | `cloud.google.com/gke-tpu-accelerator` (GKE; the TPU device plugin's DaemonSet selects on it) | none known (GKE's TPU DRA driver is unnamed in its docs) | AI-Hypercomputer/xpk src/xpk/core/system_characteristics.py; gke-labs/tpu-operator internal/controllers/tpunodegroup/node.go |
| intel | Gaudi `habana.ai/gaudi`; GPUs `gpu.intel.com/i915`, `gpu.intel.com/xe` (not their `_monitoring` resources) | Habana feature discovery `habana.ai/device.count`; NFD `feature.node.kubernetes.io/pci-1da3.present=true`, `intel.feature.node.kubernetes.io/gaudi=true`, `intel.feature.node.kubernetes.io/gpu=true` | `gaudi.intel.com`; `gpu.intel.com` | HabanaAI/habanalabs-k8s-device-plugin main.go; HabanaAI/gaudi-feature-discovery collector/collector.go; intel/intel-device-plugins-for-kubernetes cmd/gpu_plugin/README.md; intel/intel-resource-drivers-for-kubernetes doc/gaudi/USAGE.md |

Who the device is (its model) is each vendor's reader's business (gpuctl.gpus.device_plugins);
this table only says whose it is and how it is counted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from gpuctl.common.numbers import whole_number


@dataclass(frozen=True)
class Resource:
    """Extended resources a device plugin advertises, by a whole-name pattern. One of them
    counts devices, or partitions of one: those the pattern's group `p` names (a MIG
    profile, an AMD compute/memory partition), or all called PARTITION."""

    pattern: str
    partition: str | None = None

    def match(self, name: str) -> re.Match[str] | None:
        return _compiled(self.pattern).fullmatch(name)


@dataclass(frozen=True)
class Label:
    """A label a vendor's discovery puts on a node that has its accelerators: KEY (ending in
    "." or "/": any key under it), with VALUE (None: any; "#": a whole number above 0); the
    device plugin then advertises RESOURCE."""

    key: str
    resource: str
    value: str | None = None

    def on(self, labels: Mapping[str, str]) -> bool:
        if self.key.endswith((".", "/")):
            return any(k.startswith(self.key) for k in labels)
        if self.key not in labels:
            return False
        if self.value == "#":
            return (whole_number(labels[self.key]) or 0) > 0
        return self.value is None or labels[self.key] == self.value


@dataclass(frozen=True, eq=False)  # one object per vendor: compared, and cached, by identity
class Vendor:
    name: str
    resources: tuple[Resource, ...]
    labels: tuple[Label, ...] = ()
    dra_drivers: tuple[str, ...] = ()
    device_classes: tuple[str, ...] = ()  # the DeviceClasses its DRA driver ships

    def offers(self, resource: str) -> bool:
        return _unit(self, resource)[0]

    def partition_of(self, resource: str) -> str | None:
        """The partition one unit of RESOURCE is; None: a whole device (or not the vendor's)."""
        return _unit(self, resource)[1]

    def labelled(self, labels: Mapping[str, str]) -> Label | None:
        """The first of the vendor's discovery labels the node carries."""
        return next((label for label in self.labels if label.on(labels)), None)


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# a cluster's nodes and pods name a few dozen resources, each many times
@lru_cache(maxsize=4096)
def _unit(vendor: Vendor, resource: str) -> tuple[bool, str | None]:
    """Whether RESOURCE is the vendor's, and the partition one unit of it is (None: a whole
    device)."""
    for r in vendor.resources:
        if m := r.match(resource):
            return True, m.groupdict().get("p") or r.partition
    return False, None


NVIDIA = Vendor(
    "nvidia",
    (
        # whole GPUs, or time-shared replicas of them renamed .shared; not the other
        # nvidia.com/ resources (the Network Operator's SR-IOV and RDMA devices, HAMi's
        # nvidia.com/gpumem and gpucores)
        Resource(r"nvidia\.com/gpu(?:\..+)?"),
        Resource(r"nvidia\.com/mig-(?P<p>.+?)(?:\.shared)?"),
    ),
    (
        Label("nvidia.com/gpu.present", "nvidia.com/gpu", "true"),
        Label("nvidia.com/gpu.count", "nvidia.com/gpu", "#"),
    ),
    ("gpu.nvidia.com", "hami-core-gpu.project-hami.io"),
    ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com", "hami-core-gpu.project-hami.io"),
)
AMD = Vendor(
    "amd",
    (
        Resource(r"amd\.com/gpu"),
        Resource(r"amd\.com/(?P<p>(?:spx|dpx|qpx|cpx)_nps[1248])"),
    ),
    (
        Label("feature.node.kubernetes.io/amd-gpu", "amd.com/gpu", "true"),
        Label("feature.node.kubernetes.io/amd-vgpu", "amd.com/gpu", "true"),
        Label("amd.com/gpu.", "amd.com/gpu"),
        Label("beta.amd.com/gpu.", "amd.com/gpu"),
    ),
    ("gpu.amd.com",),
    ("gpu.amd.com",),
)
AWS = Vendor(
    "aws",
    (
        Resource(r"aws\.amazon\.com/neuron(?:device)?"),
        Resource(r"aws\.amazon\.com/neuroncore", "neuroncore"),
    ),
    (),
    ("neuron.aws.com",),
    ("neuron.aws.com",),
)
GOOGLE = Vendor(
    "google",
    (Resource(r"google\.com/tpu"),),
    (Label("cloud.google.com/gke-tpu-accelerator", "google.com/tpu"),),
)
INTEL = Vendor(
    "intel",
    (Resource(r"habana\.ai/gaudi"), Resource(r"gpu\.intel\.com/(?:i915|xe)")),
    (
        Label("habana.ai/device.count", "habana.ai/gaudi", "#"),
        Label("feature.node.kubernetes.io/pci-1da3.present", "habana.ai/gaudi", "true"),
        Label("intel.feature.node.kubernetes.io/gaudi", "habana.ai/gaudi", "true"),
        Label("intel.feature.node.kubernetes.io/gpu", "gpu.intel.com/i915", "true"),
    ),
    ("gaudi.intel.com", "gpu.intel.com"),
    ("gaudi.intel.com", "gpu.intel.com"),
)
VENDORS = (NVIDIA, AMD, AWS, GOOGLE, INTEL)


@lru_cache(maxsize=4096)
def vendor_of(resource: str) -> Vendor | None:
    """The vendor whose device plugin advertises RESOURCE; None for a resource that is no
    accelerator (cpu, vpc.amazonaws.com/efa, nvidia.com/sriov_rdma)."""
    return next((v for v in VENDORS if v.offers(resource)), None)


def is_accelerator_resource(name: str) -> bool:
    """Any vendor's accelerator resource: whole devices or partitions of them."""
    return vendor_of(name) is not None


def vendor_of_driver(driver: str) -> Vendor | None:
    """The vendor of a DRA driver (ResourceSlice spec.driver)."""
    return next((v for v in VENDORS if driver in v.dra_drivers), None)
