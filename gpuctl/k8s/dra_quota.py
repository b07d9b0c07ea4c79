"""What DRA devices are charged as, by ResourceQuota and by Kueue. Pure.

- ResourceQuota limits the devices a namespace's claims of a DeviceClass request as
  `<class>.deviceclass.resource.k8s.io/devices` (KEP-4381; kubernetes/kubernetes
  pkg/quota/v1/evaluator/core/resource_claims.go).
- Kueue 0.18+ charges a class through its `extendedResourceName` (that resource), else
  through the `resources.deviceClassMappings` of its Configuration, which it reads at start
  (kubernetes-sigs/kueue apis/config/v1beta2/configuration_types.go): a mapping names the
  quota resource a ClusterQueue covers and the classes charged to it, one unit per device
  a claim template's `exactly` request counts (pkg/dra/claims.go). gpuctl names the mapped
  resource as ResourceQuota names the class's devices, so one name serves both."""

from __future__ import annotations

from collections.abc import Sequence

DRA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def quota_resource(device_class: str) -> str:
    """The quota resource of a DeviceClass's devices (`gpu.nvidia.com` →
    `gpu.nvidia.com.deviceclass.resource.k8s.io/devices`)."""
    return f"{device_class}{DRA_SUFFIX}"


def device_class_mappings(classes: Sequence[str]) -> str:
    """The `resources.deviceClassMappings` Kueue needs for CLASSES (YAML): one quota
    resource per class."""
    import yaml

    mappings = [{"name": quota_resource(c), "deviceClassNames": [c]} for c in classes]
    return yaml.safe_dump({"resources": {"deviceClassMappings": mappings}}, sort_keys=False)
