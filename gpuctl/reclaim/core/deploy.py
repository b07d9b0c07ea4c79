"""`gpuctl reclaim render --deploy`: gpuctl reclaim run in the cluster, the Kubernetes way: a
CronJob (or, with --every, a Deployment looping), its policy in a ConfigMap, and a
ServiceAccount whose RBAC allows exactly what the policy's actions need: reading pods and
their owners everywhere, and writing only what each action writes, only in the namespaces
the policy covers (all, when a rule covers every namespace). Pure."""

from __future__ import annotations

from typing import Any

from gpuctl.common.errors import UsageError, carries_credentials
from gpuctl.k8s.labels import MANAGED
from gpuctl.reclaim.core import policy as pol

NAME = "gpuctl-reclaim"
POLICY_PATH = "/etc/gpuctl/policy.yaml"
READ = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"],
     "verbs": ["get", "list"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list"]},
]  # fmt: skip
# What each action writes (every action records itself: an annotation and an Event).
WRITES: dict[str, list[dict[str, Any]]] = {
    pol.REPORT: [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["patch"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["patch"]},
        {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": ["patch"]},
    ],
    pol.SUSPEND: [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["patch"]}
    ],
    pol.SCALE: [],  # the replica count is a field of the object: patch, as report has
    pol.DELETE: [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}],
}


def rules_for(policy: pol.Policy) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for action in pol.ACTIONS:
        if action in policy.actions:
            out += [r for r in WRITES[action] if r not in out]
    return out


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _container(image: str, prometheus: str, every_s: int | None) -> dict[str, Any]:
    run = ["gpuctl", "reclaim", "--policy", POLICY_PATH, "--yes"]
    if every_s:
        command = ["/bin/sh", "-c", f"while true; do {' '.join(run)}; sleep {every_s}; done"]
    else:
        command = run
    return {
        "name": "reclaim",
        "image": image,
        "command": command,
        "env": [{"name": "GPUCTL_PROMETHEUS_URL", "value": prometheus}],
        "volumeMounts": [{"name": "policy", "mountPath": "/etc/gpuctl", "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"memory": "512Mi"}},
    }  # fmt: skip


def render(
    policy: pol.Policy, policy_text: str, namespace: str, image: str, prometheus: str,
    schedule: str = "*/15 * * * *", every_s: int | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    if carries_credentials(prometheus):
        raise UsageError(
            "--prometheus: the URL carries credentials, which would be written in clear into "
            "the reclaimer's environment",
            hint="give a URL without them (an in-cluster Prometheus, or a proxy that adds them)",
        )
    pod_spec = {
        "serviceAccountName": NAME,
        "restartPolicy": "Always" if every_s else "Never",
        "containers": [_container(image, prometheus, every_s)],
        "volumes": [{"name": "policy", "configMap": {"name": NAME}}],
    }
    labels = {"app.kubernetes.io/name": NAME}
    template = {"metadata": {"labels": labels}, "spec": pod_spec}
    if every_s:
        runner = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME, namespace),
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}}  # fmt: skip
    else:
        job = {"backoffLimit": 0, "template": template}
        runner = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(NAME, namespace),
                  "spec": {"schedule": schedule, "concurrencyPolicy": "Forbid",
                           "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
                           "jobTemplate": {"spec": job}}}  # fmt: skip
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    rbac = "rbac.authorization.k8s.io/v1"
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, namespace)},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(NAME, namespace),
         "data": {"policy.yaml": policy_text}},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": _meta(f"{NAME}-read"), "rules": READ},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": _meta(f"{NAME}-read"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"{NAME}-read"}, "subjects": subject},
    ]  # fmt: skip
    writes = rules_for(policy)
    covered = [ns for r in policy.rules for ns in r.namespaces]
    everywhere = any(not r.namespaces for r in policy.rules)
    role_ref = {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": f"{NAME}-act",
    }
    docs.append(
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": _meta(f"{NAME}-act"),
            "rules": writes,
        }
    )
    if everywhere:
        docs.append({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": _meta(f"{NAME}-act"),
                     "roleRef": role_ref, "subjects": subject})  # fmt: skip
    else:  # the write role bound only where the policy acts
        for ns in sorted(set(covered) - set(policy.exempt_namespaces)):
            docs.append({"apiVersion": rbac, "kind": "RoleBinding", "metadata": _meta(f"{NAME}-act", ns),
                         "roleRef": role_ref, "subjects": subject})  # fmt: skip
    docs.append(runner)
    return docs
