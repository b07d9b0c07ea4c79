"""What `gpuctl submit` decides before it creates anything: the namespace (placed once), the
objects to create and why, the fit on the cluster's nodes, the queue and the warnings, and
whether the job must not be sent at all. Pure: the service reads the cluster."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.common.plan import Plan, Step
from gpuctl.jobs.core import autoscale
from gpuctl.jobs.core.serving import Target
from gpuctl.jobs.core.spec import JobSpec
from gpuctl.k8s.fit import FitReport
from gpuctl.k8s.placement import Placement

NEVER_FITS_HINT = "change gpus / mig / gpu_type, or add capacity (gpuctl provision)"


@dataclass(frozen=True)
class SubmitPlan:
    """SPEC (its multi-node form and queue decided) as OBJECTS placed in NAMESPACE, in the
    order to create them. FIT is the per-node fit (None: not checked, FIT_SKIPPED says why);
    QUEUE_NOTE and WARNINGS are for the user. ERROR, when set, is why the job is not sent:
    it can never fit, something it needs is missing, the quota refuses it, or the cluster
    did not answer; what was found before it is still shown."""

    spec: JobSpec
    namespace: str
    objects: tuple[dict[str, Any], ...]
    placement: Placement
    server_dry_run: bool = False
    fit: FitReport | None = None
    fit_skipped: str | None = None
    queue_note: str | None = None
    warnings: tuple[str, ...] = ()
    error: GpuctlError | None = None
    target: Target | None = None  # a service's: its autoscaler and rollout

    @property
    def kind(self) -> str:
        """The kind of the job's own object (the last one created; a service's Deployment)."""
        if self.spec.serving is not None:
            return "Deployment"
        return str(self.objects[-1]["kind"])

    @property
    def adapter_rule(self) -> dict[str, Any] | None:
        """The prometheus-adapter externalRules entry a service's HPA needs (None: none)."""
        scale = self.spec.serving.autoscale if self.spec.serving else None
        if scale is None or self.target is None or self.target.autoscaler != autoscale.HPA:
            return None
        promql = autoscale.query(self.spec.name, self.namespace, scale, self.target.exporter)
        return autoscale.adapter_rule(
            self.spec.name, self.namespace, scale, promql, mig=self.spec.mig is not None
        )

    @property
    def names(self) -> str:
        return ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in self.objects)

    @property
    def shows_fit(self) -> bool:
        """The fit is worth a table: the job can never fit, or not right now."""
        return bool(self.fit and self.fit.resource and not self.fit.fits_now)

    @property
    def waits_for_room(self) -> bool:
        return self.shows_fit and self.fit is not None and self.fit.can_ever_fit

    @property
    def plan(self) -> Plan:
        notes: tuple[str | None, ...] = (
            self.queue_note,
            self.fit_skipped and f"no fit check: {self.fit_skipped}",
            *self.placement.notes,
        )
        if self.adapter_rule is not None:
            notes += (
                f"the HPA reads external metric {self.adapter_rule['name']['as']}: add the "
                "prometheus-adapter rule printed below to its externalRules",
            )
        return Plan(
            f"submit {self.spec.name} to namespace {self.namespace}",
            tuple(_create(obj, self.spec, self.target) for obj in self.objects),
            tuple(n for n in notes if n) + self.warnings,
        )


def namespace_for(option: str | None, spec: JobSpec, default: str) -> str:
    """--namespace, else the spec's, else the connection's."""
    return option or spec.namespace or default


def place(manifests: Sequence[dict[str, Any]], namespace: str) -> tuple[dict[str, Any], ...]:
    return tuple({**m, "metadata": {**m["metadata"], "namespace": namespace}} for m in manifests)


def never_fits(spec: JobSpec, fit: FitReport | None) -> GpuctlError | None:
    """The error that stops a job no node set can ever hold (None: it may fit)."""
    if fit is None or fit.can_ever_fit:
        return None
    return GpuctlError(
        f"{spec.name} can never fit this cluster: " + fit.never_fits_reason(),
        hint=NEVER_FITS_HINT,
    )


def with_fit(plan: SubmitPlan, fit: FitReport) -> SubmitPlan:
    """PLAN with its fit report, stopped when the job can never fit."""
    return dataclasses.replace(plan, fit=fit, error=never_fits(plan.spec, fit))


def _create(obj: dict[str, Any], spec: JobSpec, target: Target | None) -> Step:
    meta = obj["metadata"]
    why = _why(obj["kind"], spec) if target is None else _serving_why(obj["kind"], spec, target)
    return Step("create", f"{obj['kind']} {meta['namespace']}/{meta['name']}", why, {"object": obj})


def _serving_why(kind: str, spec: JobSpec, target: Target) -> str:
    serving = spec.serving
    assert serving is not None
    scale = serving.autoscale
    if kind == "Deployment":
        return f"{serving.initial_replicas} replica(s); rolling update: {target.rollout.why}"
    if kind == "Service":
        return "routes to the Ready replicas: " + ", ".join(f"{n} {p}" for n, p in serving.ports)
    assert scale is not None
    if kind == "TriggerAuthentication":
        assert scale.auth is not None
        return (
            f"KEDA logs in to Prometheus ({scale.auth.mode}) with Secret {scale.auth.secret}'s keys"
        )
    engine = "KEDA" if kind == "ScaledObject" else "the HPA"
    return (
        f"{engine} keeps {scale.min}..{scale.max} replicas at {scale.signal} "
        f"{scale.target} per replica"
    )


def _why(kind: str, spec: JobSpec) -> str:
    queued = f", suspended until Kueue admits it from LocalQueue {spec.queue}" if spec.queue else ""
    if kind == "Service":
        return "headless: the workers find each other by name"
    if kind == "JobSet":
        return f"the job's {spec.nodes} workers, restarted together{queued}"
    if kind == "Job" and spec.nodes > 1:
        return f"the job's {spec.nodes} workers, one indexed pod each{queued}"
    return f"the job{queued}"
