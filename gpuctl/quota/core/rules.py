"""Per-team GPU quotas: the Namespace and ResourceQuota to apply, the difference from what
exists, usage per namespace. Pure: quotas and pods come in as the API returns them.
(Whether a job would exceed its namespace's quota is gpuctl.jobs.core.quota_check.)"""

from __future__ import annotations

from typing import Any

from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import dns1123_label
from gpuctl.common.numbers import whole_number
from gpuctl.common.quantity import from_api, rounded_down
from gpuctl.gpus import geometry
from gpuctl.gpus.dra import DraView
from gpuctl.gpus.resources import DONE_PHASES, accelerator_resources, requested
from gpuctl.gpus.vendors import VENDORS, is_accelerator_resource, vendor_of
from gpuctl.k8s import claims
from gpuctl.k8s.labels import MANAGED
from gpuctl.k8s.nodes import GPU, allocatable
from gpuctl.k8s.objects import name_of, namespace_of

QUOTA_NAME = "gpuctl-gpus"
MAX_GPUS = 1_000_000


def check_team(team: str) -> str:
    if not dns1123_label(team):
        raise UsageError(
            f"team {team!r} is not a valid namespace name (lower-case letters, "
            "digits and '-', at most 63, starting and ending with a letter or digit)"
        )
    return team


def parse_mig(values: list[str] | tuple[str, ...]) -> dict[str, int]:
    """`--mig PROFILE=K` options → {resource name: K}; profiles checked against the geometry."""
    known = geometry.all_profile_names()
    out: dict[str, int] = {}
    for raw in values:
        profile, sep, k = raw.partition("=")
        profile = profile.strip().removeprefix("nvidia.com/").removeprefix("mig-")
        if not sep or not profile:
            raise UsageError(f"--mig {raw!r}: expected PROFILE=COUNT, e.g. 1g.10gb=4")
        if profile not in known:
            close = sorted(p for p in known if p.split(".")[0] == profile.split(".")[0])[:8]
            raise UsageError(
                f"--mig {raw!r}: {profile!r} is not a MIG profile of any known GPU",
                hint="e.g. " + ", ".join(close or sorted(known)[:8]),
            )
        count = whole_number(k.strip())
        if count is None or count > MAX_GPUS:
            raise UsageError(f"--mig {raw!r}: COUNT must be a whole number from 0 to {MAX_GPUS}")
        resource = "nvidia.com/mig-" + profile.replace("+", ".")
        if resource in out:
            raise UsageError(f"--mig {profile} given twice")
        out[resource] = count
    return out


def hard(
    gpus: int,
    mig: dict[str, int],
    dra_classes: tuple[str, ...] = (),
    others: tuple[str, ...] = (),
) -> dict[str, str]:
    """The hard limits: GPUs and MIG devices as the device plugin's resources, and the same
    through DRA where the cluster's DRA_CLASSES (gpu.nvidia.com, mig.nvidia.com) have devices;
    GPUS of each of OTHERS, the other vendors' device resources the cluster's nodes offer
    (amd.com/gpu, aws.amazon.com/neuron, google.com/tpu, habana.ai/gaudi)."""
    if not 0 <= gpus <= MAX_GPUS:
        raise UsageError(f"--gpus must be between 0 and {MAX_GPUS}, got {gpus}")
    out = {f"requests.{GPU}": str(gpus)}
    out.update({f"requests.{r}": str(gpus) for r in sorted(others) if r != GPU})
    out.update({f"requests.{r}": str(k) for r, k in sorted(mig.items())})
    if claims.GPU_CLASS in dra_classes:
        out[dra_key(claims.GPU_CLASS)] = str(gpus)
    if claims.MIG_CLASS in dra_classes:
        out[dra_key(claims.MIG_CLASS)] = str(sum(mig.values()))
    return out


def other_devices(nodes: list[dict[str, Any]]) -> tuple[str, ...]:
    """The other vendors' device resources (whole devices, not partitions or NeuronCores)
    the nodes offer, in the vendors' order."""
    offered = {r for n in nodes for r in allocatable(n) if r != GPU and is_accelerator_resource(r)}
    ranked = []
    for r in offered:
        vendor = vendor_of(r)
        if vendor is not None and vendor.partition_of(r) is None:
            ranked.append((VENDORS.index(vendor), r))
    return tuple(r for _, r in sorted(ranked))


