"""The scheduler profile, field by field against the upstream kube-scheduler v1 types, and
the objects that run it, against the Kubernetes schema."""

import json
import os

import pytest
import yaml

from gpuctl.common.errors import UsageError
from gpuctl.gpus.scoring import DEFAULT_GPU_WEIGHT
from gpuctl.sched.core import profile as sched
from tests.k8s_schema import assert_valid

UPSTREAM = json.load(open(os.path.join(os.path.dirname(__file__), "kube_scheduler_v1_types.json")))
TYPES, ENUMS = UPSTREAM["types"], UPSTREAM["enums"]
LIMITS = UPSTREAM["validation"]
# metav1.Duration serialises as a Go duration string ("5s")
SCALARS = {
    "string": str,
    "bool": bool,
    "int32": int,
    "int64": int,
    "float32": float,
    "Duration": str,
}

VARIANTS = [
    {},
    {"strategy": "spread"},
    {"gpu_weight": 1},
    {"gpu_weight": 100, "name": "pack-h100", "namespace": "schedulers"},
    {"shape": "0:0,100:10"},
    {"strategy": "spread", "shape": "0:10, 50:4 ,100:0"},
]


def check(value, type_name: str, path: str) -> None:
    """VALUE matches the upstream type TYPE_NAME: known JSON fields only, right scalars,
    enum values, and the ranges upstream validation enforces."""
    if type_name.startswith("[]"):
        assert isinstance(value, list), path
        for i, item in enumerate(value):
            check(item, type_name[2:], f"{path}[{i}]")
    elif type_name in SCALARS:
        assert isinstance(value, SCALARS[type_name]), f"{path}: {value!r} is not {type_name}"
        assert type_name == "bool" or not isinstance(value, bool), path
    elif type_name in ENUMS:
        assert value in ENUMS[type_name], f"{path}: {value!r}"
    elif type_name == "RawExtension":
        raise AssertionError(f"{path}: args checked by plugin name")
    else:
        fields = TYPES[type_name]
        assert isinstance(value, dict), path
        unknown = set(value) - set(fields)
        assert not unknown, f"{path}: {sorted(unknown)} not in upstream {type_name}"
        for key, item in value.items():
            if type_name == "PluginConfig" and key == "args":
                check(item, UPSTREAM["plugin_args"][value["name"]], f"{path}.args")
            else:
                check(item, fields[key], f"{path}.{key}")
        qualified = {k: f"{type_name}.{k}" for k in value}
        for key, rule in qualified.items():
            if rule in LIMITS:
                low, high = LIMITS[rule]
                assert low <= value[key] <= high, f"{path}.{key}: {value[key]} outside {rule}"


def render(**options):
    return sched.scheduler_config(sched.make_profile(**options))


def strategy_of(config):
    (profile,) = config["profiles"]
    (fit,) = profile["pluginConfig"]
    assert fit["name"] == "NodeResourcesFit"
    return fit["args"]["scoringStrategy"]


@pytest.mark.parametrize("options", VARIANTS, ids=str)
def test_every_field_is_an_upstream_v1_field(options):
    config = render(**options)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    check(config, "KubeSchedulerConfiguration", "config")
    strategy = strategy_of(config)
    # upstream: a shape exactly when the type is RequestedToCapacityRatio
    ratio = strategy["type"] == "RequestedToCapacityRatio"
    assert ("requestedToCapacityRatio" in strategy) == ratio
    if ratio:
        points = [p["utilization"] for p in strategy["requestedToCapacityRatio"]["shape"]]
        assert points and points == sorted(set(points))
    # plugins named in the profile are plugins v1 enables by default
    for point, plugin_set in config["profiles"][0].get("plugins", {}).items():
        for p in plugin_set.get("disabled", []) + plugin_set.get("enabled", []):
            assert p["name"] in UPSTREAM["default_multipoint_plugins"], (point, p)


def test_the_field_check_catches_what_upstream_would_refuse():
    config = render()
    strategy_of(config)["type"] = "MostRequested"
    with pytest.raises(AssertionError):
        check(config, "KubeSchedulerConfiguration", "config")
    config = render()
    strategy_of(config)["resources"][2]["weight"] = 101
    with pytest.raises(AssertionError):
        check(config, "KubeSchedulerConfiguration", "config")
    config = render()
    config["profiles"][0]["schedulerNames"] = ["x"]
    with pytest.raises(AssertionError):
        check(config, "KubeSchedulerConfiguration", "config")


