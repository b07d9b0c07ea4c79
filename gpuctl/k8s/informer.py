"""One kind's objects kept as client-go's reflector keeps them (kubernetes/client-go
tools/cache/reflector.go, ListAndWatch): list, then watch from the list's resourceVersion
with bookmarks; every event and BOOKMARK moves the resourceVersion on, and the next watch
resumes from it (a watch that ends is no reason to list again); a watch answered 410 Gone
(the server no longer keeps events that old) lists again and replaces the store, which
drops what was deleted meanwhile.

Pure: the list and the watch are functions given (gpuctl.adapters.kube.Kube's
`list_with_version` and `watch`); a caller that shares the store with other threads gives
a lock as `guard`, held while the store and its `on_change` change. A `transform` is
client-go's SharedIndexInformer.SetTransform (tools/cache/shared_informer.go): each listed or
watched object passes through it before the store and the callbacks see it, to drop what
the caller never reads (a pod's managedFields, env, volumes, status) and so save memory; it
returns a new object, never changing the one it is given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from gpuctl.common.errors import BackendError
from gpuctl.k8s.objects import meta, name_of, namespace_of

CHANGES = ("ADDED", "MODIFIED", "DELETED")


class Expired(BackendError):
    """HTTP 410 Gone (reason Expired): the resourceVersion a watch or list named is older
    than what the API server keeps; only a fresh list helps."""


Lister = Callable[[], tuple[list[dict[str, Any]], str]]  # (the objects, the list's version)
Watcher = Callable[[str], Iterable[dict[str, Any]]]  # events ({type, object}) after VERSION
OnChange = Callable[[str, dict[str, Any]], None]  # (ADDED/MODIFIED/DELETED, the object)
OnReplace = Callable[[list[dict[str, Any]]], None]  # all the objects, after a list
Transform = Callable[[dict[str, Any]], dict[str, Any]]  # what is kept of an object


def key_of(obj: dict[str, Any]) -> str:
    """client-go's MetaNamespaceKeyFunc: NAMESPACE/NAME, or NAME of a cluster-scoped one."""
    namespace = namespace_of(obj)
    return f"{namespace}/{name_of(obj)}" if namespace else name_of(obj)


def version_of(obj: dict[str, Any]) -> str:
    return str(meta(obj).get("resourceVersion") or "")


class Informer:
    """The store of one kind and the resourceVersion it is current to. `lists` counts the
    lists it made (the first one and each after a 410)."""

    def __init__(
        self,
        lister: Lister,
        watcher: Watcher,
        on_change: OnChange | None = None,
        on_replace: OnReplace | None = None,
        guard: contextlib.AbstractContextManager[Any] | None = None,
        transform: Transform | None = None,
    ):
        self._list, self._watch = lister, watcher
        self._on_change, self._on_replace = on_change, on_replace
        self._guard = guard if guard is not None else contextlib.nullcontext()
        self._transform = transform if transform is not None else _whole
        self.store: dict[str, dict[str, Any]] = {}
        self.version = ""
        self.lists = 0

    def objects(self) -> list[dict[str, Any]]:
        return list(self.store.values())

    def relist(self) -> None:
        """List, and replace the store with what the list holds."""
        items, version = self._list()
        self.lists += 1
        kept = [self._transform(obj) for obj in items]
        with self._guard:
            self.store = {key_of(obj): obj for obj in kept}
            self.version = version
            if self._on_replace is not None:
                self._on_replace(self.objects())

    def follow(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """One watch from the resourceVersion reached, applied as its events come, until
        the server ends it or STOP says so; listed first when never listed. True when it
        had to list again (410 Gone)."""
        if self.lists == 0:
            self.relist()
        try:
            for event in self._watch(self.version):
                self.apply(event)
                if stop():
                    break
        except Expired:
            self.relist()
            return True
        return False

    def apply(self, event: dict[str, Any]) -> None:
        """One watch event into the store; a BOOKMARK only moves the resourceVersion on."""
        kind, obj = event.get("type"), event.get("object") or {}
        version = version_of(obj)
        if kind in CHANGES:
            obj = self._transform(obj)
        with self._guard:
            if version:
                self.version = version
            if kind not in CHANGES:
                return
            if kind == "DELETED":
                self.store.pop(key_of(obj), None)
            else:
                self.store[key_of(obj)] = obj
            if self._on_change is not None:
                self._on_change(str(kind), obj)


def _whole(obj: dict[str, Any]) -> dict[str, Any]:
    return obj
