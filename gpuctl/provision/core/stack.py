"""The Helm releases Terraform installs into the cluster: the GPU stack (`gpu_stack`), the
Neuron chart for Trainium and Inferentia groups, the EFA device plugin, and with
`autoscaler: karpenter` Karpenter and its node pools.

Values follow the charts' own values.yaml at the pinned versions (kept under
tests/provision/upstream/, where the tests check every key gpuctl sets), and are what
gpuctl's other commands expect:
- `gpuctl share`/`doctor`: the device plugin reads named configs from a ConfigMap
  (`gpuctl-sharing-config` under the GPU Operator), mounted at /available-configs, with a
  `default` entry; nodes pick one with the label nvidia.com/device-plugin.config;
- `gpuctl submit`/`mig`: the MIG strategy (default mixed: MIG slices are advertised as
  nvidia.com/mig-<profile>), GPU Feature Discovery labels, the GPU Operator's MIG manager;
- `gpuctl top --prometheus`/`alerts`/`report`: dcgm-exporter with gpuctl's counters file
  (the profiling fields on: gpuctl.dcgm.counters), scraped through a ServiceMonitor where
  the Prometheus Operator is installed (its default `honorLabels: false`: the GPU's holder
  in `exported_pod`, which gpuctl reads; the release is named so that gpuctl recognises the
  exporter's own labels).
Pure: plain data in, plain data out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuctl.dcgm import counters
from gpuctl.k8s.device_plugin import DEFAULT_CONFIG_MAP
from gpuctl.provision.core import karpenter
from gpuctl.provision.core.facts import Facts
from gpuctl.provision.core.spec import ClusterSpec

# Terraform installs the releases of one stage after the previous stage's (and the nodes).
AUTOSCALER, NODE_POOLS, GPU_STACK = "autoscaler", "node-pools", "gpu-stack"
OBJECTS_CHART = "charts/gpuctl-objects"  # terraform/charts/: plain objects as a release
DEFAULT_CONFIG = "default"  # the device plugin config a node without a config label uses
DCGM_RELEASE = "dcgm-exporter"  # its Service, so the scrape's job: a name `gpuctl top` knows
COUNTERS_PATH = "/etc/dcgm-exporter/gpuctl-counters.csv"  # where the chart's exporter reads them


@dataclass(frozen=True)
class Chart:
    name: str
    repository: str
    version: str


GPU_OPERATOR = Chart("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v26.7.0")
DEVICE_PLUGIN = Chart(
    "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.20.0"
)
DCGM_EXPORTER = Chart(
    "dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts", "4.8.2"
)
EFA_PLUGIN = Chart("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "v0.5.30")
KARPENTER = Chart("karpenter", "oci://public.ecr.aws/karpenter", karpenter.VERSION)
# AWS's Neuron chart: the Neuron device plugin (aws.amazon.com/neuron, .../neuroncore) on the
# instance types `neuronInstances` lists, and the Neuron node problem detector
# (aws-neuron-sdk deploy/includes/k8s-neuron-device-plugin.rst: helm upgrade --install
# neuron-helm-chart oci://public.ecr.aws/neuron/neuron-helm-chart).
NEURON = Chart("neuron-helm-chart", "oci://public.ecr.aws/neuron", "1.1.1")


def device_plugin_config(mig_strategy: str) -> str:
    """The `default` device plugin config: no sharing (`gpuctl share` adds named ones)."""
    return f"version: v1\nflags:\n  migStrategy: {mig_strategy}\n"


def tolerations(spec: ClusterSpec) -> list[dict[str, str]]:
    """What the GPU stack's DaemonSets must tolerate to run on every GPU node: the
    nvidia.com/gpu taint the charts expect, and every taint of every node group."""
    seen = {("nvidia.com/gpu", "NoSchedule")}
    out = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for g in spec.node_groups:
        for t in g.taints:
            if (t.key, t.effect) not in seen:
                seen.add((t.key, t.effect))
                out.append({"key": t.key, "operator": "Exists", "effect": t.effect})
    return out


def gpu_operator_values(spec: ClusterSpec) -> dict[str, Any]:
    tol = tolerations(spec)
    return {
        # The EKS-optimized AL2023 NVIDIA AMI ships the driver and the container toolkit.
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "mig": {"strategy": spec.mig_strategy},
        "migManager": {"enabled": True, "config": {"default": "all-disabled"}},
        "devicePlugin": {
            "enabled": True,
            "config": {
                "create": True,
                "name": DEFAULT_CONFIG_MAP,
                "default": DEFAULT_CONFIG,
                "data": {DEFAULT_CONFIG: device_plugin_config(spec.mig_strategy)},
            },
        },
        "gfd": {"enabled": True},
        # The operator creates the ServiceMonitor only where its CRD exists. The counters
        # file turns on the profiling fields the busy signal reads first (gpuctl.dcgm.counters).
        "dcgmExporter": {
            "enabled": True,
            "serviceMonitor": {"enabled": True},
            "config": {"name": counters.CONFIG_MAP, "create": True, "data": counters.csv_text()},
        },
        "daemonsets": {"tolerations": tol},
        "node-feature-discovery": {"worker": {"tolerations": tol}},
    }


def device_plugin_values(spec: ClusterSpec) -> dict[str, Any]:
    tol = tolerations(spec)
    return {
        "migStrategy": spec.mig_strategy,
        "config": {
            "map": {DEFAULT_CONFIG: device_plugin_config(spec.mig_strategy)},
            "default": DEFAULT_CONFIG,
        },
        # GPU Feature Discovery (and the node-feature-discovery it brings) label the nodes
        # the plugin's affinity selects and `gpuctl doctor` checks.
        "gfd": {"enabled": True},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}] + tol,
        "nfd": {"worker": {"tolerations": tol}},
    }


def dcgm_exporter_values(spec: ClusterSpec) -> dict[str, Any]:
    # The chart would create its ServiceMonitor whether or not the Prometheus Operator is
    # installed (and fail where it is not): gpuctl's objects release adds one only where
    # the API exists.
    # The counters file (gpuctl.dcgm.counters) comes from gpuctl's monitoring release as a
    # ConfigMap, mounted over the chart's own and named by -f.
    return {
        "serviceMonitor": {"enabled": False},
        "tolerations": tolerations(spec),
        "arguments": ["-f", COUNTERS_PATH],
        "extraConfigMapVolumes": [
            {
                "name": "gpuctl-counters",
                "configMap": {
                    "name": counters.CONFIG_MAP,
                    "items": [{"key": counters.KEY, "path": "gpuctl-counters.csv"}],
                },
            }
        ],
        "extraVolumeMounts": [
            {
                "name": "gpuctl-counters",
                "mountPath": COUNTERS_PATH,
                "subPath": "gpuctl-counters.csv",
            }
        ],
    }


def counters_config_map(namespace: str) -> dict[str, Any]:
    """The counters file as a ConfigMap, for the dcgm-exporter chart."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": counters.CONFIG_MAP, "namespace": namespace},
        "data": {counters.KEY: counters.csv_text()},
    }