def test_binpack_scores_most_allocated_with_the_gpu_weighted():
    config = render()
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "gpuctl-binpack"
    assert strategy_of(config) == {
        "type": "MostAllocated",
        "resources": [
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 1},
            {"name": "nvidia.com/gpu", "weight": DEFAULT_GPU_WEIGHT},
        ],
    }
    # GPU-blind balancing would pull against packing: off, at the point v1 enables it
    assert profile["plugins"] == {
        "multiPoint": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}
    }


def test_spread_scores_least_allocated_and_keeps_balancing():
    config = render(strategy="spread", gpu_weight=7)
    assert strategy_of(config)["type"] == "LeastAllocated"
    assert strategy_of(config)["resources"][2] == {"name": "nvidia.com/gpu", "weight": 7}
    assert "plugins" not in config["profiles"][0]


def test_shape_means_requested_to_capacity_ratio():
    strategy = strategy_of(render(shape="0:0,100:10", gpu_weight=5))
    assert strategy["type"] == "RequestedToCapacityRatio"
    assert strategy["requestedToCapacityRatio"] == {
        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    }
    assert strategy["resources"][2]["weight"] == 5


def test_its_own_lease_never_the_default_schedulers():
    config = render(name="pack-a100", namespace="schedulers")
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceNamespace": "schedulers",
        "resourceName": "pack-a100",
    }


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"gpu_weight": 0}, "--gpu-weight: 0 is outside 1..100"),
        ({"gpu_weight": 101}, "--gpu-weight: 101 is outside 1..100"),
        ({"name": "GPU_Pack"}, "--name: 'GPU_Pack'"),
        ({"name": "a" * 64}, "--name"),
        ({"name": "pack\n"}, "--name"),
        ({"namespace": "Kube System"}, "--namespace"),
        ({"strategy": "pack"}, "--strategy: 'pack'"),
        ({"shape": "0:0,100"}, "--shape: '100' is not UTILIZATION:SCORE"),
        ({"shape": "0:0,101:10"}, "outside 0..100 utilization"),
        ({"shape": "0:11"}, "0..10 score"),
        ({"shape": "50:0,50:10"}, "strictly increasing"),
        ({"shape": "10:0,5:10"}, "strictly increasing"),
        ({"shape": "-1:0"}, "UTILIZATION:SCORE"),
        ({"shape": ""}, "UTILIZATION:SCORE"),
        ({"shape": "1e3:0"}, "UTILIZATION:SCORE"),
    ],
)
def test_bad_options_name_the_option(options, needle):
    with pytest.raises(UsageError) as e:
        sched.make_profile(**options)
    assert needle in e.value.message


@pytest.mark.parametrize(
    "version, tag",
    [
        ("v1.29.4-eks-036c24b", "v1.29.4"),
        ("v1.30.2", "v1.30.2"),
        ("1.31.0", "v1.31.0"),
        ("v1.28.3-gke.1286000", "v1.28.3"),
        ("v1.32.1+k3s1", "v1.32.1"),
        ("v1.25.0", "v1.25.0"),
    ],
)
def test_image_tag_from_a_server_version(version, tag):
    assert sched.image(version) == f"registry.k8s.io/kube-scheduler:{tag}"


@pytest.mark.parametrize("version", ["latest", "v1.29", "v1.29.4 ", "1.29.x", "", "v1.29.4\nx"])
def test_bad_versions(version):
    if version == "v1.29.4 ":  # surrounding blanks are forgiven
        assert sched.image(version).endswith(":v1.29.4")
        return
    with pytest.raises(UsageError, match="not a Kubernetes version"):
        sched.image(version)


def test_versions_before_v1_config_are_refused():
    with pytest.raises(UsageError, match="1.24 predates kubescheduler.config.k8s.io/v1"):
        sched.image("v1.24.17")


def deploy(**options):
    p = sched.make_profile(**options)
    config = sched.scheduler_config(p)
    objs = sched.deploy_objects(p, sched.image("v1.30.2"), sched.config_text(config))
    return config, {(o["kind"], o["metadata"]["name"]): o for o in objs}, objs


@pytest.mark.parametrize("options", [{}, {"name": "pack-h100", "namespace": "schedulers"}])
def test_deploy_objects_are_schema_valid(options):
    _, _, objs = deploy(**options)
    assert [o["kind"] for o in objs] == [
        "ServiceAccount",
        "ClusterRoleBinding",
        "ClusterRoleBinding",
        "RoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
    ]
    for obj in objs:
        assert_valid(obj)


