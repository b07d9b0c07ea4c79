"""Changes to objects already in the cluster that hold only while the object is as gpuctl
expects, for every workflow that changes them in place (reclaim, make-room, mig rebalance,
mig configure on a cluster). Each write re-reads the object first and carries what it
checked as a precondition the API server enforces, so that another client's change made
just before it (a mark, a cordon, a config, a pod replaced under the same name) stops it
with the reason instead of being overwritten:

- `change_fields` sets fields only while the fields gpuctl expects still hold (JSON patch
  `test`s), and `field_action` makes it a step of the executor whose undo puts the fields
  back only while they hold what gpuctl wrote: another client's value is never undone;
- `patch_checked` re-reads an object, checks it (its uid, a mark, what the plan counted
  on) and patches it carrying the resourceVersion it checked;
- `Evictions` evicts pods re-read, checked and held by their uid and resourceVersion,
  reads back whether a pod is gone after a lost or failed answer, and keeps the account of
  every pod evicted, and of the one under way when a run stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuctl.adapters.kube import KINDS, Conflict, Invalid, Kube, NoAnswer, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.common.plan import Step
from gpuctl.k8s import patches
from gpuctl.k8s.objects import Ref, controller_of, meta, name_of, namespace_of, uid_of
from gpuctl.k8s.patches import Path
from gpuctl.runtime.workflow import Action

ATTEMPTS = 3  # reads and writes when something else changed the object in between


class Changed(GpuctlError):
    """The object is not as gpuctl expected: another client changed or replaced it."""


class Gone(Changed):
    """The object is not there any more."""


@dataclass(frozen=True)
class Target:
    """An object in the cluster, as a workflow names it."""

    kind: str
    name: str
    namespace: str | None = None
    api_version: str | None = None

    @property
    def text(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind if self.namespace else self.kind.lower()} {where}{self.name}"

    def read(self, kube: Kube) -> dict:
        return kube.read(self.kind, self.name, self.namespace, self.api_version)

    def patch(self, kube: Kube, body: dict | list) -> dict:
        return kube.patch(self.kind, self.name, self.namespace, body, self.api_version)


def _shown(value: Any) -> str:
    return "unset" if value is None or value is False else json.dumps(value)


def _field(path: Path) -> str:
    return (
        path[-1]
        if path[:2] in (("metadata", "labels"), ("metadata", "annotations"))
        else ".".join(path)
    )


def differs(obj: dict, expect: Mapping[Path, Any]) -> str | None:
    """How OBJ differs from EXPECT, in words, or None."""
    path = patches.what_differs(obj, expect)
    if path is None:
        return None
    now = patches.value_at(obj, path)
    return f"{_field(path)} is {_shown(now)}, not {_shown(expect[path])}"


def change_fields(
    kube: Kube, target: Target, expect: Mapping[Path, Any], fields: Mapping[Path, Any]
) -> dict:
    """Set FIELDS (None: remove) on TARGET while each field of EXPECT holds its value (None:
    unset); the object as it is after. Raises Changed naming the field another client
    changed, seen on the re-read or refused by the patch's tests."""
    for _ in range(ATTEMPTS):
        obj = target.read(kube)
        why = differs(obj, expect)
        if why:
            raise Changed(f"{target.text}: {why}: another client changed it; left as it is")
        try:
            return target.patch(kube, patches.change(obj, expect, fields))
        except Invalid:
            if meta(target.read(kube)).get("resourceVersion") == meta(obj).get("resourceVersion"):
                raise  # refused as it is, not for a change made in between
        except Conflict:
            continue  # changed in between: read it again
        except NoAnswer:
            now = target.read(kube)  # the patch may have been applied
            if patches.what_differs(now, fields) is None:
                return now
    raise Changed(f"{target.text} kept changing while gpuctl tried to change it; left as it is")


def restore_fields(
    kube: Kube, target: Target, ours: Mapping[Path, Any], before: Mapping[Path, Any]
) -> str | None:
    """Put BEFORE back while the fields hold OURS, gpuctl's values. None: they never did
    (gpuctl's change did not land); "": put back; else why the fields are left."""
    try:
        obj = target.read(kube)
    except NotFound:
        return None
    except GpuctlError as e:
        return f"reading it failed: {e.message}"
    why = differs(obj, ours)
    if why:
        if patches.what_differs(obj, before) is None:
            return None
        return f"{why}: another client's, left as it is"
    try:
        change_fields(kube, target, ours, before)
    except Changed as e:
        return e.message
    except GpuctlError as e:
        return f"putting it back failed: {e.message}"
    return ""


def field_action(
    kube: Kube, step: Step, target: Target, before: Mapping[Path, Any], ours: Mapping[Path, Any]
) -> Action:
    """The executor's step that changes TARGET's fields from BEFORE to OURS, and whose undo
    puts them back only while they hold OURS."""
    return Action(
        step,
        lambda: change_fields(kube, target, before, ours),
        undo=lambda: restore_fields(kube, target, ours, before),
    )


