"""Creating several Kubernetes objects all together or not at all, and saying the truth
when that cannot be done.

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
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuctl.adapters.kube import Kube, NoAnswer, NotFound
from gpuctl.common.errors import GpuctlError, Interrupted

ATTEMPT_ANNOTATION = "gpuctl.io/create-attempt"


@dataclass
class _Sent:
    obj: dict
    certain: bool = False  # its create was answered with success


@dataclass
class Rollback:
    removed: list[str] = field(default_factory=list)  # "Service/llama"
    left: list[str] = field(default_factory=list)  # "Job/llama (deleting it failed: …)"

    def describe(self, cleanup: str | None) -> tuple[str, list[str], str | None]:
        """(what to add to the message, detail lines, hint) for a failure or interrupt."""
        if self.left:
            return (
                f"; rollback incomplete: {len(self.left)} object(s) left in the cluster",
                [f"left: {what}" for what in self.left],
                f"remove them with: {cleanup}" if cleanup else None,
            )
        if self.removed:
            return (
                "; the objects created before the failure were removed: " + ", ".join(self.removed),
                [],
                None,
            )
        return "; nothing was changed", [], None


def create_all(
    kube: Kube,
    objects: list[dict],
    *,
    cleanup: str | None = None,
    explain: Callable[[GpuctlError, dict], GpuctlError] | None = None,
) -> list[dict]:
    """Create `objects` in order (each in its metadata.namespace); return what the server
    answered. On a failure or Ctrl-C, remove what this call created and raise the error
    (Interrupted for Ctrl-C) extended with what was undone, or what is left and `cleanup`,
    the command that removes it. `explain(error, obj)` may restate the error of a create
    for the user (e.g. a name that is taken)."""
    token = uuid.uuid4().hex
    sent: list[_Sent] = []
    created: list[dict] = []
    failure: GpuctlError | None = None
    try:
        for obj in objects:
            meta = obj.get("metadata") or {}
            marked = {
                **obj,
                "metadata": {
                    **meta,
                    "annotations": {**(meta.get("annotations") or {}), ATTEMPT_ANNOTATION: token},
                },
            }
            entry = _Sent(marked)
            sent.append(entry)  # before the request: Ctrl-C can land while it is in flight
            try:
                created.append(kube.create(marked))
            except NoAnswer:
                raise  # it may exist: read back before rolling back
            except GpuctlError:
                sent.pop()  # the server refused it: nothing was made
                raise
            entry.certain = True
        return created
    except GpuctlError as e:
        failure = e
    except KeyboardInterrupt:
        pass
    suffix, details, hint = _roll_back(kube, sent, token).describe(cleanup)
    if failure is None:
        raise Interrupted(
            "interrupted" + suffix.replace("before the failure", "before the interrupt"),
            hint=hint,
            details=details,
        )
    error = explain(failure, obj) if explain else failure
    error.message += suffix
    error.details = [*error.details, *details]
    error.hint = hint or error.hint
    raise error


def _roll_back(kube: Kube, sent: list[_Sent], token: str) -> Rollback:
    """Remove, newest first, what this attempt made. A second Ctrl-C stops the rollback:
    what it did not get to is reported as left."""
    result = Rollback()
    pending = list(reversed(sent))
    try:
        while pending:
            entry = pending[0]
            outcome = _remove(kube, entry, token)
            if outcome is None:
                pass
            elif outcome == "":
                result.removed.append(_name(entry.obj))
            else:
                result.left.append(f"{_name(entry.obj)} ({outcome})")
            pending.pop(0)
    except KeyboardInterrupt:
        result.left += [f"{_name(e.obj)} (rollback interrupted)" for e in pending]
    return result


def _remove(kube: Kube, entry: _Sent, token: str) -> str | None:
    """None: it does not exist (or is not ours); "": removed; otherwise why it is left."""
    kind, name, namespace = _where(entry.obj)
    if not entry.certain:
        try:
            current = kube.read(kind, name, namespace)
        except NotFound:
            return None
        except GpuctlError as e:
            return f"may exist; checking failed: {e.message}"
        if _token(current) != token:
            return None  # someone else's object of that name
    try:
        kube.delete(kind, name, namespace)
        return ""
    except NotFound:
        return ""
    except NoAnswer as e:
        try:  # the delete may have been carried out
            current = kube.read(kind, name, namespace)
        except NotFound:
            return ""
        except GpuctlError:
            return f"deleting it failed: {e.message}"
        if (current.get("metadata") or {}).get("deletionTimestamp"):
            return ""  # being deleted
        return f"deleting it failed: {e.message}"
    except GpuctlError as e:
        return f"deleting it failed: {e.message}"


def _where(obj: dict) -> tuple[str, str, str | None]:
    meta = obj.get("metadata") or {}
    return obj["kind"], meta["name"], meta.get("namespace")


def _name(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _token(obj: dict) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(ATTEMPT_ANNOTATION)
