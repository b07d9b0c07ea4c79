"""`gpuctl doctor`'s queueing checks: Kueue and JobSet installed (and which versions),
Kueue's all-or-nothing admission (waitForPodsReady) on, every GPU resource the nodes have
covered by some ClusterQueue. Pure: API objects and the manager's config text come in.

Where the facts come from (kubernetes-sigs/kueue v0.19.2, kubernetes-sigs/jobset v0.12.0):
the controllers run as Deployments `kueue-controller-manager` (image
registry.k8s.io/kueue/kueue:vX.Y.Z) and `jobset-controller-manager`; Kueue reads its
Configuration from the ConfigMap `kueue-manager-config`, key
`controller_manager_config.yaml`. waitForPodsReady is on:
- config.kueue.x-k8s.io/v1beta1: when `waitForPodsReady.enable` is true (default false);
- v1beta2 (Kueue 0.15 to 0.18): when the `waitForPodsReady` section is there;
- v1beta2 from Kueue 0.19: always (apis/config/v1beta2/defaults.go), unless the feature
  gate DisableWaitForPodsReady is set (config `featureGates` or `--feature-gates`)."""

from __future__ import annotations

import re
from typing import Any

from gpuctl.doctor.core.checks import FAIL, PASS, WARN, Check, namespaced_name
from gpuctl.k8s.apis import JOBSET_GROUP, JOBSET_VERSION, KUEUE_GROUP, KUEUE_VERSIONS
from gpuctl.k8s.nodes import allocatable, is_gpu_node, is_gpu_resource

KUEUE_IMAGE, JOBSET_IMAGE = "kueue/kueue", "jobset/jobset"
CONFIG_KEY = "controller_manager_config.yaml"
DEFAULT_CONFIG_MAP = ("kueue-system", "kueue-manager-config")
INSTALL_KUEUE = (
    "kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/releases/"
    "download/v0.19.2/manifests.yaml (or helm install kueue "
    "oci://registry.k8s.io/kueue/charts/kueue --namespace kueue-system --create-namespace)"
)
INSTALL_JOBSET = (
    "kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/"
    "download/v0.12.0/manifests.yaml"
)
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def controller(deployments: list[dict[str, Any]], image: str) -> dict[str, Any] | None:
    """The Deployment whose container runs IMAGE (`kueue/kueue`: any registry, any tag)."""
    for d in deployments:
        for c in _containers(d):
            path = str(c.get("image") or "").split("@")[0].rsplit(":", 1)[0]
            if path == image or path.endswith("/" + image):
                return d
    return None


def _containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(pod.get("containers") or [])


def image_version(deployment: dict[str, Any] | None, image: str) -> str | None:
    """The tag of the controller's image (`v0.19.2`), if it names a version."""
    for c in _containers(deployment or {}):
        ref = str(c.get("image") or "").split("@")[0]
        path, _, tag = ref.rpartition(":")
        if (path == image or path.endswith("/" + image)) and _VERSION.fullmatch(tag):
            return tag
    return None


