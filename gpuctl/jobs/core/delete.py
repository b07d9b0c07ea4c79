"""What `gpuctl jobs delete` removes and why: the job's Job (its pods go with it), JobSet
or bare Pod, and its headless Service, also one left alone by an earlier failure. Deletes
cannot be undone: a failure says what was deleted and what is left. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuctl.common.plan import Plan, Step
from gpuctl.k8s.objects import name_of

OWNERS = ("Job", "JobSet")  # a headless Service without one is left from an earlier failure
SERVING = ("Deployment", "ScaledObject", "HorizontalPodAutoscaler")  # a service's


@dataclass(frozen=True)
class Deletion:
    """The objects of job NAME in NAMESPACE, as PLAN's steps in the order to delete them."""

    name: str
    namespace: str
    plan: Plan

    @property
    def targets(self) -> list[str]:
        return [s.target for s in self.plan.steps]

    def in_words(self) -> str:
        """`Job/x, Service/x and the Job's pods in namespace ns`."""
        kinds = {s.detail["kind"] for s in self.plan.steps}
        pods = " and the Job's pods" if "Job" in kinds else ""
        pods += " and the service's pods" if "Deployment" in kinds else ""
        return f"{', '.join(self.targets)}{pods} in namespace {self.namespace}"

    def unfinished(self, deleted: Sequence[str], left: Sequence[str]) -> tuple[str, str]:
        """(what to add to the error, the hint) when deleting stopped with LEFT not deleted."""
        done = f"; deleted {', '.join(deleted)}" if deleted else ""
        return (
            f"{done}; left in namespace {self.namespace}: {', '.join(left)}",
            f"run it again: gpuctl jobs delete {self.name} -n {self.namespace}",
        )


def plan_delete(name: str, namespace: str, objects: Sequence[Mapping[str, Any]]) -> Deletion:
    """OBJECTS (each with its kind) are the job's, in the order to delete them."""
    kinds = {o["kind"] for o in objects}
    steps = tuple(
        Step(
            "delete",
            f"{o['kind']}/{name_of(o)}",
            _why(o["kind"], owned=bool(kinds & set(OWNERS)), serving=bool(kinds & set(SERVING))),
            {"kind": o["kind"], "name": name_of(o)},
        )
        for o in objects
    )
    return Deletion(name, namespace, Plan(f"delete job {name} in namespace {namespace}", steps))


def _why(kind: str, owned: bool, serving: bool = False) -> str:
    if kind in ("ScaledObject", "HorizontalPodAutoscaler"):
        return "the service's autoscaler, first: it would scale the replicas back up"
    if kind == "TriggerAuthentication":
        return "how the autoscaler logged in to Prometheus (its Secret is left alone)"
    if kind == "Deployment":
        return "the service's replicas; its ReplicaSets and pods go with it"
    if kind == "Service" and serving:
        return "the Service in front of its replicas"
    if kind == "Job":
        return "the job; its pods go with it"
    if kind == "JobSet":
        return "the job; its Jobs, pods and Service go with it"
    if kind == "Pod":
        return "the job, a bare Pod"
    if kind == "ComputeDomain":
        return "its workers' multi-node NVLink domain (IMEX daemons and channels)"
    if owned:
        return "the headless Service of its workers"
    return "the headless Service left by an earlier failure"
