"""The Helm releases gpuctl installs: every value it sets is a key of the chart's own
values.yaml at the pinned release (tests/provision/upstream/), with a value of the kind
the chart expects; and what gpuctl's other commands need from the GPU stack is there, down
to `gpuctl doctor` passing on the objects the GPU Operator makes of these values."""

import json
from pathlib import Path

import pytest
import yaml

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.dcgm import busy, counters, metrics
from gpuctl.doctor.core import checks as doctor
from gpuctl.k8s import device_plugin
from gpuctl.k8s.nodes import MIG_CONFIG, MIG_STRATEGY
from gpuctl.provision.core import stack
from gpuctl.provision.core.facts import Facts
from gpuctl.provision.core.spec import parse_cluster, parse_taint
from gpuctl.provision.core.tfvars import render_tfvars
from tests.gpu_cluster import daemonset, node, seed

UPSTREAM = Path(__file__).parent / "upstream"
CHART_VALUES = {
    "gpu-operator": "gpu-operator-values.yaml",
    "nvidia-device-plugin": "nvidia-device-plugin-values.yaml",
    "dcgm-exporter": "dcgm-exporter-values.yaml",
    "aws-efa-k8s-device-plugin": "aws-efa-k8s-device-plugin-values.yaml",
    "karpenter": "karpenter-values.yaml",
    "neuron-helm-chart": "neuron-helm-chart-values.yaml",
}

SPEC = """\
apiVersion: gpuctl/v1
kind: Cluster
name: ml
region: us-east-1
vpc_cidr: 10.0.0.0/16
kubernetes_cluster: {{version: "1.33"}}
{extra}
node_groups:
  - name: h100
    instance_type: p5.48xlarge
    min_size: 0
    max_size: 2
    gpu_type: h100
    efa: true
    taints: [nvidia.com/gpu=present:NoSchedule, team=ml:NoExecute]
  - name: l40s
    instance_type: g6e.12xlarge
    min_size: 0
    max_size: 2
    gpu_type: l40s
    taints: [dedicated:PreferNoSchedule]
"""


def spec(extra=""):
    return parse_cluster(load_yaml(SPEC.format(extra=extra)))


def releases(extra=""):
    return stack.releases(spec(extra), Facts())


# Keys a chart's values.yaml documents in comments only (the example is commented out)
COMMENTED = {
    # gpu-operator-values.yaml, under dcgmExporter: "# config:\n    # name: ...\n
    # create: true\n    # data: |-" (the chart's ConfigMap of dcgm-exporter counters)
    "dcgmExporter.config",
}


def unknown_keys(ours, theirs, path=""):
    """Paths in `ours` the chart's values.yaml does not have, or holds a different kind of
    value at. Below an empty mapping or a null the chart takes anything (names it has not
    listed: ConfigMap data, config maps, labels)."""
    out = []
    for key, value in ours.items():
        where = f"{path}.{key}" if path else key
        if where in COMMENTED:
            continue
        if not isinstance(theirs, dict) or key not in theirs:
            out.append(f"{where}: not a key of the chart")
            continue
        upstream = theirs[key]
        if upstream is None or upstream == {}:
            continue
        if isinstance(value, dict):
            out += unknown_keys(value, upstream, where)
        elif not isinstance(value, type(upstream)) and not (
            isinstance(upstream, list) and isinstance(value, list)
        ):
            out.append(f"{where}: {type(value).__name__}, the chart has {type(upstream).__name__}")
    return out


ALL_MODES = [
    "",
    "gpu_stack: device-plugin",
    "autoscaler: karpenter",
    "gpu_stack: device-plugin\nmig_strategy: single\nautoscaler: karpenter",
]


@pytest.mark.parametrize("extra", ALL_MODES)
def test_every_value_is_a_key_of_the_pinned_chart(extra):
    for name, r in releases(extra).items():
        if r["local"]:
            continue
        chart = yaml.safe_load((UPSTREAM / CHART_VALUES[r["chart"]]).read_text())
        assert unknown_keys(r["values"], chart) == [], name