def namespace_object(team: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": team, "labels": dict(MANAGED)},
    }


def quota_object(team: str, hard_limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": team, "labels": dict(MANAGED)},
        "spec": {"hard": dict(hard_limits)},
    }


def diff(
    current: dict[str, str] | None, desired: dict[str, str]
) -> list[tuple[str, str | None, str | None]]:
    """(key, old, new) for every key that differs, comparing quantities by value."""
    current = current or {}
    out = []
    for key in sorted(set(current) | set(desired)):
        old, new = current.get(key), desired.get(key)
        if old == new:
            continue
        if old is not None and new is not None:
            value = from_api(old)
            if value is not None and value == from_api(new):
                continue
        out.append((key, old, new))
    return out


# --- usage ------------------------------------------------------------------------


# ResourceQuota's limit on the devices claims of a DeviceClass request (KEP-4381)
DRA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def gpu_resource_of(key: str) -> str | None:
    """The GPU resource a quota key limits (`requests.nvidia.com/gpu` → nvidia.com/gpu;
    `gpu.nvidia.com.deviceclass.resource.k8s.io/devices`, a DeviceClass's devices, as is)."""
    if key.endswith(DRA_SUFFIX):
        return key
    name = key.removeprefix("requests.")
    return name if name.startswith("nvidia.com/") or is_accelerator_resource(name) else None


def dra_key(device_class: str) -> str:
    return f"{device_class}{DRA_SUFFIX}"


def claimed(view: DraView | None) -> dict[tuple[str, str], int]:
    """(namespace, the DRA quota key of a class) → devices of that class its claims hold."""
    out: dict[tuple[str, str], int] = {}
    if view is None:
        return out
    devices = {d.key: d for d in view.devices}
    for claim in view.claims:
        for a in claim.devices:
            device = devices.get(a.key)
            device_class = view.class_of(device) if device is not None and not a.admin else None
            if device_class:
                where = (claim.namespace, dra_key(device_class))
                out[where] = out.get(where, 0) + 1
    return out


def held(pods: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """(namespace, GPU resource) → count requested by pods that have not finished."""
    out: dict[tuple[str, str], int] = {}
    for p in pods:
        if (p.get("status") or {}).get("phase") in DONE_PHASES:
            continue
        ns = namespace_of(p)
        for resource in accelerator_resources(p):
            n = requested(p, resource)
            if n:
                out[(ns, resource)] = out.get((ns, resource), 0) + n
    return out


def _counted_from(resource: str) -> str:
    return "claims" if resource.endswith(DRA_SUFFIX) else "pods"


def usage_rows(
    quotas: list[dict[str, Any]], pods: list[dict[str, Any]], dra: DraView | None = None
) -> list[dict[str, Any]]:
    """Per namespace and GPU resource: used and hard. `used` comes from the quota's status
    when the quota controller has filled it, else from the running pods (DRA devices: from
    the claims that hold them, by their DeviceClass). Namespaces using GPUs without a quota
    on them are listed with hard None."""
    by_pods = held(pods) | claimed(dra)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for q in quotas:
        ns = namespace_of(q)
        spec_hard = (q.get("spec") or {}).get("hard") or {}
        status_used = (q.get("status") or {}).get("used") or {}
        for key, value in spec_hard.items():
            resource = gpu_resource_of(key)
            if resource is None:
                continue
            limit = rounded_down(value)
            if key in status_used and rounded_down(status_used[key]) is not None:
                used, source = rounded_down(status_used[key]), "quota"
            else:
                used, source = by_pods.get((ns, resource), 0), _counted_from(resource)
            row = rows.get((ns, resource))
            if row is None or (limit is not None and (row["hard"] is None or limit < row["hard"])):
                rows[(ns, resource)] = {
                    "namespace": ns,
                    "resource": resource,
                    "used": used,
                    "hard": limit,
                    "quota": name_of(q),
                    "source": source,
                }
    for (ns, resource), used in by_pods.items():
        rows.setdefault(
            (ns, resource),
            {
                "namespace": ns,
                "resource": resource,
                "used": used,
                "hard": None,
                "quota": None,
                "source": _counted_from(resource),
            },
        )
    return sorted(rows.values(), key=lambda r: (r["namespace"], r["resource"]))
