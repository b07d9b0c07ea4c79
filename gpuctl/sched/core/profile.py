"""The kube-scheduler configuration whose profile packs (or spreads) pods by GPU, and the
objects that run it as a second scheduler, as the Kubernetes docs' "Configure Multiple
Schedulers" does. Pure: options in, plain dicts out.

Fields follow k8s.io/kube-scheduler/config/v1 (types.go, types_pluginargs.go); the tests
check every rendered field against the upstream types.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from gpuctl.common import k8s_names
from gpuctl.common.errors import UsageError
from gpuctl.common.numbers import whole_number
from gpuctl.gpus.scoring import DEFAULT_GPU_WEIGHT, MAX_WEIGHT, resource_weights
from gpuctl.sched.core.extender import MANAGED_RESOURCES

API_VERSION = "kubescheduler.config.k8s.io/v1"
DEFAULT_NAME = "gpuctl-binpack"
EXTENDER_NAME = "gpuctl-fgd"  # the default name of the profile that calls the extender
EXTENDER_PORT = 8888
# kube-scheduler adds priority × weight × 10 (MaxNodeScore / MaxExtenderPriority): at 20,
# one step between the extender's ranked nodes (200) outweighs ImageLocality (0..100) and
# ties a full preferred node affinity (weight 2 × 100), which thus still counts.
EXTENDER_WEIGHT = 20
# A filter that times out fails the pod's scheduling cycle (it is retried with backoff).
# The round trip takes milliseconds (bench/bench_extender.py); 5 s rides out a pause.
EXTENDER_TIMEOUT = "5s"
DEFAULT_NAMESPACE = "kube-system"
# --strategy -> NodeResourcesFit scoring type
STRATEGIES = {"binpack": "MostAllocated", "spread": "LeastAllocated"}
RATIO = "RequestedToCapacityRatio"
MAX_SHAPE_SCORE = 10  # config.MaxCustomPriorityScore
FIRST_V1_RELEASE = (1, 25)  # the first kube-scheduler that reads kubescheduler.config.k8s.io/v1
IMAGE = "registry.k8s.io/kube-scheduler"
SECURE_PORT = 10259  # kube-scheduler's HTTPS port (/healthz needs no credentials)
CONFIG_KEY = "config.yaml"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuctl"}

_VERSION = re.compile(r"v?([0-9]+)\.([0-9]+)\.([0-9]+)(?:[-+][0-9A-Za-z.+-]*)?")
_POINT = re.compile(r"\s*([0-9]+)\s*:\s*([0-9]+)\s*")


@dataclass(frozen=True)
class Profile:
    name: str  # the schedulerName pods ask for
    strategy: str  # a key of STRATEGIES
    gpu_weight: int
    shape: tuple[tuple[int, int], ...] = ()  # RequestedToCapacityRatio points, or () for none
    namespace: str = DEFAULT_NAMESPACE  # where the scheduler runs and holds its lease
    extender: bool = False  # score by gpuctl's FGD extender (sched/core/extender.py) alone

    @property
    def scoring_type(self) -> str:
        return RATIO if self.shape else STRATEGIES[self.strategy]


# kube-scheduler's own profile name (pods' default schedulerName) and its lease's name.
TAKEN_NAMES = ("default-scheduler", "kube-scheduler")


def make_profile(
    name: str = DEFAULT_NAME,
    strategy: str = "binpack",
    gpu_weight: int | None = None,
    shape: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    extender: bool = False,
) -> Profile:
    """Options checked as kube-scheduler would check them, each error naming its option."""
    if strategy not in STRATEGIES:
        raise UsageError(f"--strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if not k8s_names.dns1123_label(name):
        raise UsageError(
            f"--name: {name!r} is not a valid scheduler name",
            hint="lower-case letters, digits and '-', at most 63 (it also names the "
            "scheduler's Deployment, ServiceAccount and lease)",
        )
    if name in TAKEN_NAMES:
        raise UsageError(
            f"--name: {name!r} is the default scheduler's name (and its lease's)",
            hint="a second scheduler under it would take pods and the leader lease from "
            "the cluster's own; pick another name, e.g. the default gpuctl-binpack",
        )
    if not k8s_names.dns1123_label(namespace):
        raise UsageError(f"--namespace: {namespace!r} is not a valid namespace name")
    if gpu_weight is None:
        gpu_weight = DEFAULT_GPU_WEIGHT
    if not 1 <= gpu_weight <= MAX_WEIGHT:
        raise UsageError(
            f"--gpu-weight: {gpu_weight} is outside 1..{MAX_WEIGHT} "
            "(kube-scheduler's range for a resource weight)"
        )
    if extender and shape is not None:
        raise UsageError("--shape scores with NodeResourcesFit, which --extender turns off")
    return Profile(
        name,
        strategy,
        gpu_weight,
        parse_shape(shape) if shape is not None else (),
        namespace,
        extender,
    )


# distribution/reference's grammar (regexp.go): [domain[:port]/]path[:tag][@digest]
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?"
_IMAGE = re.compile(
    rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,})?"
)


def check_extender_image(extender: bool, deploy: bool, image: str | None) -> None:
    """--extender-image, before anything is read: needed by --extender --deploy, and an
    image reference kubelet can pull."""
    if extender and deploy and not image:
        raise UsageError(
            "--extender-image: the image with gpuctl in it, for the extender container",
            hint="`make image` builds one (docs/image.md)",
        )
    if image is not None and (len(image) > 255 or not _IMAGE.fullmatch(image)):
        raise UsageError(
            f"--extender-image: {image!r} is not an image reference",
            hint="e.g. registry.example.com/team/gpuctl:0.9 (lower-case repository path)",
        )


def parse_shape(text: str) -> tuple[tuple[int, int], ...]:
    """``0:0,100:10``: utilization (0..100, strictly increasing) → score (0..10) points."""
    points: list[tuple[int, int]] = []
    for part in text.split(","):
        m = _POINT.fullmatch(part)
        u, s = (whole_number(m.group(1)), whole_number(m.group(2))) if m else (None, None)
        if u is None or s is None:
            raise UsageError(
                f"--shape: {part.strip()!r} is not UTILIZATION:SCORE",
                hint="e.g. --shape 0:0,100:10 (pack) or 0:10,100:0 (spread)",
            )
        if u > 100 or s > MAX_SHAPE_SCORE:
            raise UsageError(
                f"--shape: {u}:{s} is outside 0..100 utilization, 0..{MAX_SHAPE_SCORE} score"
            )
        if points and u <= points[-1][0]:
            raise UsageError("--shape: utilizations must be strictly increasing")
        points.append((u, s))
    return tuple(points)


def extender_config(port: int = EXTENDER_PORT) -> dict[str, object]:
    """kube-scheduler's entry for gpuctl's extender, in the same pod (plain HTTP on the
    loopback). Not ignorable: the extender's filter is the one check that a share of one GPU
    fits a single GPU, so while it is down GPU pods wait (Pending, retried with backoff)
    rather than land where the device plugin cannot admit them; pods without GPUs are the
    default scheduler's and never wait on it. managedResources: only pods asking for these
    are sent to it; kube-scheduler still checks them against allocatable itself."""
    return {
        "urlPrefix": f"http://127.0.0.1:{port}",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": EXTENDER_WEIGHT,
        "nodeCacheCapable": True,
        "httpTimeout": EXTENDER_TIMEOUT,
        "managedResources": [{"name": r} for r in MANAGED_RESOURCES],
        "ignorable": False,
    }


def scheduler_config(p: Profile) -> dict[str, object]:
    """The KubeSchedulerConfiguration: one profile named p.name, with its own lease so it
    never contends with the default scheduler's; with p.extender, a profile scored by the
    extender (the resource scores, which would pull against it, are off)."""
    if p.extender:
        return _with_lease(
            p,
            {
                "schedulerName": p.name,
                "plugins": {
                    "multiPoint": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]},
                    # NodeResourcesFit still filters; only its score is off
                    "score": {"disabled": [{"name": "NodeResourcesFit"}]},
                },
            },
            {"extenders": [extender_config()]},
        )
    strategy: dict[str, object] = {
        "type": p.scoring_type,
        "resources": [{"name": n, "weight": w} for n, w in resource_weights(p.gpu_weight)],
    }
    if p.shape:
        strategy["requestedToCapacityRatio"] = {
            "shape": [{"utilization": u, "score": s} for u, s in p.shape]
        }
    profile: dict[str, object] = {"schedulerName": p.name}
    if p.strategy == "binpack":
        # BalancedAllocation is GPU-blind and pulls towards nodes whose cpu and memory
        # are evenly used, against packing: the bin-packing profile scores resources by fit
        # alone. Disabled at multiPoint, where v1's defaults enable it.
        profile["plugins"] = {
            "multiPoint": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}
        }
    profile["pluginConfig"] = [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}]
    return _with_lease(p, profile, {})


def _with_lease(
    p: Profile, profile: dict[str, object], more: dict[str, object]
) -> dict[str, object]:
    return {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": True,
            "resourceNamespace": p.namespace,
            "resourceName": p.name,
        },
        "profiles": [profile],
        **more,
    }


def image(version: str, source: str = "--kube-version") -> str:
    """The kube-scheduler image of that Kubernetes version."""
    return f"{IMAGE}:{image_tag(version, source)}"


def image_tag(version: str, source: str = "--kube-version") -> str:
    """``v1.29.4`` from a server's gitVersion (``v1.29.4-eks-036c24b``, ``1.30.2``)."""
    m = _VERSION.fullmatch(version.strip())
    if not m:
        raise UsageError(
            f"{source}: {version!r} is not a Kubernetes version",
            hint="e.g. --kube-version v1.30.2 (the cluster's `kubectl version` Server Version)",
        )
    major, minor, patch = (int(g) for g in m.groups())
    if (major, minor) < FIRST_V1_RELEASE:
        raise UsageError(
            f"Kubernetes {major}.{minor} predates {API_VERSION} "
            f"(kube-scheduler reads it from {FIRST_V1_RELEASE[0]}.{FIRST_V1_RELEASE[1]} on)"
        )
    return f"v{major}.{minor}.{patch}"