def test_the_key_check_has_teeth():
    chart = yaml.safe_load((UPSTREAM / "gpu-operator-values.yaml").read_text())
    assert unknown_keys({"mig": {"stratgy": "mixed"}}, chart) == [
        "mig.stratgy: not a key of the chart"
    ]
    assert unknown_keys({"driver": {"enabled": "false"}}, chart) == [
        "driver.enabled: str, the chart has bool"
    ]
    assert unknown_keys({"devicePlugin": {"config": {"data": {"anything": "x"}}}}, chart) == []


def test_pinned_versions_are_the_ones_checked_against():
    text = (UPSTREAM / "README.md").read_text()
    for chart in (stack.GPU_OPERATOR, stack.DEVICE_PLUGIN, stack.EFA_PLUGIN, stack.KARPENTER):
        assert chart.version.lstrip("v") in text, chart
    assert "chart 4.8.2" in text and stack.DCGM_EXPORTER.version == "4.8.2"


def test_which_releases_each_mode_installs():
    assert set(releases()) == {"gpu-operator", "aws-efa-k8s-device-plugin"}
    assert set(releases("gpu_stack: device-plugin")) == {
        "nvidia-device-plugin",
        "dcgm-exporter",
        "gpuctl-monitoring",
        "aws-efa-k8s-device-plugin",
    }
    assert set(releases("gpu_stack: none\nautoscaler: karpenter")) == {
        "karpenter",
        "gpuctl-node-pools",
        "aws-efa-k8s-device-plugin",
    }
    no_efa = parse_cluster(load_yaml(SPEC.format(extra="").replace("efa: true", "efa: false")))
    assert set(stack.releases(no_efa, Facts())) == {"gpu-operator"}
    stages = {n: r["stage"] for n, r in releases("autoscaler: karpenter").items()}
    assert stages == {
        "karpenter": "autoscaler",
        "gpuctl-node-pools": "node-pools",
        "gpu-operator": "gpu-stack",
        "aws-efa-k8s-device-plugin": "gpu-stack",
    }


def tolerated(taint, tolerations):
    """Kubernetes' rule: a toleration with the taint's key (or none, with Exists), Exists or
    an equal value, and the taint's effect (or none) tolerates it."""
    for t in tolerations:
        key_ok = t.get("key") == taint.key or (not t.get("key") and t.get("operator") == "Exists")
        value_ok = t.get("operator") == "Exists" or t.get("value", "") == taint.value
        effect_ok = not t.get("effect") or t["effect"] == taint.effect
        if key_ok and value_ok and effect_ok:
            return True
    return False


def daemonset_tolerations(extra=""):
    """Every toleration list that decides whether a GPU-stack DaemonSet runs on a node."""
    r = releases(extra)
    out = {}
    if "gpu-operator" in r:
        v = r["gpu-operator"]["values"]
        out["operator operands"] = v["daemonsets"]["tolerations"]
        out["node-feature-discovery"] = v["node-feature-discovery"]["worker"]["tolerations"]
    if "nvidia-device-plugin" in r:
        v = r["nvidia-device-plugin"]["values"]
        out["device plugin"] = v["tolerations"]
        out["node-feature-discovery"] = v["nfd"]["worker"]["tolerations"]
        out["dcgm-exporter"] = r["dcgm-exporter"]["values"]["tolerations"]
    out["efa plugin"] = r["aws-efa-k8s-device-plugin"]["values"]["tolerations"]
    return out


@pytest.mark.parametrize("extra", ["", "gpu_stack: device-plugin"])
def test_the_stack_runs_on_every_gpu_node_whatever_its_taints(extra):
    """A DaemonSet that does not tolerate a group's taint schedules nothing there: no
    nvidia.com/gpu, and `gpuctl doctor` fails with 'schedules no pods'."""
    taints = [t for g in spec(extra).node_groups for t in g.taints]
    assert len(taints) == 3
    for name, tolerations in daemonset_tolerations(extra).items():
        missing = [str(t) for t in taints if not tolerated(t, tolerations)]
        assert missing == [], name
    assert not tolerated(parse_taint("other:NoSchedule"), daemonset_tolerations()["efa plugin"])


