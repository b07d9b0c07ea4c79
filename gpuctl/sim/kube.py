"""The Kubernetes API emulator (kmock) over real HTTP, on its own event loop in a thread,
so the official synchronous `kubernetes` client talks to it exactly as to a cluster. The
tests' stand-in (tests/standins/kube.py) and `gpuctl sandbox` run it; a simulator, not a
Kubernetes API server."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

from gpuctl.k8s.selectors import label_selector_matches

VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-kmock",
    "gitCommit": "0",
    "gitTreeState": "clean",
    "buildDate": "2024-01-01T00:00:00Z",
    "goVersion": "go1.21",
    "compiler": "gc",
    "platform": "linux/amd64",
}


_namespace_paths_patched = False


def _patch_namespace_paths() -> None:
    """kmock 0.8 fails (HTTP 500) to parse /api/v1/namespaces[/NAME[/status]]."""
    global _namespace_paths_patched
    from kmock._internal import parsing

    if _namespace_paths_patched:
        return
    original = parsing.parse_path

    def parse_path(path):
        parts = path.strip("/").split("/")
        if parts[:3] == ["api", "v1", "namespaces"] and (
            len(parts) <= 4 or (len(parts) == 5 and parts[4] in ("status", "finalize"))
        ):
            return parsing.ParsedPath(
                "",
                "v1",
                "namespaces",
                None,
                parts[3] if len(parts) > 3 else None,
                parts[4] if len(parts) > 4 else None,
            )
        return original(path)

    parsing.parse_path = parse_path
    _namespace_paths_patched = True


_api_server = None
_current_request: contextvars.ContextVar = contextvars.ContextVar("kmock_request")


def api_server_class():
    """kmock's emulator, extended the way its docs invite (a subclass) to answer as a real
    API server does, so that real clients (the official client, kubectl) read it:

    - objects carry `kind`, `apiVersion`, `metadata.uid`, `creationTimestamp`, `generation`
      (of objects with a spec; one more when a patch changes it) and a `resourceVersion`
      from one counter that every write advances (a delete too); a patch that names a
      `metadata.resourceVersion` other than the object's is refused (409), as a real
      server's optimistic concurrency does; a JSON patch is applied whole or not at all:
      one whose `test` fails (or whose path is missing) is refused with the server's
      422 (`the server rejected our request due to an error in our request`);
    - lists are `<Kind>List`s with the list's `resourceVersion`; their items, as a real
      server sends them, have no `kind`/`apiVersion` of their own (custom resources'
      items keep theirs, as a real server's do);
    - a watch as kube-apiserver's watch cache serves it (staging/src/k8s.io/apiserver/pkg/
      storage/cacher): without a `resourceVersion` (or "0") the objects as ADDED, then what
      changes; from a `resourceVersion`, every event newer than it, kept in a bounded
      history per resource (`history` events, the cache's capacity), and an ERROR event
      with a 410 Status (reason Expired, "too old resource version") when events newer
      than it are no longer kept; with `allowWatchBookmarks=true`, a BOOKMARK (an object
      with only its kind and resourceVersion) every `bookmark_s` seconds and just before
      `timeoutSeconds` ends the watch, never ahead of what the watch has sent (its
      version: the newest when the watch began, or of the last event it took since);
      `watch_s` ends every watch sooner (as a restart or a load balancer would);
    - errors are `Status` bodies with the reasons and messages a real server uses
      (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, …) and `details` naming the
      object;
    - API discovery names the core group version "v1" (kmock says "/v1");
    - creating a CustomResourceDefinition makes its served versions appear in API discovery
      (/apis, /apis/GROUP, /apis/GROUP/VERSION) and their objects servable;
    - an object of a resource the server does not have is refused (404), not stored;
    - a custom resource written (created or patched) is checked against its CRD's schema
      and CEL rules (gpuctl/sim/crd_schema.py) and refused with 422 when invalid. Stricter than
      an API server on one point: an unknown field is refused, where a server would prune
      it (gpuctl would lose it). Transition rules (oldSelf) and admission webhooks are not
      run;
    - pod logs (`pods/NAME/log`: follow, container, tailLines, sinceSeconds, timestamps,
      limitBytes) from the lines the simulated containers wrote (gpuctl/sim/pod_logs.py),
      gone with the pod; the Eviction API (`pods/NAME/eviction`), budgets held.

    Not done (a real server does): label and field selectors (ignored, but
    `metadata.name=NAME`), PUT, dryRun
    (ignored), server-side apply, strategic-merge list semantics (lists are replaced),
    Table answers for kubectl (kubectl prints the plain lists itself), protobuf
    bodies (415: kubectl's typed generators such as `kubectl create namespace` send them;
    `-f` files go as JSON), field validation of built-in kinds, conversion between a
    custom resource's versions (each version's objects are apart), refusing objects in a
    namespace that does not exist.
    """
    global _api_server
    if _api_server is not None:
        return _api_server
    import collections
    import copy
    import datetime
    import re
    import uuid

    import attrs
    import kmock
    from kmock._internal import aiobus, dicts, k8s  # k8s: the conflict error kmock does not export

    from gpuctl.sim import crd_schema

    crds = kmock.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    pods = kmock.resource("", "v1", "pods")
    pdbs = kmock.resource("policy", "v1", "poddisruptionbudgets")
    create, update, delete = kmock.action.CREATE, kmock.action.UPDATE, kmock.action.DELETE

    def group_version(res) -> str:
        return f"{res.group}/{res.version}" if res.group else res.version

    def revision(obj: dict) -> int:
        try:
            return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        except (TypeError, ValueError):
            return 0

    def named(params) -> str | None:
        """The NAME of a `fieldSelector=metadata.name=NAME` (the one field selector served)."""
        found = (params.get("fieldSelector") or "").partition("metadata.name=")[2]
        return found.partition(",")[0] or None

    class _RecordingBus(aiobus.Bus):
        """kmock's event bus of one resource, which also tells RECORD each event put."""

        record: Any = None

        async def put(self, *items) -> None:
            for item in items:
                self.record(item)
            await super().put(*items)

    class _RecordingBuses(dict):
        def __init__(self, record) -> None:
            super().__init__()
            self.record = record

        def __missing__(self, resource):
            bus = self[resource] = _RecordingBus()
            bus.record = lambda event: self.record(resource, event)
            return bus

    @attrs.define(kw_only=True)
    class ApiServerEmulator(kmock.KubernetesEmulator):
        _schemas: dict = attrs.field(factory=dict, init=False)  # resource -> (CRD, version)
        _revision: int = attrs.field(default=1, init=False)  # the last resourceVersion given
        # the watch cache: events kept per resource, and the newest resourceVersion of an
        # event it dropped (a watch from before it is answered 410); the newest sent at all
        history: int = attrs.field(default=1000, init=False)
        bookmark_s: float = attrs.field(default=60.0, init=False)
        # the longest any watch lasts (None: its timeoutSeconds): watches also end early
        # when an API server restarts or a load balancer drops idle connections
        watch_s: float | None = attrs.field(default=None, init=False)
        _kept: dict = attrs.field(factory=dict, init=False)
        _dropped: dict = attrs.field(factory=dict, init=False)
        _sent: int = attrs.field(default=1, init=False)
        # (namespace, pod, container) -> what the container wrote (pod_logs.ContainerLog)
        logs: dict = attrs.field(factory=dict, init=False)

        async def _handle(self, request):
            _current_request.set(request)  # for _render_error (each request has its task)
            res, act = request.resource, request.action
            if res == pods and request.subresource == "eviction" and request.name:  # a POST
                return await self._evict(request)
            sent = request.headers.get("Content-Type", "application/json")
            if request.body and "json" not in sent:
                # kubectl sends built-in kinds as protobuf; it falls back to JSON on a 415
                raise kmock.KubernetesError(
                    status=415,
                    reason="UnsupportedMediaType",
                    message=f"the body of the request was in an unknown format - accepted "
                    f"media types include: application/json, application/merge-patch+json, "
                    f"application/json-patch+json, application/strategic-merge-patch+json "
                    f"(not {sent})",
                )
            if res is not None and act in (create, update):
                if res not in self.resources:
                    raise kmock.KubernetesResourceNotFoundError()
                if res in self._schemas and request.subresource in (None, "status"):
                    self._check(request)
            if res is not None and act in (create, update, delete):
                await self._stamp(request)
            response = await super()._handle(request)
            if res == crds and act == create and response.status < 300:
                self._serve(request.data)
            if res == pods and act == delete and request.name and response.status < 300:
                self.forget_logs(request.namespace, request.name)
            return response

        async def _serve_log(self, request):
            from gpuctl.sim import pod_logs

            found = self._stored(request)
            if found is None:
                raise kmock.KubernetesObjectNotFoundError()
            pod = found.raw
            try:
                container = pod_logs.container_of(pod, dict(request.params))
                key = (request.namespace, request.name, container)
                uid = (pod.get("metadata") or {}).get("uid")

                def gone() -> bool:
                    now = self._stored(request)
                    return now is None or (now.raw.get("metadata") or {}).get("uid") != uid

                return pod_logs.serve(dict(request.params), pod, self.logs.get(key), gone)
            except pod_logs.LogError as e:
                raise kmock.KubernetesError(
                    status=e.status, reason=e.reason, message=e.message
                ) from None

        def start_log(self, namespace: str, pod: str, container: str) -> None:
            """The container started: a new, empty log."""
            from gpuctl.sim import pod_logs

            old = self.logs.get((namespace, pod, container))
            if old is not None:
                old.end()
            self.logs[namespace, pod, container] = pod_logs.ContainerLog()

        def log_line(self, namespace: str, pod: str, container: str, text: str, when: float):
            if (namespace, pod, container) not in self.logs:
                self.start_log(namespace, pod, container)
            self.logs[namespace, pod, container].add(when, text)

        def end_log(self, namespace: str, pod: str, container: str) -> None:
            if (namespace, pod, container) in self.logs:
                self.logs[namespace, pod, container].end()

        def forget_logs(self, namespace: str, pod: str) -> None:
            for key in [k for k in self.logs if k[:2] == (namespace, pod)]:
                self.logs.pop(key).end()

        async def _evict(self, request):
            """The Eviction API as the API server runs it: a pod no PodDisruptionBudget
            selects is deleted; one selected by a budget is deleted only while the budget's
            status allows a disruption (which the eviction uses up), else 429; a pod that
            two budgets select is refused with 500, as the server does. The Eviction's
            deleteOptions.preconditions (uid, resourceVersion) are checked as the server's
            delete checks them (409); here before the budget, not after it, since no
            disruption controller gives back a disruption a refused delete used up."""
            import aiohttp.web

            async with self._lock:
                key = (pods, request.namespace, request.name)
                pod = self.objects[key] if key in self.objects else None
                if pod is None or pod.deleted:
                    raise kmock.KubernetesObjectNotFoundError()
                labels = (pod.raw.get("metadata") or {}).get("labels") or {}
                budgets = [
                    obj
                    for (r, ns, _), obj in self.objects.items()
                    if r == pdbs and ns == request.namespace and not obj.deleted
                    and label_selector_matches((obj.raw.get("spec") or {}).get("selector"), labels)
                ]  # fmt: skip
                self._preconditions(request, pod.raw)
                if len(budgets) > 1:
                    raise kmock.KubernetesError(
                        status=500, reason="InternalError",
                        message="This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    )  # fmt: skip
                if budgets:
                    allowed = ((budgets[0].raw.get("status") or {}).get("disruptionsAllowed")) or 0
                    if allowed < 1:
                        raise kmock.KubernetesError(
                            status=429, reason="TooManyRequests",
                            message="Cannot evict pod as it would violate the pod's disruption budget.",
                        )  # fmt: skip
                    budgets[0].patch({"status": {"disruptionsAllowed": allowed - 1}})
                self._revision += 1  # the DELETED event carries the eviction's version
                pod.patch({"metadata": {"resourceVersion": str(self._revision)}})
                pod.delete()
                await self._buses[pods].put({"type": "DELETED", "object": pod.last.raw})
                self.forget_logs(request.namespace, request.name)
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
            return aiohttp.web.json_response(status, status=201)

        def _preconditions(self, request, pod: dict) -> None:
            """409 when the Eviction's deleteOptions.preconditions do not hold for POD."""
            body = request.data if isinstance(request.data, dict) else {}
            asked = (body.get("deleteOptions") or {}).get("preconditions") or {}
            meta = pod.get("metadata") or {}
            for field, name in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                if asked.get(field) is not None and str(asked[field]) != str(meta.get(field)):
                    raise kmock.KubernetesError(
                        status=409,
                        reason="Conflict",
                        message=f'Operation cannot be fulfilled on pods "{request.name}": '
                        f"Precondition failed: {name} in precondition: {asked[field]}, "
                        f"{name} in object meta: {meta.get(field)}",
                    )

        def __attrs_post_init__(self) -> None:
            super().__attrs_post_init__()
            self._buses = _RecordingBuses(self._record)
            # above kmock's own fallback for watches, below any reaction a test adds
            json_stream: Any = kmock.headers({"Content-Type": "application/json"})
            (self.fallback**1)[kmock.action.WATCH] << json_stream << self._serve_watch
            text: Any = kmock.headers({"Content-Type": "text/plain"})
            (self.fallback**1)[pods, kmock.subresource("log")] << text << self._serve_log
            self["get /openapi/v3"] << self._serve_openapi
            self["get", re.compile(r"/openapi/v3/.+")] << self._serve_openapi_group

        def _openapi_groups(self) -> dict:
            """The served group versions as OpenAPI v3 names them ("api/v1", "apis/G/V")."""
            groups: dict = {}
            for res in self._get_resources():
                if isinstance(res.group, str) and isinstance(res.version, str) and res.plural:
                    key = f"apis/{res.group}/{res.version}" if res.group else f"api/{res.version}"
                    groups.setdefault(key, []).append(res)
            return groups

        async def _serve_openapi(self, request):
            return {
                "paths": {
                    key: {"serverRelativeURL": f"/openapi/v3/{key}"}
                    for key in self._openapi_groups()
                }
            }

        async def _serve_openapi_group(self, request):
            """What kubectl reads of a group version's OpenAPI: that PATCH takes
            `fieldValidation` (it then leaves validation to the server). No schemas."""
            key = request.url.path.removeprefix("/openapi/v3/")
            resources = self._openapi_groups().get(key)
            if resources is None:
                raise kmock.KubernetesNotFoundError()
            paths = {}
            for res in resources:
                info = self._info(res)
                if info is None or not info.kind or "/" in res.plural:
                    continue
                where = "/namespaces/{namespace}" if info.namespaced else ""
                gvk = {"group": res.group, "version": res.version, "kind": info.kind}
                paths[f"/{key}{where}/{res.plural}/{{name}}"] = {
                    "patch": {
                        "x-kubernetes-group-version-kind": gvk,
                        "parameters": [
                            {"name": n, "in": "query", "schema": {"type": "string"}}
                            for n in ("dryRun", "fieldManager", "fieldValidation")
                        ],
                    }
                }
            return {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": "v1"},
                "paths": paths,
            }

        def _stored(self, request):
            key = (request.resource, request.namespace, request.name)
            if key not in self.objects or self.objects[key].deleted:
                return None
            return self.objects[key]

        async def _stamp(self, request) -> None:
            """What the server itself writes into an object it stores."""
            res, data = request.resource, request.data
            if request.action == create and isinstance(data, dict):
                data = copy.deepcopy(data)
                if not isinstance(data.get("metadata"), dict):
                    data["metadata"] = {}
                meta = data["metadata"]
                info = self._info(res)
                if info is not None and info.kind:
                    data["kind"] = info.kind
                data["apiVersion"] = group_version(res)
                if request.namespace:
                    meta["namespace"] = request.namespace
                self._revision += 1
                meta.update(
                    uid=str(uuid.uuid4()),
                    resourceVersion=str(self._revision),
                    creationTimestamp=datetime.datetime.now(datetime.timezone.utc).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"
                    ),
                )
                if "spec" in data:
                    meta["generation"] = 1
                object.__setattr__(request, "data", data)
                return
            stored = self._stored(request)
            if stored is None or request.name is None:
                return  # kmock answers 404 itself
            if request.action == delete:
                # the DELETED event (or, with finalizers, the MODIFIED one that sets the
                # deletionTimestamp) carries the delete's version
                meta = stored.get("metadata") or {}
                if meta.get("deletionTimestamp") and meta.get("finalizers"):
                    return  # being deleted already: nothing changes
                async with self._lock:
                    self._revision += 1
                    stored.patch({"metadata": {"resourceVersion": str(self._revision)}})
                return
            current = stored.raw
            meta = current.get("metadata") or {}
            if isinstance(data, dict):
                data = copy.deepcopy(data)
                asked = (data.get("metadata") or {}).get("resourceVersion")
                if asked is not None and str(asked) != str(meta.get("resourceVersion")):
                    raise kmock.KubernetesError(
                        status=409,
                        reason="Conflict",
                        message=f"Operation cannot be fulfilled on {self._plural(res)} "
                        f'"{request.name}": the object has been modified; please apply '
                        "your changes to the latest version and try again",
                    )
                if not isinstance(data.get("metadata"), dict):
                    data["metadata"] = {}
                self._revision += 1
                data["metadata"]["resourceVersion"] = str(self._revision)
                if "spec" in data and request.subresource is None and "generation" in meta:
                    data["metadata"]["generation"] = int(meta["generation"]) + 1
            elif isinstance(data, list):  # a JSON patch
                try:  # all or nothing: a failed `test` (or a bad path) changes nothing
                    dicts.json_patch_dict(copy.deepcopy(current), data)
                except Exception:
                    raise kmock.KubernetesError(
                        status=422,
                        reason="Invalid",
                        message="the server rejected our request due to an error in our request",
                        details={},
                    ) from None
                self._revision += 1
                data = [
                    *data,
                    {
                        "op": "add",
                        "path": "/metadata/resourceVersion",
                        "value": str(self._revision),
                    },
                ]
            object.__setattr__(request, "data", data)

        def _info(self, res):
            try:
                return self.resources[res]
            except (KeyError, TypeError):
                return None

        def _plural(self, res) -> str:
            return f"{res.plural}.{res.group}" if res.group else str(res.plural)

        async def _serve_version(self, request):
            answer = await super()._serve_version(request)
            answer["groupVersion"] = group_version(request.resource)
            return answer

        async def _serve_list(self, request):
            answer = await super()._serve_list(request)
            res = request.resource
            info = self._info(res)
            custom = res in self._schemas
            name = named(request.params)
            return {
                "kind": f"{info.kind if info is not None and info.kind else 'List'}List",
                "apiVersion": group_version(res),
                # the newest event sent (read with the items: nothing ran in between), so
                # that a watch from it sends whatever the list did not have
                "metadata": {"resourceVersion": str(self._sent)},
                "items": [
                    item
                    if custom
                    else {k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
                    for item in answer["items"]
                    if name in (None, (item.get("metadata") or {}).get("name"))
                ],
            }

        def _record(self, resource, event: dict) -> None:
            """Keep EVENT in RESOURCE's history (every event goes through here, under
            self._lock, in the order of their resourceVersions, each newer than the last,
            as etcd's revisions are)."""
            obj = event.get("object") or {}
            version = revision(obj)
            if version <= self._sent:  # kmock's own DELETED once the last finalizer goes
                self._revision = version = self._revision + 1
                meta = {**(obj.get("metadata") or {}), "resourceVersion": str(version)}
                event["object"] = {**obj, "metadata": meta}
            kept = self._kept.setdefault(resource, collections.deque())
            kept.append((version, event))
            while len(kept) > max(self.history, 0):
                self._dropped[resource] = kept.popleft()[0]
            self._sent = max(self._sent, version)

        async def _serve_watch(self, request):
            params = request.params
            since = params.get("resourceVersion") or "0"
            if not since.isdigit():
                raise kmock.KubernetesError(
                    status=400, reason="BadRequest",
                    message=f'resourceVersion: Invalid value: "{since}": '
                    "strconv.ParseUint: parsing: invalid syntax",
                )  # fmt: skip
            loop = asyncio.get_running_loop()
            timeout = params.get("timeoutSeconds")
            lasts = [float(t) for t in (timeout, self.watch_s) if t]
            end = loop.time() + min(lasts) if lasts else None
            bookmarks = params.get("allowWatchBookmarks") == "true"
            name = named(params)
            res = request.resource
            bus = self._buses[res]

            def wanted(event: dict) -> bool:
                m = (event.get("object") or {}).get("metadata") or {}
                return (request.namespace in (None, m.get("namespace"))) and (
                    name in (None, m.get("name"))
                )

            yield b""  # the headers go now, as a server's do
            async with self._lock:  # what came before the mark is in the history
                mark = await bus.mark()
                # a BOOKMARK's version: what this watch has sent everything up to (the
                # server's newest when it began, then each event it takes from the bus)
                reached = self._sent
                if since == "0":
                    first = [
                        {"type": "ADDED", "object": obj.raw}
                        for (r, _, _), obj in self._objects.items()
                        if r == res and not obj.deleted
                    ]
                elif int(since) < self._dropped.get(res, 0):
                    first = [self._expired(int(since), self._dropped[res])]
                else:
                    first = [e for v, e in self._kept.get(res, ()) if v > int(since)]
            stream, pending = mark.__aiter__(), None
            beat = self._next_beat(loop.time(), end) if bookmarks else None
            try:
                for event in first:
                    if event["type"] == "ERROR":
                        yield event
                        return
                    if wanted(event):
                        yield event
                while True:
                    # one read of the bus stays pending across bookmarks: cancelling it
                    # would end kmock's stream
                    if pending is None:
                        pending = asyncio.ensure_future(stream.__anext__())
                    stop = min((t for t in (end, beat) if t is not None), default=None)
                    wait = None if stop is None else max(stop - loop.time(), 0)
                    done, _ = await asyncio.wait({pending}, timeout=wait)
                    if not done:
                        if end is not None and loop.time() >= end:
                            return
                        yield self._bookmark(res, reached)
                        beat = self._next_beat(loop.time(), end)
                        continue
                    try:
                        event = pending.result()
                    except StopAsyncIteration:
                        return
                    pending = None
                    reached = max(reached, revision(event.get("object") or {}))
                    if wanted(event):
                        yield event
            finally:
                if pending is not None:
                    pending.cancel()
                await bus.unmark(mark)

        def _next_beat(self, now: float, end: float | None) -> float | None:
            """When the next BOOKMARK goes: BOOKMARK_S from now, and one a second before
            the watch's end (then none: the watch ends)."""
            beat = now + self.bookmark_s
            if end is None:
                return beat
            return min(beat, end - 1.0) if now < end - 1.0 else None

        def _bookmark(self, res, version: int) -> dict:
            info = self._info(res)
            return {
                "type": "BOOKMARK",
                "object": {
                    "kind": info.kind if info is not None else "",
                    "apiVersion": group_version(res),
                    "metadata": {"resourceVersion": str(version)},
                },
            }

        @staticmethod
        def _expired(since: int, oldest: int) -> dict:
            """The watch cache's answer to a resourceVersion older than what it keeps."""
            return {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": f"too old resource version: {since} ({oldest})",
                    "reason": "Expired",
                    "code": 410,
                },
            }

        async def _render_error(self, exc):
            import aiohttp.web

            status, reason, message, details = self._status_of(exc)
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "details": details,
                "code": status,
            }
            return aiohttp.web.json_response(body, status=status)

        def _status_of(self, exc) -> tuple[int, str, str, dict]:
            """A real server's Status for what kmock raised (apimachinery's StatusReason)."""
            request = _current_request.get(None)
            res = getattr(request, "resource", None)
            name = getattr(request, "name", None) or (
                ((getattr(request, "data", None) or {}).get("metadata") or {}).get("name")
                if isinstance(getattr(request, "data", None), dict)
                else None
            )
            details = {"name": name, "group": res.group, "kind": res.plural} if res else {}
            details = {k: v for k, v in details.items() if v}
            what = f'{self._plural(res)} "{name}"' if res is not None else ""
            if isinstance(exc, kmock.KubernetesObjectNotFoundError):
                return 404, "NotFound", f"{what} not found", details
            if isinstance(exc, k8s.KubernetesObjectConflictError):
                return 409, "AlreadyExists", f"{what} already exists", details
            if isinstance(exc, kmock.KubernetesNotFoundError):
                return 404, "NotFound", "the server could not find the requested resource", {}
            if isinstance(exc, kmock.KubernetesError):
                found = details if exc.details is None else exc.details
                return exc.status, exc.reason or "", exc.message or "", found
            text = f"Internal error occurred: {exc!r}"
            return 500, "InternalError", text, {"causes": [{"message": text}]}

        def _check(self, request) -> None:
            res, data = request.resource, request.data
            if request.action == create:
                candidate, name = data, (data.get("metadata") or {}).get("name")
            else:
                candidate = self._stored(request)
                if candidate is None:
                    return  # the emulator answers 404 itself
                candidate = dicts.patch_dict(copy.deepcopy(candidate.raw), data)
                name = request.name
            definition, version = self._schemas[res]
            kind = definition["spec"]["names"]["kind"]
            if kind in crd_schema.CRD_FILES and definition == crd_schema.crd(kind):
                check = crd_schema.validator(kind, version)
            else:
                check = crd_schema.validator_of(definition, version)
            problems = crd_schema.errors(candidate, definition, check)
            if problems:
                raise kmock.KubernetesError(
                    status=422,
                    reason="Invalid",
                    message=f"{kind}.{res.group} {name!r} is invalid: " + "; ".join(problems),
                    details={
                        "name": name,
                        "group": res.group,
                        "kind": kind,
                        "causes": [{"reason": "FieldValueInvalid", "message": p} for p in problems],
                    },
                )

        def _serve(self, definition: dict) -> None:
            spec = definition["spec"]
            names = spec["names"]
            for v in spec["versions"]:
                if not v.get("served"):
                    continue
                res = kmock.resource(spec["group"], v["name"], names["plural"])
                self.resources[res] = kmock.ResourceInfo(
                    kind=names["kind"],
                    singular=names.get("singular"),
                    namespaced=spec["scope"] == "Namespaced",
                    verbs={"create", "delete", "get", "list", "patch", "update", "watch"},
                    shortnames=set(names.get("shortNames") or ()),
                    subresources={"status"} if "status" in (v.get("subresources") or {}) else (),
                )
                self._schemas[res] = (definition, v["name"])

    _api_server = ApiServerEmulator
    return _api_server