def extender_container(image: str, port: int = EXTENDER_PORT) -> dict[str, object]:
    """`gpuctl sched extender` beside kube-scheduler: ready once its watches have synced."""
    probe = {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTP"}}
    return {
        "name": "gpuctl-extender",
        "image": image,
        "command": ["gpuctl", "sched", "extender", "--host", "127.0.0.1", "--port", str(port)],
        "readinessProbe": {**probe, "periodSeconds": 5},
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}},
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
        },
    }


def deploy_objects(
    p: Profile, image: str, config_text: str, extender_image: str | None = None
) -> list[dict[str, object]]:
    """ServiceAccount, RBAC, the ConfigMap holding config_text (the rendered
    configuration) and the Deployment running kube-scheduler from IMAGE (and with
    p.extender, the gpuctl extender from extender_image beside it)."""
    ns, name = p.namespace, p.name
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "scheduler"}
    config_dir = f"/etc/kubernetes/{name}"
    account = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]

    def meta(obj_name: str, namespace: str | None = ns) -> dict[str, object]:
        out: dict[str, object] = {"name": obj_name}
        if namespace:
            out["namespace"] = namespace
        out["labels"] = {**labels, **MANAGED_BY}
        return out

    def binding(
        kind: str, obj_name: str, role: str, namespace: str | None = None
    ) -> dict[str, object]:
        role_kind = "ClusterRole" if kind == "ClusterRoleBinding" else "Role"
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": meta(obj_name, namespace),
            "subjects": account,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        }

    probe: dict[str, object] = {
        "httpGet": {"path": "/healthz", "port": SECURE_PORT, "scheme": "HTTPS"}
    }
    liveness: dict[str, object] = {**probe, "initialDelaySeconds": 15}
    watches: list[dict[str, object]] = []
    sidecars: list[dict[str, object]] = []
    if p.extender:
        assert extender_image, "check_extender_image refuses --deploy --extender without one"
        sidecars = [extender_container(extender_image)]
        # the extender's watches: nodes and pods, read only
        watches = [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": meta(f"{name}-extender", None),
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["nodes", "pods"],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            },
            binding("ClusterRoleBinding", f"{name}-extender", f"{name}-extender"),
        ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name)},
        # What the default scheduler may do, and what volume binding needs.
        binding("ClusterRoleBinding", f"{name}-as-kube-scheduler", "system:kube-scheduler"),
        binding("ClusterRoleBinding", f"{name}-as-volume-scheduler", "system:volume-scheduler"),
        # Delegated authentication of its HTTPS endpoint reads a ConfigMap in kube-system.
        binding(
            "RoleBinding",
            f"{name}-extension-apiserver-authentication-reader",
            "extension-apiserver-authentication-reader",
            "kube-system",
        ),
        # system:kube-scheduler lets a scheduler create leases but get and update only the
        # lease named kube-scheduler: this one's own lease is granted here instead of
        # editing that ClusterRole (the docs' way).
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(f"{name}-leader-election"),
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [name],
                    "verbs": ["get", "update"],
                }
            ],
        },
        binding("RoleBinding", f"{name}-leader-election", f"{name}-leader-election", ns),
        *watches,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(f"{name}-config"),
            "data": {CONFIG_KEY: config_text},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(name),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {
                        "labels": {**labels, **MANAGED_BY},
                        # a changed configuration rolls the scheduler's pod
                        "annotations": {"gpuctl.io/config-sha256": _sha256(config_text)},
                    },
                    "spec": {
                        "serviceAccountName": name,
                        "containers": [
                            {
                                "name": "kube-scheduler",
                                "image": image,
                                "command": [
                                    "kube-scheduler",
                                    f"--config={config_dir}/{CONFIG_KEY}",
                                ],
                                "livenessProbe": liveness,
                                "readinessProbe": probe,
                                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                                "securityContext": {
                                    "privileged": False,
                                    "allowPrivilegeEscalation": False,
                                },
                                "volumeMounts": [
                                    {"name": "config", "mountPath": config_dir, "readOnly": True}
                                ],
                            },
                            *sidecars,
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
                    },
                },
            },
        },
    ]


def config_text(config: dict[str, object]) -> str:
    """The configuration as the YAML file the ConfigMap carries."""
    import yaml

    return str(yaml.safe_dump(config, sort_keys=False))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