def test_the_efa_plugin_runs_on_exactly_the_efa_groups_types():
    values = releases()["aws-efa-k8s-device-plugin"]["values"]
    assert values["supportedInstanceLabels"] == {
        "keys": ["node.kubernetes.io/instance-type"],
        "values": ["p5.48xlarge"],
    }


@pytest.mark.parametrize("strategy", ["mixed", "single", "none"])
def test_device_plugin_config_is_one_gpuctl_share_and_doctor_read(strategy):
    v = releases(f"mig_strategy: {strategy}")["gpu-operator"]["values"]
    assert v["mig"]["strategy"] == strategy
    cfg = v["devicePlugin"]["config"]
    assert cfg["create"] is True and cfg["name"] == device_plugin.DEFAULT_CONFIG_MAP
    default = cfg["data"][cfg["default"]]
    assert device_plugin.parse_config(default) is None  # a valid config, no sharing
    assert yaml.safe_load(default)["flags"]["migStrategy"] == strategy
    dp = releases(f"gpu_stack: device-plugin\nmig_strategy: {strategy}")["nvidia-device-plugin"]
    assert dp["values"]["migStrategy"] == strategy
    assert (
        device_plugin.parse_config(dp["values"]["config"]["map"][dp["values"]["config"]["default"]])
        is None
    )
    assert dp["values"]["gfd"]["enabled"] is True  # the labels doctor's feature-discovery reads


def test_dcgm_exporter_is_scraped_the_way_top_and_alerts_read_it():
    """A ServiceMonitor with the Prometheus Operator's default honorLabels (false): the
    GPU's holder arrives in exported_pod, and the exporter's own labels are recognised by
    its job, which is the Service's, that is the release's, name."""
    from gpuctl.dcgm import holders

    op = releases()["gpu-operator"]["values"]["dcgmExporter"]
    assert {k: op[k] for k in ("enabled", "serviceMonitor")} == {
        "enabled": True,
        "serviceMonitor": {"enabled": True},
    }
    assert "nvidia-dcgm-exporter" in holders.DEFAULT_JOBS  # the operator's exporter
    r = releases("gpu_stack: device-plugin")
    # the chart's own ServiceMonitor would fail where the Prometheus Operator is missing
    assert r["dcgm-exporter"]["values"]["serviceMonitor"] == {"enabled": False}
    assert stack.DCGM_RELEASE in r and stack.DCGM_RELEASE in holders.DEFAULT_JOBS
    monitoring = r["gpuctl-monitoring"]["values"]
    assert [o["metadata"]["name"] for o in monitoring["objects"]] == [counters.CONFIG_MAP]
    (sm,) = monitoring["ifServed"]
    assert sm["kind"] == "ServiceMonitor" and sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert "honorLabels" not in sm["spec"]["endpoints"][0]
    assert sm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == stack.DCGM_RELEASE
    assert sm["metadata"]["namespace"] == r["dcgm-exporter"]["namespace"]


def test_values_reach_terraform_as_json_strings():
    tfvars = render_tfvars(spec("autoscaler: karpenter"), Facts())
    for name, r in tfvars["helm_releases"].items():
        assert json.loads(r["values"]) == releases("autoscaler: karpenter")[name]["values"]
    assert tfvars["helm_releases"]["gpuctl-node-pools"]["local"] is True
    assert tfvars["helm_releases"]["gpuctl-node-pools"]["chart"] == "charts/gpuctl-objects"
    assert (Path("terraform") / stack.OBJECTS_CHART / "Chart.yaml").is_file()


# ---- `gpuctl doctor` against what the GPU Operator makes of these values ----