# Dynamic Resource Allocation's built-in kinds (resource.k8s.io; kubernetes/api
# resource/v1/types.go): plural -> (kind, namespaced, subresources). The API server of 1.34
# serves v1; 1.32 and 1.33 served v1beta1 and v1beta2 (DeviceTaintRule: alpha, left out).
DRA_KINDS = {
    "deviceclasses": ("DeviceClass", False, ()),
    "resourceslices": ("ResourceSlice", False, ()),
    "resourceclaims": ("ResourceClaim", True, ("status",)),
    "resourceclaimtemplates": ("ResourceClaimTemplate", True, ()),
}


def serve_dra(emulator, versions) -> None:
    """Make EMULATOR serve resource.k8s.io at VERSIONS, as an API server of that release:
    discovery, list, watch, get, create, patch, delete, and ResourceClaim's status."""
    import kmock

    for version in versions:
        for plural, (kind, namespaced, subresources) in DRA_KINDS.items():
            emulator.resources[kmock.resource("resource.k8s.io", version, plural)] = (
                kmock.ResourceInfo(
                    kind=kind,
                    singular=kind.lower(),
                    namespaced=namespaced,
                    verbs={"create", "delete", "deletecollection", "get", "list", "patch",
                           "update", "watch"},
                    subresources=set(subresources),
                )
            )  # fmt: skip


