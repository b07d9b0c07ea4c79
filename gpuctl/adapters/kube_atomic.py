"""Creating several Kubernetes objects all together or not at all, and saying the truth
when that cannot be done: each create is a step for gpuctl.runtime.workflow's executor,
whose undo removes only what this attempt made.

Each object is marked with a token of this attempt (an annotation). When a create fails
after the request may have reached the server (its answer lost: a timeout, a dropped
connection, a gateway's error page) or Ctrl-C stops it, the object is read back by name:
if it exists with this attempt's token, it was made and is removed with the others. An
object that already existed (someone else's, or an earlier run's) never carries the token
and is never touched. What cannot be removed, or checked, is listed with the command that
removes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from gpuctl.adapters.kube import Kube, NoAnswer, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.common.plan import Step
from gpuctl.k8s.objects import annotations_of, meta, name_of, namespace_of
from gpuctl.runtime.workflow import Action, Progress, execute

ATTEMPT_ANNOTATION = "gpuctl.io/create-attempt"


def create_step(obj: dict) -> Step:
    """A step that creates OBJ, for objects that come without a plan's own step."""
    where = f"{namespace_of(obj)}/" if namespace_of(obj) else ""
    return Step("create", f"{obj['kind']} {where}{name_of(obj)}", detail={"object": obj})


def create_all(
    kube: Kube,
    objects: list[dict],
    *,
    steps: Sequence[Step] | None = None,
    cleanup: str | None = None,
    explain: Callable[[GpuctlError, dict], GpuctlError] | None = None,
    progress: Progress | None = None,
) -> list[dict]:
    """Create `objects` in order (each in its metadata.namespace); return what the server
    answered. On a failure or Ctrl-C, remove what this call created and raise the error
    (Interrupted for Ctrl-C) extended with what was undone, or what is left and `cleanup`,
    the command that removes it. `explain(error, obj)` may restate the error of a create
    for the user (e.g. a name that is taken). `steps`, one per object, are the plan's own
    (with its why); without them each object's step is made here."""
    token = new_token()
    planned = steps or [create_step(obj) for obj in objects]
    actions = [create_action(kube, obj, token, s) for obj, s in zip(objects, planned, strict=True)]
    return execute(
        actions,
        progress=progress,
        undone_as="the objects created before the failure were removed",
        left_as="object(s) left in the cluster",
        cleanup=cleanup,
        explain=(lambda e, action: explain(e, action.step.detail["object"])) if explain else None,
    )


def new_token() -> str:
    """A token for one attempt: the objects it creates carry it, so that its rollback can
    tell them from objects of the same name that someone else made meanwhile."""
    return uuid.uuid4().hex


def _marked(obj: dict, token: str) -> dict:
    annotations = {**annotations_of(obj), ATTEMPT_ANNOTATION: token}
    return {**obj, "metadata": {**meta(obj), "annotations": annotations}}


def create_action(kube: Kube, obj: dict, token: str, step: Step | None = None) -> Action:
    """The executor's action that creates OBJ marked with TOKEN; its undo removes the
    object only when this attempt provably made it (answered, or read back with TOKEN)."""
    obj = _marked(obj, token)
    answered: list[bool] = []  # the create was answered with success

    def run() -> dict:
        created = kube.create(obj)
        answered.append(True)
        return created

    return Action(
        step or create_step(obj),
        run,
        undo=lambda: _remove(kube, obj, token, certain=bool(answered)),
        name=f"{obj['kind']}/{obj['metadata']['name']}",
        remove_with=delete_command(obj),
    )


def delete_command(obj: dict) -> str:
    """The kubectl command that removes OBJ (a custom resource named with its API group, so
    that no other group's kind of the same name is meant)."""
    kind, name, namespace = _where(obj)
    group = (obj.get("apiVersion") or "").rpartition("/")[0]
    resource = f"{kind.lower()}.{group}" if group else kind.lower()
    return f"kubectl delete {resource} {name}" + (f" -n {namespace}" if namespace else "")


def _remove(kube: Kube, obj: dict, token: str, certain: bool) -> str | None:
    """None: it does not exist (or is not ours); "": removed; otherwise why it is left."""
    kind, name, namespace = _where(obj)
    version = obj.get("apiVersion")
    if not certain:
        try:
            current = kube.read(kind, name, namespace, api_version=version)
        except NotFound:
            return None
        except GpuctlError as e:
            return f"may exist; checking failed: {e.message}"
        if _token(current) != token:
            return None  # someone else's object of that name
    try:
        kube.delete(kind, name, namespace, api_version=version)
        return ""
    except NotFound:
        return ""
    except NoAnswer as e:
        try:  # the delete may have been carried out
            current = kube.read(kind, name, namespace, api_version=version)
        except NotFound:
            return ""
        except GpuctlError:
            return f"deleting it failed: {e.message}"
        if meta(current).get("deletionTimestamp"):
            return ""  # being deleted
        return f"deleting it failed: {e.message}"
    except GpuctlError as e:
        return f"deleting it failed: {e.message}"


def _where(obj: dict) -> tuple[str, str, str | None]:
    return obj["kind"], name_of(obj), namespace_of(obj) or None


def _token(obj: dict) -> str | None:
    return annotations_of(obj).get(ATTEMPT_ANNOTATION)