def dcgm_service_monitor(namespace: str) -> dict[str, Any]:
    """A ServiceMonitor for the dcgm-exporter chart's Service (its selector labels)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": DCGM_RELEASE, "namespace": namespace},
        "spec": {
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/name": DCGM_EXPORTER.name,
                    "app.kubernetes.io/instance": DCGM_RELEASE,
                    "app.kubernetes.io/component": DCGM_EXPORTER.name,
                }
            },
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [{"port": "metrics", "path": "/metrics"}],
        },
    }


def efa_plugin_values(spec: ClusterSpec) -> dict[str, Any]:
    efa_types = sorted({g.instance_type for g in spec.node_groups if g.efa})
    return {
        # The chart runs only on the instance types it lists: list exactly the EFA groups'.
        "supportedInstanceLabels": {
            "keys": ["node.kubernetes.io/instance-type"],
            "values": efa_types,
        },
        "tolerations": tolerations(spec),
    }


def neuron_values(spec: ClusterSpec) -> dict[str, Any]:
    tol = [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *tolerations(spec)]
    return {
        # the device plugin's node affinity: exactly the Neuron groups' instance types (the
        # chart's own list predates trn2)
        "neuronInstances": sorted({g.instance_type for g in spec.node_groups if g.neuron}),
        "devicePlugin": {"tolerations": tol},
    }


def release(chart: Chart, namespace: str, values: dict[str, Any], stage: str) -> dict[str, Any]:
    return {
        "chart": chart.name,
        "repository": chart.repository,
        "version": chart.version,
        "namespace": namespace,
        "values": values,
        "stage": stage,
        "local": False,
    }


def objects_release(
    namespace: str, stage: str, objects: list[dict[str, Any]], if_served: list[dict[str, Any]]
) -> dict[str, Any]:
    """gpuctl's own chart (terraform/charts/gpuctl-objects): `objects` always, `if_served`
    only where the cluster serves their apiVersion/kind."""
    return {
        "chart": OBJECTS_CHART,
        "repository": None,
        "version": None,
        "namespace": namespace,
        "values": {"objects": objects, "ifServed": if_served},
        "stage": stage,
        "local": True,
    }


def releases(spec: ClusterSpec, facts: Facts) -> dict[str, dict[str, Any]]:
    """Release name → what Terraform's helm provider installs (values still as data)."""
    out: dict[str, dict[str, Any]] = {}
    if spec.autoscaler == "karpenter":
        out["karpenter"] = release(
            KARPENTER, karpenter.NAMESPACE, karpenter.chart_values(spec), AUTOSCALER
        )
        pools = karpenter.objects(spec, facts)
        if pools:
            out["gpuctl-node-pools"] = objects_release(karpenter.NAMESPACE, NODE_POOLS, pools, [])
    if spec.gpu_stack == "gpu-operator":
        out["gpu-operator"] = release(
            GPU_OPERATOR, "gpu-operator", gpu_operator_values(spec), GPU_STACK
        )
    elif spec.gpu_stack == "device-plugin":
        ns = "nvidia-device-plugin"
        out["nvidia-device-plugin"] = release(
            DEVICE_PLUGIN, ns, device_plugin_values(spec), GPU_STACK
        )
        out[DCGM_RELEASE] = release(DCGM_EXPORTER, ns, dcgm_exporter_values(spec), GPU_STACK)
        out["gpuctl-monitoring"] = objects_release(
            ns, GPU_STACK, [counters_config_map(ns)], [dcgm_service_monitor(ns)]
        )
    if any(g.neuron for g in spec.node_groups):
        out["neuron-helm-chart"] = release(NEURON, "kube-system", neuron_values(spec), GPU_STACK)
    if any(g.efa for g in spec.node_groups):
        out["aws-efa-k8s-device-plugin"] = release(
            EFA_PLUGIN, "kube-system", efa_plugin_values(spec), GPU_STACK
        )
    return out
