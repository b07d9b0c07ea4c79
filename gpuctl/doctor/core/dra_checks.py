"""`gpuctl doctor`'s DRA checks, where a driver publishes devices through resource.k8s.io:
which devices, through which version; that a DeviceClass selects them; that each DRA node's
kubelet plugin runs; that no node offers a vendor's accelerators through a device plugin and
DRA at once; and, with Kueue, that it charges DRA devices. Pure.

Where the facts come from: kubernetes/api resource/v1/types.go (v1 from Kubernetes 1.34);
the drivers' charts run their kubelet plugin as a DaemonSet named `…-kubelet-plugin`
(kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/…/templates/kubeletplugin.yaml,
intel-resource-drivers-for-kubernetes deployments/gaudi); Kueue 0.18+ charges DRA devices
(feature gate KueueDRAIntegration, beta and on from 0.18) through a DeviceClass's
extendedResourceName, else through its Configuration's `resources.deviceClassMappings`,
which it reads at start (kubernetes-sigs/kueue site/content/en/docs/concepts/
dynamic_resource_allocation.md); a class mapped by neither makes a workload that claims it
inadmissible."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gpuctl.doctor.core.checks import FAIL, PASS, WARN, Check, _names, namespaced_name
from gpuctl.gpus.dra import DraView
from gpuctl.k8s.apis import DRA_VERSIONS
from gpuctl.k8s.dra_quota import device_class_mappings
from gpuctl.k8s.nodes import inventory_of
from gpuctl.k8s.objects import name_of

KUEUE_DRA = (0, 18)  # the first Kueue that charges DRA devices
KUEUE_DRA_GATE = "KueueDRAIntegration"
_KUBELET_PLUGIN = re.compile(r"kubelet-?plugin")


def check_dra(
    version: str | None,
    view: DraView,
    nodes: Sequence[dict[str, Any]],
    daemonsets: Sequence[dict[str, Any]],
) -> list[Check]:
    """The checks of a cluster whose drivers publish devices ([] when none does)."""
    if version is None or not view.devices:
        return []
    return [
        _devices(version, view),
        _classes(view),
        _kubelet_plugins(view, daemonsets),
        _both_sources(view, nodes),
    ]


def _devices(version: str, view: DraView) -> Check:
    by_driver: dict[str, set[str]] = {}
    count: dict[str, int] = {}
    for d in view.devices:
        by_driver.setdefault(d.driver, set()).add(d.node or "-")
        count[d.driver] = count.get(d.driver, 0) + 1
    detail = ", ".join(
        f"{driver}: {count[driver]} device(s) on {len(where)} node(s)"
        for driver, where in sorted(by_driver.items())
    )
    if version != DRA_VERSIONS[0]:
        return Check(
            "dra",
            WARN,
            f"resource.k8s.io/{version} (Kubernetes 1.32/1.33): {detail}",
            "gpuctl renders claims as resource.k8s.io/v1 (Kubernetes 1.34+): upgrade the "
            "cluster, or submit with --allocation device-plugin where a device plugin runs",
        )
    return Check("dra", PASS, f"resource.k8s.io/{version}: {detail}")


def _classes(view: DraView) -> Check:
    unselected: dict[str, int] = {}
    for d in view.devices:
        if view.class_of(d) is None:
            unselected[d.driver] = unselected.get(d.driver, 0) + 1
    if unselected:
        driver, n = sorted(unselected.items())[0]
        return Check(
            "dra-classes",
            FAIL,
            f"no DeviceClass selects {n} device(s) of {driver}: no claim can ask for them",
            "install the driver's DeviceClasses (its Helm chart creates them) or kubectl "
            "apply a DeviceClass whose CEL selector selects them",
        )
    names = sorted({view.class_of(d) or "" for d in view.devices})
    return Check("dra-classes", PASS, "devices selected by " + ", ".join(names))


def _kubelet_plugins(view: DraView, daemonsets: Sequence[dict[str, Any]]) -> Check:
    plugins = [ds for ds in daemonsets if _KUBELET_PLUGIN.search(name_of(ds) or "")]
    nodes = sorted({d.node for d in view.devices if d.node})
    if not plugins:
        return Check(
            "dra-kubelet-plugin",
            WARN,
            f"no DRA kubelet plugin DaemonSet found, yet devices are published on {_names(nodes)}",
            "the slices may be stale: check the driver's kubelet plugin pods "
            "(kubectl get ds -A | grep kubelet-plugin)",
        )
    short = [
        f"{namespaced_name(ds)} ({ready}/{desired} ready)"
        for ds in plugins
        if (ready := _status(ds, "numberReady"))
        < (desired := _status(ds, "desiredNumberScheduled"))  # fmt: skip
    ]
    if short:
        return Check(
            "dra-kubelet-plugin",
            FAIL,
            f"kubelet plugin not running on every node: {', '.join(short)}",
            "kubectl -n <ns> describe ds <name>, and the logs of its pods on those nodes: "
            "pods on a node without its plugin cannot start with their claims",
        )
    return Check(
        "dra-kubelet-plugin",
        PASS,
        ", ".join(namespaced_name(ds) for ds in plugins) + f" ready on {len(nodes)} DRA node(s)",
    )


def _status(ds: dict[str, Any], key: str) -> int:
    value = (ds.get("status") or {}).get(key)
    return value if isinstance(value, int) else 0


def _both_sources(view: DraView, nodes: Sequence[dict[str, Any]]) -> Check:
    both = [
        f"{name_of(n)} ({p})"
        for n in nodes
        for p in inventory_of(n, [], dra=view).problems
        if "from both the device plugin and DRA" in p
    ]
    if both:
        return Check(
            "dra-and-device-plugin",
            FAIL,
            f"accelerators offered by a device plugin and DRA at once on {_names(both)}",
            "the scheduler takes a node's extended resource from one of the two: disable the "
            "device plugin on DRA nodes (GPU Operator: devicePlugin.enabled=false, or the node "
            "label nvidia.com/gpu.deploy.device-plugin=false)",
        )
    return Check("dra-and-device-plugin", PASS, "no node offers an accelerator through both")


def check_kueue_dra(
    view: DraView, kueue_version: tuple[int, int, int] | None, gates: dict[str, bool], config: dict[str, Any] | None
) -> Check:  # fmt: skip
    """Whether Kueue charges the cluster's DRA devices: version, gate, and a mapping (or an
    extendedResourceName) for every class that selects them."""
    if kueue_version is not None and kueue_version[:2] < KUEUE_DRA:
        return Check(
            "kueue-dra",
            WARN,
            f"Kueue {'.'.join(map(str, kueue_version))} does not charge DRA devices (0.18+ does)",
            "upgrade Kueue to 0.18 or later",
        )
    if gates.get(KUEUE_DRA_GATE) is False:
        return Check(
            "kueue-dra",
            WARN,
            f"Kueue's feature gate {KUEUE_DRA_GATE} is off: it does not charge DRA devices",
            f"remove {KUEUE_DRA_GATE}=false from its featureGates or --feature-gates",
        )
    unmapped = unmapped_classes(view, config)
    if unmapped:
        return Check(
            "kueue-dra",
            WARN,
            f"Kueue's Configuration maps no resource to DeviceClass {', '.join(unmapped)}: "
            "workloads claiming them are inadmissible",
            "add to Kueue's Configuration (it reads it at start; restart the manager):\n"
            + device_class_mappings(unmapped),
        )
    return Check("kueue-dra", PASS, "every DeviceClass with devices is charged by Kueue")


def unmapped_classes(view: DraView, config: dict[str, Any] | None) -> list[str]:
    """The classes that select devices, with no extendedResourceName and in no mapping."""
    mapped = {
        str(name)
        for m in ((config or {}).get("resources") or {}).get("deviceClassMappings") or []
        if isinstance(m, dict)
        for name in m.get("deviceClassNames") or []
    }
    extended = {c.name for c in view.classes if c.extended_resource}
    used = sorted({c for d in view.devices if (c := view.class_of(d))})
    return [c for c in used if c not in mapped and c not in extended]