def operator_objects(values, namespace="gpu-operator"):
    """The ConfigMap and DaemonSets the GPU Operator creates from these values, named and
    mounted as NVIDIA/gpu-operator v26.7.0 does: deployments/gpu-operator/templates/
    plugin_config.yaml (the ConfigMap of devicePlugin.config.data), assets/
    state-device-plugin/0500_daemonset.yaml and state-dcgm-exporter/0800_daemonset.yaml
    (the DaemonSet names), controllers/object_controls.go handleDevicePluginConfig (a
    volume named after devicePlugin.config.name, mounted at /available-configs)."""
    cfg = values["devicePlugin"]["config"]
    objs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": cfg["name"], "namespace": namespace},
            "data": cfg["data"],
        },
        daemonset("nvidia-device-plugin-daemonset", namespace, config_map=cfg["name"]),
    ]
    if values["dcgmExporter"]["enabled"]:
        objs.append(daemonset("nvidia-dcgm-exporter", namespace))
    return objs


def gfd_labels(strategy):
    """Labels GPU Feature Discovery sets (the strategy the plugin runs with), beside those
    EKS sets on a p5 node of the spec's EFA group: its instance type and the network nodes
    above it (docs/topology.md cites the sources; the values
    are made up in EC2's form)."""
    return {
        MIG_STRATEGY: strategy,
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.k8s.aws/network-node-layer-1": "nn-0a1b2c3d4e5f60718",
        "topology.k8s.aws/network-node-layer-2": "nn-1a1b2c3d4e5f60718",
        "topology.k8s.aws/network-node-layer-3": "nn-2a1b2c3d4e5f60718",
    }


@pytest.mark.integration
def test_doctor_passes_on_what_the_operator_makes_of_the_values(cli, kube_api):
    values = releases()["gpu-operator"]["values"]
    strategy = values["mig"]["strategy"]
    seed(
        kube_api,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}},
        *operator_objects(values),
        node("gpu-1", labels=gfd_labels(strategy)),
        # a node whose GPUs the MIG manager split: slices advertised per profile
        node(
            "gpu-2",
            0,
            labels={
                **gfd_labels(strategy),
                MIG_CONFIG: "all-1g.10gb",
                doctor.MIG_STATE: "success",
            },
            alloc={"nvidia.com/mig-1g.10gb": "56"},
        ),
    )
    r = cli("doctor", "-o", "json")
    assert r.code == 0, r
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    # Kueue and JobSet are not part of the stack provision installs: doctor warns of them
    queueing = {"kueue": "warn", "jobset": "warn"}
    assert {n: c["status"] for n, c in checks.items()} == {
        **dict.fromkeys(checks, "pass"),
        **queueing,
    }
    # `gpuctl share` finds the plugin's ConfigMap the same way
    r = cli("share", "show", "-o", "json")
    assert r.code == 0, r
    assert device_plugin.DEFAULT_CONFIG_MAP in r.out


def test_the_default_mig_strategy_is_the_one_submit_and_doctor_agree_on():
    """`gpuctl submit` asks for MIG slices as nvidia.com/mig-<profile>, which only the mixed
    strategy advertises; doctor fails a node that advertises them under another strategy."""
    assert spec().mig_strategy == "mixed"
    mig_node = node("n", 0, labels=gfd_labels("single"), alloc={"nvidia.com/mig-1g.10gb": "7"})
    assert doctor.check_mig([mig_node]).status == doctor.FAIL
    mig_node = node("n", 0, labels=gfd_labels("mixed"), alloc={"nvidia.com/mig-1g.10gb": "7"})
    assert doctor.check_mig([mig_node]).status == doctor.PASS