def patch_checked(
    kube: Kube,
    target: Target,
    body: dict,
    uid: str | None,
    check: Callable[[dict], str | None] = lambda obj: None,
) -> dict:
    """Patch TARGET with BODY (a merge patch) while it is the object of UID (None: any) and
    CHECK finds nothing against it (CHECK: why not, in words, or None), carrying the
    resourceVersion it checked. Raises Changed with the reason."""
    for _ in range(ATTEMPTS):
        obj = read_unreplaced(kube, target, uid)
        why = check(obj)
        if why:
            raise Changed(f"{target.text}: {why}")
        version = meta(obj).get("resourceVersion")
        held = {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": version}}
        try:
            return target.patch(kube, held)
        except Conflict:
            continue  # changed in between: check it again
    raise Changed(f"{target.text} kept changing while gpuctl tried to change it; left as it is")


def read_unreplaced(kube: Kube, target: Target, uid: str | None) -> dict:
    """TARGET as it is now, while it is the object of UID (None: any); Changed otherwise."""
    try:
        obj = target.read(kube)
    except NotFound:
        raise Gone(f"{target.text} is gone") from None
    if uid and uid_of(obj) != uid:
        raise Changed(
            f"{target.text} was replaced under the same name (uid {uid_of(obj)}, not {uid})"
        )
    return obj


def read_chain(kube: Kube, obj: Mapping[str, Any]) -> dict[Ref, dict]:
    """OBJ's controllers up the chain, read now, by (kind, namespace, name). One gpuctl cannot
    read (a kind it does not handle, RBAC, gone) ends it: gpuctl.k8s.marks then says so."""
    namespace = namespace_of(obj) or "default"
    found: dict[Ref, dict] = {}
    ref = controller_of(obj)
    while ref is not None and ref.get("kind") in KINDS and len(found) < 10:
        key = (str(ref.get("kind")), namespace, str(ref.get("name") or ""))
        if key in found:
            break
        try:
            up = kube.read(key[0], key[2], namespace, ref.get("apiVersion"))
        except GpuctlError:
            break
        found[key] = up
        ref = controller_of(up)
    return found


@dataclass
class Evictions:
    """The pods a run evicted, and the one under way when it stopped."""

    done: list[str] = field(default_factory=list)  # namespace/name, in order
    under_way: str | None = None  # its eviction was sent, its outcome not known
    interrupted: str | None = None  # the pod being evicted when Ctrl-C came, and its fate

    def evict(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        uid: str | None,
        check: Callable[[dict], str | None] = lambda pod: None,
    ) -> bool:
        """Evict the pod while it is the pod of UID (None: any) and CHECK finds nothing
        against it (read now; the eviction holds it by uid and resourceVersion). False when
        it is gone already. A lost or failed answer is read back: a pod gone (or replaced by
        its controller) was evicted. Raises Changed with the reason it was not."""
        target = Target("Pod", name, namespace)
        key = f"{namespace}/{name}"
        for _ in range(ATTEMPTS):
            try:
                pod = read_unreplaced(kube, target, uid)
            except Gone:
                return False
            why = check(pod)
            if why:
                raise Changed(f"pod {key}: {why}; not evicted")
            self.under_way = key
            try:
                kube.evict(name, namespace, uid_of(pod), meta(pod).get("resourceVersion"))
            except NotFound:
                self.under_way = None
                return False
            except Conflict:
                self.under_way = None
                continue  # changed just before: check it again
            except NoAnswer as e:
                try:
                    gone = self._gone(kube, pod)
                except GpuctlError:
                    raise e from None  # its outcome unknown: under way
                if not gone:
                    self.under_way = None
                    raise
            except GpuctlError:  # refused (a budget's 429, RBAC): not evicted
                self.under_way = None
                raise
            except KeyboardInterrupt:
                self._read_back(kube, pod)
                raise
            self.done.append(key)
            self.under_way = None
            return True
        raise Changed(f"pod {key} kept changing while gpuctl tried to evict it; not evicted")

    def _gone(self, kube: Kube, pod: dict) -> bool:
        """Whether POD is gone (or going): read back after a lost or failed answer. Raises
        when it cannot be read back (the outcome stays unknown: `under_way`)."""
        try:
            now = kube.read("Pod", name_of(pod), namespace_of(pod))
        except NotFound:
            return True
        return uid_of(now) != uid_of(pod) or bool(meta(now).get("deletionTimestamp"))

    def _read_back(self, kube: Kube, pod: dict) -> None:
        """After Ctrl-C during an eviction: whether it went, as far as one read tells."""
        key = f"{namespace_of(pod)}/{name_of(pod)}"
        self.interrupted = f"{key}: it may be gone"
        try:
            gone = self._gone(kube, pod)
        except (GpuctlError, KeyboardInterrupt):
            return
        self.interrupted = f"{key}: " + ("it is gone" if gone else "it is still there")
        if gone:
            self.done.append(key)
        self.under_way = None

    @property
    def begun(self) -> bool:
        """Whether the run evicted a pod, or set out to (its outcome said by `account`)."""
        return bool(self.done or self.under_way or self.interrupted)

    def account(self) -> str:
        """`evicted: ml/a, ml/b`, and the pod whose eviction was under way when the run
        stopped, if any."""
        text = "evicted: " + (", ".join(self.done) or "nothing")
        if self.interrupted:
            text += f"; interrupted while evicting {self.interrupted}"
        elif self.under_way:
            text += f"; evicting {self.under_way} when it stopped: it may be gone"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "evicted": list(self.done),
            "evicting": self.under_way or (self.interrupted or "").partition(":")[0] or None,
        }