class KubeEmulator:
    """A running emulator: `.url` for clients, `.call(fn)` to touch its state safely.
    DRA: the versions of resource.k8s.io it serves (a 1.34 cluster's v1 unless told; () for
    a cluster without DRA)."""

    def __init__(self, dra: tuple[str, ...] = ("v1",)):
        self.dra = dra
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kmock", daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self):
        import kmock

        self._stop = asyncio.Event()
        async with api_server_class()() as emu, kmock.Server(emu) as srv:
            emu.resources.load_bundled()
            serve_dra(emu, self.dra)
            emu["get /version/"] << VERSION
            emu["get /apis/"] << emu._serve_apis  # the client asks with the slash
            self.emulator, self.url = emu, str(srv.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def start(self) -> KubeEmulator:
        _patch_namespace_paths()
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("kmock did not start")
        return self

    def call(self, fn, *a, **kw):
        async def _c():
            return fn(*a, **kw)

        return asyncio.run_coroutine_threadsafe(_c(), self.loop).result(10)

    def bookmark_every(self, seconds: float) -> None:
        """How often a watch that asks for bookmarks gets one (a real API server: about
        once a minute, and 2 s before the watch ends)."""
        self.call(setattr, self.emulator, "bookmark_s", seconds)

    def install_crds(self, *kinds: str, served: tuple[str, ...] | None = None) -> None:
        """Create the upstream CRDs of these kinds (gpuctl/sim/crds/)
        through the API, as `kubectl apply -f` of a release's manifests would; `served` limits
        the versions served (an older release: Kueue before 0.15 served only v1beta1)."""
        import copy

        from kubernetes import client

        from gpuctl.sim import crd_schema

        cfg = client.Configuration()
        cfg.host = self.url
        with client.ApiClient(cfg) as api:
            ext = client.ApiextensionsV1Api(api)
            for kind in kinds:
                definition = crd_schema.crd(kind)
                if served is not None:
                    definition = copy.deepcopy(definition)
                    for v in definition["spec"]["versions"]:
                        v["served"] = v["storage"] = v["name"] in served
                ext.create_custom_resource_definition(
                    definition, _preload_content=False
                ).release_conn()

    def start_log(self, namespace: str, pod: str, container: str) -> None:
        """A container of the pod started (the kubelet's part): its log begins empty."""
        self.loop.call_soon_threadsafe(self.emulator.start_log, namespace, pod, container)

    def write_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        """A line the container wrote, served by the pod's log endpoint."""
        when = time.time()
        self.loop.call_soon_threadsafe(
            self.emulator.log_line, namespace, pod, container, text, when
        )

    def end_log(self, namespace: str, pod: str, container: str) -> None:
        """The container ended: followers of its log stop."""
        self.loop.call_soon_threadsafe(self.emulator.end_log, namespace, pod, container)

    def requests(self) -> list:
        """Every request the emulator has served (method, path, query) — for asserting
        what the client sent, e.g. label selectors the emulator itself ignores."""
        return self.call(
            lambda: [
                # the method as sent ("POST"; str() of kmock's enum reads "method.POST")
                (getattr(r.method, "value", str(r.method)), r.url.path, dict(r.url.query))
                for r in self.emulator._requests
            ]
        )

    def forget_requests(self) -> None:
        """Drop the requests kmock keeps for assertions (a sandbox runs for hours)."""

        def forget() -> None:
            self.emulator._requests.clear()
            for payload in self.emulator._payloads:
                getattr(payload, "_requests", []).clear()

        self.call(forget)

    def stop(self):
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(10)


def write_kubeconfig(path, url: str, namespace: str = "default", name: str = "emu") -> str:
    """A kubeconfig whose current context NAME reaches the emulator at URL (written without
    following a symlink at PATH)."""
    import yaml

    from gpuctl.runtime.files import write_atomic

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": "test"}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
    }
    write_atomic(path, yaml.safe_dump(cfg))
    return str(path)