def version_tuple(tag: str | None) -> tuple[int, int, int] | None:
    m = _VERSION.fullmatch(tag or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def check_kueue(served: list[str], deployment: dict[str, Any] | None) -> Check:
    return _installed(
        ("kueue", "Kueue", KUEUE_GROUP, KUEUE_IMAGE, INSTALL_KUEUE),
        KUEUE_VERSIONS,
        served,
        deployment,
        "Kueue is not installed (no kueue.x-k8s.io API): no queueing, no borrowing or "
        "lending between teams; quota set falls back to ResourceQuotas",
    )


def check_jobset(served: list[str], deployment: dict[str, Any] | None) -> Check:
    return _installed(
        ("jobset", "JobSet", JOBSET_GROUP, JOBSET_IMAGE, INSTALL_JOBSET),
        (JOBSET_VERSION,),
        served,
        deployment,
        "JobSet is not installed: multi-node jobs are Indexed Jobs, which can start in "
        "part and whose failed worker cannot rejoin its group",
    )


def _installed(
    what: tuple[str, str, str, str, str],
    wanted: tuple[str, ...],
    served: list[str],
    deployment: dict[str, Any] | None,
    absent: str,
) -> Check:
    """Whether a project's API is served in a version gpuctl speaks and its controller
    runs; its version from the controller's image."""
    check, project, group, image, install = what
    if not served:
        return Check(check, WARN, absent, install)
    version = image_version(deployment, image)
    where = f" in {namespaced_name(deployment)}" if deployment else ""
    speaks = next((v for v in wanted if v in served), None)
    api = f"{group}/{speaks}" if speaks else f"{group} {', '.join(served)}"
    detail = f"{project} {version or '(version unknown)'}{where}, API {api}"
    if speaks is None:
        return Check(
            check, FAIL, f"{detail}: gpuctl needs {' or '.join(wanted)}", "upgrade: " + install
        )
    if deployment is None:
        return Check(
            check,
            WARN,
            f"{detail}: the CRDs are there, but no controller Deployment was found",
            f"kubectl get deploy -A | grep {check}; reinstall: {install}",
        )
    return Check(check, PASS, detail)


def feature_gates(config: dict[str, Any], deployment: dict[str, Any] | None) -> dict[str, bool]:
    """Kueue's feature gates: the config's featureGates, then --feature-gates=A=true,B=false."""
    gates = {str(k): bool(v) for k, v in (config.get("featureGates") or {}).items()}
    for c in _containers(deployment or {}):
        for arg in (c.get("args") or []) + (c.get("command") or []):
            if str(arg).startswith("--feature-gates="):
                for pair in str(arg).split("=", 1)[1].split(","):
                    name, _, value = pair.partition("=")
                    gates[name.strip()] = value.strip().lower() == "true"
    return gates


def check_wait_for_pods_ready(
    config: dict[str, Any] | None,
    where: str,
    kueue_version: str | None,
    deployment: dict[str, Any] | None,
) -> Check:
    fix = (
        f"in ConfigMap {where}, key {CONFIG_KEY}, set waitForPodsReady (e.g. timeout: 10m, "
        "blockAdmission: true), then restart the kueue-controller-manager Deployment"
    )
    if config is None:
        return Check(
            "kueue-all-or-nothing",
            WARN,
            f"cannot read Kueue's configuration ({where}, key {CONFIG_KEY})",
            "check that the ConfigMap exists and that you may read it",
        )
    section = config.get("waitForPodsReady")
    if not isinstance(section, dict):
        section = None
    api = str(config.get("apiVersion") or "")
    if feature_gates(config, deployment).get("DisableWaitForPodsReady"):
        on, why = False, "turned off by the DisableWaitForPodsReady feature gate"
    elif api.endswith("/v1beta1"):
        on = bool(section and section.get("enable"))
        why = "waitForPodsReady.enable is " + ("true" if on else "not true (default false)")
    elif section is not None:
        on, why = True, "waitForPodsReady is set"
    else:
        release = version_tuple(kueue_version)
        if release is None:
            return Check(
                "kueue-all-or-nothing",
                WARN,
                "waitForPodsReady is not set: on by default from Kueue 0.19, off before; "
                "Kueue's version is unknown",
                fix,
            )
        on = release >= (0, 19, 0)
        why = f"waitForPodsReady is not set, which Kueue {kueue_version} " + (
            "takes as on (30m timeout)" if on else "takes as off"
        )
    if not on:
        return Check(
            "kueue-all-or-nothing",
            WARN,
            f"waitForPodsReady is off ({why}): an admitted multi-node job whose pods cannot all "
            "start keeps its quota and GPUs while the started workers wait",
            fix,
        )
    detail = ", ".join(
        f"{k} {section[k]}" for k in ("timeout", "blockAdmission") if section and k in section
    )
    return Check(
        "kueue-all-or-nothing",
        PASS,
        f"waitForPodsReady on ({why}{'; ' + detail if detail else ''})",
    )


def check_gpu_queues(nodes: list[dict[str, Any]], cluster_queues: list[dict[str, Any]]) -> Check:
    """Every GPU resource the nodes have (nvidia.com/gpu, MIG profiles, shared GPUs) is in
    some ClusterQueue's coveredResources: Kueue admits no workload asking for one that is
    not."""
    have = sorted(
        {k for n in nodes if is_gpu_node(n) for k in allocatable(n) if is_gpu_resource(k)}
    )
    covered = {
        r
        for cq in cluster_queues
        for group in (cq.get("spec") or {}).get("resourceGroups") or []
        for r in group.get("coveredResources") or []
    }
    if not have:
        return Check("gpu-queues", WARN, "no node has GPU resources to queue for")
    missing = [r for r in have if r not in covered]
    if not cluster_queues:
        return Check(
            "gpu-queues",
            WARN,
            "no ClusterQueue: Kueue admits no job that names a queue",
            "gpuctl quota set TEAM --gpus N",
        )
    if missing:
        return Check(
            "gpu-queues",
            WARN,
            f"no ClusterQueue covers {', '.join(missing)}: a queued job asking for it is never "
            "admitted",
            "gpuctl quota set TEAM --gpus N --mig PROFILE=K for the teams that use it",
        )
    return Check(
        "gpu-queues",
        PASS,
        f"{', '.join(have)} covered by {len(cluster_queues)} ClusterQueue(s)",
    )