def test_deploy_wires_account_rbac_config_and_image_together():
    config, by, _ = deploy(name="pack", namespace="schedulers")
    account = {"kind": "ServiceAccount", "name": "pack", "namespace": "schedulers"}
    assert by[("ServiceAccount", "pack")]["metadata"]["namespace"] == "schedulers"
    # the two bindings the docs' second scheduler has, to the same account
    for crb, role in (
        ("pack-as-kube-scheduler", "system:kube-scheduler"),
        ("pack-as-volume-scheduler", "system:volume-scheduler"),
    ):
        binding = by[("ClusterRoleBinding", crb)]
        assert binding["subjects"] == [account]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role,
        }
    reader = by[("RoleBinding", "pack-extension-apiserver-authentication-reader")]
    assert reader["metadata"]["namespace"] == "kube-system"  # where that Role lives
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    # leader election: get/update of exactly the lease the configuration names
    role = by[("Role", "pack-leader-election")]
    lease = config["leaderElection"]
    assert role["metadata"]["namespace"] == lease["resourceNamespace"] == "schedulers"
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [lease["resourceName"]],
            "verbs": ["get", "update"],
        }
    ]
    rb = by[("RoleBinding", "pack-leader-election")]
    assert rb["subjects"] == [account] and rb["roleRef"]["name"] == "pack-leader-election"
    # the ConfigMap carries exactly the rendered configuration
    cm = by[("ConfigMap", "pack-config")]
    assert yaml.safe_load(cm["data"]["config.yaml"]) == config
    # the Deployment mounts it where --config reads it, as the account, on the version's image
    dep = by[("Deployment", "pack")]
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.30.2"
    assert pod["serviceAccountName"] == "pack"
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    assert volume == {"name": mount["name"], "configMap": {"name": "pack-config"}}
    assert container["command"] == ["kube-scheduler", f"--config={mount['mountPath']}/config.yaml"]
    assert container["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": 10259,
        "scheme": "HTTPS",
    }
    labels = dep["spec"]["selector"]["matchLabels"]
    assert labels.items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_a_changed_configuration_rolls_the_scheduler():
    def annotation(**options):
        dep = deploy(**options)[1][("Deployment", "gpuctl-binpack")]
        return dep["spec"]["template"]["metadata"]["annotations"]["gpuctl.io/config-sha256"]

    assert annotation() == annotation()
    assert annotation() != annotation(gpu_weight=5)


def test_the_extender_configuration_is_upstream_v1():
    config = render(name="gpuctl-fgd", extender=True)
    check(config, "KubeSchedulerConfiguration", "config")
    (ext,) = config["extenders"]
    assert ext["nodeCacheCapable"] is True and ext["ignorable"] is False
    assert ext["urlPrefix"] == "http://127.0.0.1:8888" and ext["httpTimeout"] == "5s"
    assert [r["name"] for r in ext["managedResources"]] == ["nvidia.com/gpu", "nvidia.com/gpucores"]
    plugins = config["profiles"][0]["plugins"]
    # NodeResourcesFit still filters: only its score, which would pull against FGD, is off
    assert plugins["score"]["disabled"] == [{"name": "NodeResourcesFit"}]
    for point in plugins.values():
        for p in point["disabled"]:
            assert p["name"] in UPSTREAM["default_multipoint_plugins"]
    assert "pluginConfig" not in config["profiles"][0]


def test_extender_deploy_objects_are_schema_valid_and_wired():
    p = sched.make_profile("gpuctl-fgd", extender=True)
    text = sched.config_text(sched.scheduler_config(p))
    objs = sched.deploy_objects(p, sched.image("v1.30.2"), text, "registry.example/gpuctl:1")
    for obj in objs:
        assert_valid(obj)
    by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
    role = by["ClusterRole", "gpuctl-fgd-extender"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]}
    ]
    assert (
        by["ClusterRoleBinding", "gpuctl-fgd-extender"]["roleRef"]["name"] == "gpuctl-fgd-extender"
    )
    spec = by["Deployment", "gpuctl-fgd"]["spec"]["template"]["spec"]
    scheduler, extender = spec["containers"]
    assert scheduler["image"] == "registry.k8s.io/kube-scheduler:v1.30.2"
    assert extender["command"][:3] == ["gpuctl", "sched", "extender"]
    assert extender["readinessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": 8888,
        "scheme": "HTTP",
    }
    assert sched.extender_config()["urlPrefix"].endswith(":8888")


def test_extender_refuses_a_shape():
    with pytest.raises(UsageError, match="--shape"):
        sched.make_profile(extender=True, shape="0:0,100:10")