def test_the_gpu_stack_turns_the_profiling_fields_on():
    """dcgm-exporter's own counters files ship SM_ACTIVE and SM_OCCUPANCY commented out: the
    counters file gpuctl ships has them, and both stacks hand it to the exporter."""
    on = counters.enabled(counters.csv_text())
    assert {metrics.SM_ACTIVE, metrics.SM_OCCUPANCY, metrics.GR_ACTIVE} <= set(on)
    assert set(busy.SIGNALS) <= set(on) and set(metrics.METRICS) <= set(on)
    for line in counters.csv_text().splitlines()[1:]:
        assert line.count(",") == 2, line  # field, type, help: dcgm-exporter's three columns
    op = releases()["gpu-operator"]["values"]["dcgmExporter"]["config"]
    assert op == {"name": counters.CONFIG_MAP, "create": True, "data": counters.csv_text()}
    r = releases("gpu_stack: device-plugin")
    exporter = r["dcgm-exporter"]["values"]
    assert exporter["arguments"] == ["-f", stack.COUNTERS_PATH]
    (volume,) = exporter["extraConfigMapVolumes"]
    (mount,) = exporter["extraVolumeMounts"]
    assert volume["configMap"]["name"] == counters.CONFIG_MAP
    assert (mount["name"], mount["mountPath"]) == (volume["name"], stack.COUNTERS_PATH)
    (cm,) = r["gpuctl-monitoring"]["values"]["objects"]
    assert cm["data"][volume["configMap"]["items"][0]["key"]] == counters.csv_text()
    assert cm["metadata"]["namespace"] == r["dcgm-exporter"]["namespace"]


TRN2 = """\
apiVersion: gpuctl/v1
kind: Cluster
name: trn
region: us-east-2
vpc_cidr: 10.0.0.0/16
kubernetes_cluster: {{version: "1.33"}}
{extra}
node_groups:
  - {{name: trn2, instance_type: trn2.48xlarge, min_size: 0, max_size: 4, gpu_type: trainium2}}
  - {{name: inf2, instance_type: inf2.48xlarge, min_size: 0, max_size: 2, gpu_type: inferentia2}}
"""


def neuron_spec(extra=""):
    return parse_cluster(load_yaml(TRN2.format(extra=extra)))


def test_neuron_groups_get_the_neuron_chart_efa_for_trainium_and_no_nvidia_stack():
    s = neuron_spec()
    trn2, inf2 = s.node_groups
    assert s.gpu_stack == "none"  # no group has NVIDIA GPUs
    # the taint the Neuron chart's device plugin tolerates; EFA on by default for trn2 only
    assert [str(t) for t in trn2.taints] == ["aws.amazon.com/neuron=present:NoSchedule"]
    assert (trn2.efa, inf2.efa) == (True, False)
    r = stack.releases(s, Facts())
    assert set(r) == {"neuron-helm-chart", "aws-efa-k8s-device-plugin"}
    neuron = r["neuron-helm-chart"]
    assert (neuron["repository"], neuron["chart"]) == (
        "oci://public.ecr.aws/neuron",
        "neuron-helm-chart",
    )
    # the chart's DaemonSet affinity: exactly the groups' types (its own list lacks trn2)
    assert neuron["values"]["neuronInstances"] == ["inf2.48xlarge", "trn2.48xlarge"]
    for t in trn2.taints:
        assert tolerated(t, neuron["values"]["devicePlugin"]["tolerations"])
    chart = yaml.safe_load((UPSTREAM / CHART_VALUES["neuron-helm-chart"]).read_text())
    assert unknown_keys(neuron["values"], chart) == []
    groups = render_tfvars(s)["node_groups"]
    assert {k: groups["trn2"][k] for k in ("gpu_count", "ami_variant", "device_resource")} == {
        "gpu_count": 16,  # gpuctl's instance table: no preflight here
        "ami_variant": "neuron",
        "device_resource": "aws.amazon.com/neuron",
    }


def test_a_gpu_stack_asked_for_neuron_only_groups_is_refused_with_the_reason():
    with pytest.raises(SpecError) as e:
        neuron_spec("gpu_stack: gpu-operator")
    assert "gpu_stack" in str(e.value) and "trn2 (trn2.48xlarge: Trainium2)" in str(e.value)
    assert "no node group has NVIDIA GPUs" in str(e.value)
    mixed = TRN2.format(extra="gpu_stack: gpu-operator") + (
        "  - {name: h100, instance_type: p5.48xlarge, min_size: 0, max_size: 1, gpu_type: h100}\n"
    )
    s = parse_cluster(load_yaml(mixed))
    assert s.gpu_stack == "gpu-operator"  # the NVIDIA group gets it; the others the Neuron chart
    assert {"gpu-operator", "neuron-helm-chart"} <= set(stack.releases(s, Facts()))
