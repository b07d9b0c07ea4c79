"""`gpuctl doctor`'s check of what gpuctl's autoscaled services need, made only when there
is one: KEDA's operator running for a ScaledObject (which exists only where KEDA's API is),
an external metrics API (prometheus-adapter's) for an HPA. Pure: API objects come in.

KEDA (kedacore/keda v2.20) runs as the Deployments `keda-operator` (image
ghcr.io/kedacore/keda) and `keda-operator-metrics-apiserver`; the latter serves
external.metrics.k8s.io, which one server only can: with KEDA there, an HPA's external
metric goes to KEDA, not to prometheus-adapter."""

from __future__ import annotations

from typing import Any

from gpuctl.doctor.core.checks import FAIL, PASS, WARN, Check, namespaced_name
from gpuctl.doctor.core.queue_checks import controller

KEDA_IMAGE = "kedacore/keda"
INSTALL_KEDA = "helm install keda kedacore/keda --namespace keda --create-namespace"
INSTALL_ADAPTER = (
    "helm install prometheus-adapter prometheus-community/prometheus-adapter with the "
    "externalRules `gpuctl render --autoscaler hpa` prints for each service"
)


def check_autoscaling(
    scaled_objects: list[dict[str, Any]],
    hpas: list[dict[str, Any]],
    keda_served: bool,
    external_served: bool,
    deployments: list[dict[str, Any]],
) -> Check | None:
    """None when no gpuctl service autoscales (nothing to check)."""
    if not scaled_objects and not hpas:
        return None
    problems, notes = [], []
    operator = controller(deployments, KEDA_IMAGE)
    if scaled_objects:
        names = ", ".join(namespaced_name(o) for o in scaled_objects)
        if operator is None:
            problems.append((WARN, f"ScaledObjects {names}, but no KEDA operator found running"))
        else:
            notes.append(f"{len(scaled_objects)} ScaledObject(s), KEDA {namespaced_name(operator)}")
    if hpas:
        names = ", ".join(namespaced_name(o) for o in hpas)
        if not external_served:
            problems.append(
                (FAIL, f"HPAs {names} read external metrics, but none is served: they never scale")
            )
        elif keda_served:
            problems.append(
                (
                    WARN,
                    f"HPAs {names} read external metrics, which KEDA serves here, not "
                    "prometheus-adapter: they get no value",
                )  # fmt: skip
            )
        else:
            notes.append(f"{len(hpas)} HPA(s) on external metrics")
    if problems:
        status = FAIL if any(s == FAIL for s, _ in problems) else WARN
        fix = INSTALL_KEDA if scaled_objects and operator is None else INSTALL_ADAPTER
        if hpas and keda_served:
            fix = "resubmit those services with --autoscaler keda"
        return Check("autoscaling", status, "; ".join(d for _, d in problems), fix)
    return Check("autoscaling", PASS, "; ".join(notes))
