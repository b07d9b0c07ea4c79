"""The Kubernetes adapter: one place that loads kubeconfig, sends requests through a
transport (gpuctl's lean one, gpuctl.adapters.kube_http; the official client's for what it
does not serve, gpuctl.adapters.kube_client) and turns their failures into gpuctl errors a
person can act on.

Objects cross this boundary as plain dicts (the API's JSON shape), never client models.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gpuctl.adapters import kube_auth
from gpuctl.adapters.kube_http import Broken, HttpFailure, Unsent, first_line
from gpuctl.common.errors import BackendError, GpuctlError, UsageError, redact
from gpuctl.k8s import apis
from gpuctl.k8s.informer import Expired
from gpuctl.k8s.objects import name_of, namespace_of

if TYPE_CHECKING:
    from gpuctl.gpus.dra import DraView
    from gpuctl.k8s.informer import Informer

DEFAULT_TIMEOUT = 15  # seconds per request


class NotFound(BackendError):
    pass


class Conflict(BackendError):
    pass


class Invalid(BackendError):
    """HTTP 422: the API server refused the request as it is; for a JSON patch, one of its
    `test` operations failed (the object is no longer as gpuctl read it)."""


class Forbidden(BackendError):
    """HTTP 403: RBAC does not allow this request."""


class Unreachable(BackendError):
    """No connection to the API server: the request never left."""


class NoAnswer(BackendError):
    """The request reached the server, or may have, but no usable answer came back (a
    timeout, a dropped connection, a gateway's error page, a failure Status): a change it
    asked for may have been made."""

    uncertain = True  # gpuctl.runtime.workflow undoes the step too (it may have happened)


# The kinds gpuctl reads and writes: kind -> (apiVersion, resource, namespaced). Those of a
# group with a dot are custom resources (served by CRDs): a caller may name another version
# of their group, and a dict patches them as a JSON merge patch (they have no strategic merge).
_KUEUE = apis.kueue_api_version(None)
_DRA = f"{apis.DRA_GROUP}/{apis.DRA_VERSIONS[0]}"
KINDS = {
    "Namespace": ("v1", "namespaces", False),
    "Node": ("v1", "nodes", False),
    "ConfigMap": ("v1", "configmaps", True),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims", True),
    "Secret": ("v1", "secrets", True),
    "Pod": ("v1", "pods", True),
    "ResourceQuota": ("v1", "resourcequotas", True),
    "Service": ("v1", "services", True),
    "Job": ("batch/v1", "jobs", True),
    "CronJob": ("batch/v1", "cronjobs", True),
    "DaemonSet": ("apps/v1", "daemonsets", True),
    "Deployment": ("apps/v1", "deployments", True),
    "StatefulSet": ("apps/v1", "statefulsets", True),
    "ReplicaSet": ("apps/v1", "replicasets", True),
    "HorizontalPodAutoscaler": ("autoscaling/v2", "horizontalpodautoscalers", True),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets", True),
    "Event": ("v1", "events", True),
    "ResourceFlavor": (_KUEUE, "resourceflavors", False),
    "Topology": (_KUEUE, "topologies", False),
    "ClusterQueue": (_KUEUE, "clusterqueues", False),
    "LocalQueue": (_KUEUE, "localqueues", True),
    "Workload": (_KUEUE, "workloads", True),
    "JobSet": (apis.JOBSET_API_VERSION, "jobsets", True),
    "DeviceClass": (_DRA, "deviceclasses", False),
    "ResourceSlice": (_DRA, "resourceslices", False),
    "ResourceClaim": (_DRA, "resourceclaims", True),
    "ResourceClaimTemplate": (_DRA, "resourceclaimtemplates", True),
    "ScaledObject": (apis.KEDA_API_VERSION, "scaledobjects", True),
    "TriggerAuthentication": (apis.KEDA_API_VERSION, "triggerauthentications", True),
    "ComputeDomain": (apis.COMPUTE_DOMAIN_API_VERSION, "computedomains", True),
}


def _custom(api_version: str) -> bool:
    return "." in api_version.rpartition("/")[0]


def connect(
    context: str | None, kubeconfig: str | None, deadline: float
) -> tuple[Any, str | None, str | None, str | None]:
    """(the transport, the namespace, the context's name, a note for --debug) of the
    kubeconfig context (or, with none usable, of the pod's service account): the one place
    that reads credentials. The namespace is None where the context names none. A
    credential plugin the context runs has DEADLINE seconds (gpuctl.adapters.kube_auth).
    The lean transport serves every context but one whose user has an `auth-provider` or
    that goes through an https:// proxy: the official client serves those
    (gpuctl.adapters.kube_client), and all of them when the kube_client setting says
    `kubernetes`."""
    from gpuctl.adapters import kube_client
    from gpuctl.adapters import kubeconfig as config
    from gpuctl.adapters.kube_http import Transport, proxy_of
    from gpuctl.runtime.config import setting, setting_from

    if setting("kube_client", check=_kube_client_problem) == "kubernetes":
        cfg, namespace, name, refused = kube_client.load_config(context, kubeconfig, deadline)
        return kube_client.ClientTransport(cfg, refused), namespace, name, None
    context, context_from = setting_from("context", context)
    paths = config.files(kubeconfig)
    kube_auth.check_files(os.pathsep.join(paths))
    try:
        merged = config.merge(paths)
        if context and context not in merged.contexts:
            raise UsageError(
                f"no context {context!r} in the kubeconfig {os.pathsep.join(merged.files)}"
                + ("" if context_from == "the command line" else f" (from {context_from})"),
                hint="contexts: " + ", ".join(merged.contexts),
            )
        target = config.target(merged, context)
    except config.Problem as e:
        try:  # inside a pod: the service account
            target = config.in_cluster()
        except config.Problem:
            raise GpuctlError(
                f"no usable Kubernetes configuration: {e}",
                hint="set KUBECONFIG or create ~/.kube/config (or pass --context)",
            ) from None
    proxy = proxy_of(target)
    if target.legacy is not None or (proxy is not None and proxy.scheme == "https"):
        cfg, namespace, name, refused = kube_client.load_config(context, kubeconfig, deadline)
        if target.legacy is not None:
            why = (
                f"the user of context {name!r} logs in through the auth-provider {target.legacy!r}"
            )
        else:  # TLS to the proxy, then TLS through it: http.client has no TLS within TLS
            cfg.proxy = proxy.geturl()
            why = f"context {name!r} reaches its cluster through an https:// proxy"
        note = f"{why}: the official kubernetes client serves it (slower to start)"
        return kube_client.ClientTransport(cfg, refused), namespace, name, note
    try:
        transport = Transport(target, deadline)
    except config.Problem as e:
        raise GpuctlError(f"no usable Kubernetes configuration: {e}") from None
    return transport, target.namespace, target.context, None


def _kube_client_problem(value: str) -> str | None:
    return None if value in ("lean", "kubernetes") else "not lean or kubernetes"


class Kube:
    """A connection to one cluster (a kubeconfig context). Objects go in and come out as
    plain dicts; the verbs name them by kind ("Pod", "Job", …). A namespaced kind given no
    namespace is read, patched or deleted in `self.namespace`, and listed or watched in all
    namespaces.

    The context is the one given (--context), else the `context` setting (GPUCTL_CONTEXT,
    the config file), else the kubeconfig's current one, of the kubeconfig file given
    (--kubeconfig), else KUBECONFIG's, else ~/.kube/config; `self.namespace` is the
    `namespace` setting (GPUCTL_NAMESPACE, the config file), else that context's namespace.
    Every command reaches Kubernetes through here, so all of them agree."""

    def __init__(
        self,
        context: str | None = None,
        timeout: float | None = None,
        kubeconfig: str | None = None,
    ):
        from gpuctl.common.k8s_names import dns1123_label
        from gpuctl.runtime.config import request_timeout, setting

        namespace = setting(
            "namespace",
            None,
            lambda ns: None if dns1123_label(ns) else "not a valid namespace name",
        )
        self.timeout = timeout or request_timeout(DEFAULT_TIMEOUT)
        self._transport, context_namespace, self.context, self.note = connect(
            context, kubeconfig, self.timeout
        )
        self.namespace = str(namespace or context_namespace or "default")
        self.host = redact(self._transport.host)  # for messages: never a URL's credentials
        self._groups: dict[str, list[str]] | None = None  # API discovery, read once

    closed = False

    def close(self) -> None:
        self._transport.close()
        self.closed = True

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- verbs by kind ---------------------------------------------------------------

    def create(self, obj: dict, dry_run: bool = False) -> dict:
        """Create OBJ in its metadata.namespace (the context's namespace if it has none);
        with dry_run the server only checks it."""
        kind, name = obj.get("kind"), name_of(obj)
        namespace = namespace_of(obj) or self.namespace
        path, ns = self._path(kind, namespace, obj.get("apiVersion"))
        return self._call(
            "POST",
            path,
            {"dryRun": "All"} if dry_run else None,
            body=obj,
            what=f"creating {_subject(kind, name, ns)}",
            answer=_OBJECT,
            changes=True,
        )

    def read(
        self, kind: str, name: str, namespace: str | None = None, api_version: str | None = None
    ) -> dict:
        path, ns = self._path(kind, namespace or self.namespace, api_version, name)
        return self._call("GET", path, what=f"reading {_subject(kind, name, ns)}", answer=_OBJECT)

    def list_objects(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        field_selector: str | None = None,
        api_version: str | None = None,
    ) -> list[dict]:
        """Objects of KIND in NAMESPACE, or in all namespaces when it is None."""
        return self.list_with_version(kind, namespace, selector, field_selector, api_version)[0]

    def list_with_version(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        field_selector: str | None = None,
        api_version: str | None = None,
    ) -> tuple[list[dict], str]:
        """list_objects, and the list's metadata.resourceVersion: a watch from it sends
        every change the list does not hold (gpuctl.k8s.informer)."""
        path, ns = self._path(kind, namespace, api_version)
        query = {"labelSelector": selector, "fieldSelector": field_selector}
        what = f"listing {_plural(kind)}" + (f" in namespace {ns}" if ns else "")
        answer = self._call("GET", path, query, what=what, answer=_LIST)
        # a real API server leaves kind and apiVersion out of a built-in list's items
        version = api_version or KINDS[kind][0]
        items = [{"apiVersion": version, "kind": kind, **item} for item in answer["items"]]
        listed = (answer.get("metadata") or {}).get("resourceVersion")
        return items, str(listed or "")

    def patch(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        body: dict | list,
        api_version: str | None = None,
    ) -> dict:
        """A dict is a strategic-merge patch (a JSON merge patch for a custom resource, which
        has no strategic merge), a list a JSON patch (RFC 6902)."""
        path, ns = self._path(kind, namespace or self.namespace, api_version, name)
        if isinstance(body, list):
            content = "application/json-patch+json"
        elif _custom(api_version or KINDS[kind][0]):
            content = "application/merge-patch+json"
        else:
            content = "application/strategic-merge-patch+json"
        return self._call(
            "PATCH",
            path,
            body=body,
            content_type=content,
            what=f"updating {_subject(kind, name, ns)}",
            answer=_OBJECT,
            changes=True,
        )

    def delete(
        self, kind: str, name: str, namespace: str | None = None, api_version: str | None = None
    ) -> None:
        path, ns = self._path(kind, namespace or self.namespace, api_version, name)
        # what the object owns (a Job's pods) goes too, as with kubectl; the API's default
        # for a Job would leave its pods running
        self._call(
            "DELETE",
            path,
            {"propagationPolicy": "Background"},
            what=f"deleting {_subject(kind, name, ns)}",
            changes=True,
        )

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        name: str | None = None,
        timeout_seconds: int = 60,
        api_version: str | None = None,
        resource_version: str | None = None,
        bookmarks: bool = False,
    ) -> Iterator[dict]:
        """Events ({type, object}) on objects of KIND (only NAME if given). Ends when the
        server closes the watch or when nothing arrives for `timeout_seconds` (+2 s
        grace): the caller loops. From RESOURCE_VERSION, only the changes after it (an
        Expired error, HTTP 410, when the server no longer keeps them); with BOOKMARKS,
        BOOKMARK events too, which carry only a newer resourceVersion."""
        path, _ = self._path(kind, namespace, api_version)
        what = f"watching {kind} {name}" if name else f"watching {_plural(kind)}"
        query = {
            "watch": "true",
            "fieldSelector": f"metadata.name={name}" if name else None,
            "timeoutSeconds": str(timeout_seconds),
            "resourceVersion": resource_version or None,
            "allowWatchBookmarks": "true" if bookmarks else None,
        }
        resp = self._raw("GET", path, query, timeout=(self.timeout, timeout_seconds + 2), what=what)
        try:
            for line in _lines(resp.stream(4096)):
                if not line.strip():
                    continue
                event = self._event(line, what)
                if event is not None:
                    yield event
        except TimeoutError:
            return  # a quiet watch: no news
        except GpuctlError:
            raise
        except Exception as e:
            raise self._map(e, what) from None
        finally:
            resp.release_conn()

    def informer(
        self,
        kind: str,
        namespace: str | None = None,
        name: str | None = None,
        timeout_seconds: int | Callable[[], int] = 60,
        api_version: str | None = None,
        **callbacks: Any,
    ) -> Informer:
        """KIND's objects (in NAMESPACE, or all; only NAME if given) kept by list and
        watch as client-go's informers keep them (gpuctl.k8s.informer), each watch ending
        after TIMEOUT_SECONDS (or what it returns when each watch starts: a wait's time
        left); CALLBACKS are its on_change, on_replace, guard and transform."""
        from gpuctl.k8s.informer import Informer

        fields = f"metadata.name={name}" if name else None

        def watch(version: str) -> Iterator[dict]:
            quiet = timeout_seconds() if callable(timeout_seconds) else timeout_seconds
            return self.watch(kind, namespace, name, quiet, api_version, version, bookmarks=True)

        return Informer(
            lambda: self.list_with_version(kind, namespace, None, fields, api_version),
            watch,
            **callbacks,
        )

    def _event(self, line: str, what: str) -> dict | None:
        """One watch event, as the client's Watch reads it: an ERROR event is the failure
        (a Status) it carries."""
        import msgspec

        try:
            event = msgspec.json.decode(line)
        except (ValueError, RecursionError):
            raise NoAnswer(f"{what}: {self.host} sent a watch event that is not JSON") from None
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            raise NoAnswer(f"{what}: {self.host} sent a watch event with no object")
        obj = event["object"]
        if event.get("type") == "ERROR":
            code = obj.get("code")
            raise self._map(
                HttpFailure(code if isinstance(code, int) else 500, _status_text(obj)),
                what,
            )
        return {"type": event.get("type"), "object": obj}

    # --- special verbs ---------------------------------------------------------------

    def server_version(self) -> str:
        """The API server's gitVersion (``v1.30.2``, ``v1.29.4-eks-036c24b``) from /version."""
        info = self._call("GET", "/version/", what="reading the server version")
        return str((info or {}).get("gitVersion") or "") if isinstance(info, dict) else ""

    def api_versions(self, group: str) -> list[str]:
        """The versions of an API group the cluster serves ([] when it has none, e.g. no
        Kueue CRDs), from API discovery (/apis), which every authenticated user may read.
        Read once per connection."""
        if self._groups is None:
            found = self._call("GET", "/apis/", what="reading the API groups")
            groups = (found or {}).get("groups") if isinstance(found, dict) else None
            self._groups = {
                g.get("name", ""): [v.get("version", "") for v in g.get("versions") or []]
                for g in groups or []
                if isinstance(g, dict)
            }
        return list(self._groups.get(group, []))

    def serves(self, api_version: str) -> bool:
        """Whether the cluster serves GROUP/VERSION (e.g. JobSet's jobset.x-k8s.io/v1alpha2)."""
        group, _, version = api_version.rpartition("/")
        return version in self.api_versions(group)

    def kueue_version(self) -> str | None:
        """The Kueue API version gpuctl speaks with this cluster; None without Kueue."""
        return apis.kueue_version(self.api_versions(apis.KUEUE_GROUP))

    def dra_version(self) -> str | None:
        """The resource.k8s.io version gpuctl reads from this cluster; None without DRA."""
        return apis.dra_version(self.api_versions(apis.DRA_GROUP))

    def dra(self) -> DraView | None:
        """The cluster's DRA (gpuctl.gpus.dra): its DeviceClasses, ResourceSlices and
        ResourceClaims (all namespaces), read once each in the newest resource.k8s.io version
        it serves; None when it serves none, or where RBAC hides them (the callers then go
        on without DRA, as a user who cannot see it would)."""
        from gpuctl.gpus import dra

        try:
            version = self.dra_version()
            if version is None:
                return None
            api = f"{apis.DRA_GROUP}/{version}"
            return dra.view(
                self.list_objects("DeviceClass", api_version=api),
                self.list_objects("ResourceSlice", api_version=api),
                self.list_objects("ResourceClaim", api_version=api),
            )
        except Forbidden:
            return None

    def kueue_workloads(self, namespace: str | None = None) -> list[dict]:
        """Kueue's Workloads in NAMESPACE, or in all namespaces ([] without Kueue)."""
        version = self.kueue_version()
        if version is None:
            return []
        return self.list_objects("Workload", namespace, api_version=apis.kueue_api_version(version))

    def get_path(self, path: str, query: dict[str, str | None] | None = None) -> dict:
        """GET an API path that no verb by kind reaches, e.g. an aggregated API's
        subresource such as Kueue's pending workloads of a LocalQueue."""
        from urllib.parse import quote

        return self._call("GET", quote(path), query, what=f"reading {path}")

    def evict(
        self, name: str, namespace: str, uid: str | None = None, version: str | None = None
    ) -> None:
        """Evict a pod through the Eviction API, which keeps PodDisruptionBudgets: a budget
        that allows no disruption now is answered 429 (a TooManyRequests error). With UID
        and VERSION, only the pod of that uid, unchanged since that resourceVersion: another
        one is refused (409, a Conflict)."""
        path, _ = self._path("Pod", namespace, name=name)
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        held = {"uid": uid, "resourceVersion": version}
        if any(held.values()):
            preconditions = {k: v for k, v in held.items() if v}
            body["deleteOptions"] = {"preconditions": preconditions}
        try:
            self._call(
                "POST",
                path + "/eviction",
                body=body,
                what=f"evicting pod {namespace}/{name}",
                changes=True,
            )
        except BackendError as e:
            if "HTTP 429" not in e.message:
                raise
            raise BackendError(
                e.message,
                hint="a PodDisruptionBudget allows no disruption of it now: retry once its "
                "pods are back, or leave it be",
            ) from None

    def read_node(self, name: str) -> dict:
        try:
            return self.read("Node", name)
        except NotFound:
            raise GpuctlError(
                f"no node {name!r} in the cluster", hint="kubectl get nodes lists them"
            ) from None

    def patch_node_labels(self, name: str, labels: dict[str, str | None]) -> dict:
        """Set the node's labels; a None value removes that label."""
        path, _ = self._path("Node", None, None, name)
        return self._call(
            "PATCH",
            path,
            body={"metadata": {"labels": labels}},
            content_type="application/strategic-merge-patch+json",
            what=f"labelling node {name}",
            answer=_OBJECT,
            changes=True,
        )

    def unfinished_pods(self, namespace: str | None = None) -> list[dict]:
        """Pods not yet Succeeded or Failed, in one namespace or all. Callers check the phase
        again: not every server (nor the test emulator) applies field selectors."""
        return self.list_objects(
            "Pod", namespace, field_selector="status.phase!=Succeeded,status.phase!=Failed"
        )

    def pod_log_lines(self, name: str, namespace: str, follow: bool = False) -> Iterator[str]:
        """The pod's log, line by line; with follow, until the container ends."""
        from gpuctl.runtime import deadline

        what = f"reading logs of {name}"
        path, _ = self._path("Pod", namespace, None, name)
        path += "/log"
        if not follow:
            try:
                data = deadline.call(lambda: self._read("GET", path, what=what), self.timeout)
            except deadline.DeadlineExceeded:
                raise NoAnswer(
                    f"{what}: the Kubernetes API at {self.host} timed out (no whole answer "
                    f"within {self.timeout:g} s)"
                ) from None
            yield from _lines([data or b""])
            return
        # unbounded: a followed log may stay quiet for hours (the client takes no
        # connect-only timeout); Ctrl-C ends it
        resp = self._raw("GET", path, {"follow": "true"}, timeout=None, what=what)
        try:
            yield from _lines(resp.stream(4096))
        except Exception as e:
            raise self._map(e, what) from None
        finally:
            resp.release_conn()

    # --- the client ------------------------------------------------------------------

    def _path(
        self,
        kind: str | None,
        namespace: str | None,
        api_version: str | None = None,
        name: str | None = None,
    ) -> tuple[str, str | None]:
        """The API path of KIND's objects (of the one named NAME) and the namespace it is
        in: none for a cluster-scoped kind, none either when a namespaced kind is listed or
        watched across all namespaces."""
        from urllib.parse import quote

        known = KINDS.get(kind or "")
        if known is None or api_version not in (None, known[0]):
            if (
                known is None
                or not _custom(known[0])
                or ((api_version or "").rpartition("/")[0] != known[0].rpartition("/")[0])
            ):
                what = f"{api_version} {kind}" if api_version else kind
                raise GpuctlError(
                    f"gpuctl does not handle Kubernetes objects of kind {what}",
                    hint="it handles " + ", ".join(f"{v} {k}" for k, (v, *_) in KINDS.items()),
                )
        default, resource, namespaced = known
        version = api_version or default
        path = "/api/v1" if version == "v1" else f"/apis/{version}"
        ns = namespace if namespaced else None
        if ns is not None:
            path += f"/namespaces/{quote(ns, safe='')}"
        path += f"/{resource}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        return path, ns

    def _call(
        self,
        method: str,
        path: str,
        query: dict[str, str | None] | None = None,
        what: str = "",
        answer: Callable[[Any], bool] | None = None,
        changes: bool = False,
        **kwargs,
    ) -> Any:
        """Send a request; return the response body as plain data. The whole request has
        `timeout` seconds (a server trickling its answer does not hold gpuctl); `answer`
        checks the body's shape; a change (`changes`) interrupted by Ctrl-C is still waited
        for, so that whoever undoes it finds it."""
        import msgspec

        from gpuctl.runtime import deadline, workflow

        if changes and not (query or {}).get("dryRun"):
            workflow.check_confirmed(what or f"{method} {path}")
        subject = f"{what}: " if what else ""
        try:
            data = deadline.call(
                lambda: self._read(method, path, query, what=what, **kwargs),
                self.timeout,
                settle_on_interrupt=changes,
            )
        except deadline.DeadlineExceeded:
            raise NoAnswer(
                f"{subject}the Kubernetes API at {self.host} timed out (no whole answer "
                f"within {self.timeout:g} s)",
                hint="check the network path to the cluster",
            ) from None
        try:
            body = msgspec.json.decode(data) if data else None
        except (ValueError, RecursionError):  # e.g. a proxy's or a web server's HTML page
            raise NoAnswer(
                f"{subject}{self.host} did not answer with JSON",
                hint="is the kubeconfig's server a Kubernetes API server?",
            ) from None
        if (
            isinstance(body, dict)
            and body.get("kind") == "Status"
            and body.get("status") != "Success"
        ):
            # a failure reported in a 2xx answer (some proxies and aggregated APIs do this)
            raise NoAnswer(f"{subject}the API server answered with a failure: {_status_text(body)}")
        if answer is not None and not answer(body):
            raise NoAnswer(
                f"{subject}{self.host} gave an answer that is not a Kubernetes "
                + ("object" if answer is _OBJECT else "list"),
                hint="is the kubeconfig's server a Kubernetes API server?",
            )
        return body

    _UNSET: Any = object()

    def _raw(
        self,
        method: str,
        path: str,
        query: dict[str, str | None] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = _UNSET,
        what: str = "",
    ):
        """Send a request through the transport (the lean one, else the official client's);
        return the unread HTTP response of a 2xx answer (for streams)."""
        try:
            return self._transport.request(
                method,
                path,
                query,
                body,
                content_type,
                self.timeout if timeout is self._UNSET else timeout,
            )
        except GpuctlError:  # a credential plugin run again failed: its own message
            raise
        except Exception as e:
            raise self._map(e, what) from None

    def _read(self, method: str, path: str, query: Any = None, what: str = "", **kwargs) -> bytes:
        """The whole body of a 2xx answer to the request (as `_raw` sends it)."""
        resp = self._raw(method, path, query, what=what, **kwargs)
        try:
            return resp.data
        except Exception as e:
            raise self._map(e, what) from None

    def _map(self, e: Exception, what: str) -> GpuctlError:
        subject = f"{what}: " if what else ""
        if isinstance(e, HttpFailure):
            reason = _api_message(e)
            if e.status == 404:
                return NotFound(f"{subject}not found ({reason})")
            if e.status == 410:
                return Expired(f"{subject}{reason}")
            if e.status == 409:
                said = "already exists" if _status_reason(e) == "AlreadyExists" else "conflict"
                return Conflict(f"{subject}{said} ({reason})")
            if e.status in (401, 403):
                return (Forbidden if e.status == 403 else BackendError)(
                    f"{subject}not allowed by the cluster (HTTP {e.status}: {reason})",
                    hint="check your credentials and RBAC for this namespace",
                )
            if e.status == 422 or e.status == 400:
                refused = Invalid if e.status == 422 else BackendError
                return refused(f"{subject}rejected by the API server: {reason}")
            if e.status and e.status >= 500:  # a gateway's 502/504 may follow a change made
                return NoAnswer(
                    f"{subject}the API server failed (HTTP {e.status}: {reason})",
                    hint="retry later; check the control plane's health",
                )
            return BackendError(f"{subject}HTTP {e.status}: {reason}")
        if isinstance(e, Unsent) and e.tls:  # reached, but TLS failed
            why = (
                "its certificate is not trusted"
                if "CERTIFICATE_VERIFY_FAILED" in str(e)
                else "the TLS handshake failed"
            )
            return BackendError(
                f"{subject}the Kubernetes API at {self.host}: {why}",
                hint="check the kubeconfig's server URL (https or http) and "
                "its certificate-authority-data",
            )
        if isinstance(e, Unsent):
            return Unreachable(
                f"{subject}cannot reach the Kubernetes API at {self.host}",
                hint="is the cluster up and the kubeconfig context right?",
            )
        if isinstance(e, TimeoutError):
            return NoAnswer(
                f"{subject}the Kubernetes API at {self.host} timed out",
                hint="check the network path to the cluster",
            )
        if isinstance(e, Broken):
            return NoAnswer(  # the connection broke after the request went out
                f"{subject}the connection to the Kubernetes API at {self.host} broke "
                f"before its answer ({first_line(e)})",
                hint="check the network path to the cluster (a proxy or load balancer?)",
            )
        return BackendError(f"{subject}{type(e).__name__}: {first_line(e)}")


def connect_or_offline(
    context: str | None,
    kubeconfig: str | None,
    offline_ok: bool,
    probe: Callable[[Kube], object] = Kube.server_version,
) -> tuple[Kube | None, str | None]:
    """(a connection that answered PROBE, None); with OFFLINE_OK, (None, why not) when there
    is no usable kubeconfig or its cluster cannot be reached or does not answer, for a dry
    run that can render from its options alone, as kubectl's client dry run does. A cluster
    that answers, even with a refusal (401, 5xx …), is no reason to guess: its error stands."""
    try:
        kube = Kube(context, kubeconfig=kubeconfig)
    except GpuctlError as e:
        if not offline_ok:
            raise
        return None, e.message
    try:
        probe(kube)
    except Forbidden:  # RBAC says no to the probe: the cluster is there
        pass
    except GpuctlError as e:
        kube.close()
        if not offline_ok or not isinstance(e, (Unreachable, NoAnswer)):
            raise
        return None, e.message
    return kube, None


def _is_object(body: Any) -> bool:
    return isinstance(body, dict) and isinstance(body.get("metadata"), dict)


def _is_list(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("items"), list)
        and all(_is_object(item) for item in body["items"])
    )


_OBJECT, _LIST = _is_object, _is_list


def _status_text(status: dict) -> str:
    message, reason = status.get("message"), status.get("reason")
    text = message if isinstance(message, str) and message else reason
    return first_line(text) if isinstance(text, str) and text else "no detail"


def _lines(chunks) -> Iterator[str]:
    pending = b""
    for chunk in chunks:
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def _plural(kind: str) -> str:
    """The resource's name in URLs and kubectl: "resourcequotas"."""
    return kind.lower() + "s"


def _subject(kind: str | None, name: str | None, namespace: str | None = None) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _status_reason(e) -> str:
    """The reason of the Status an API error carries ("AlreadyExists", "Conflict", …)."""
    import msgspec

    try:
        return str(msgspec.json.decode(e.body).get("reason") or "")
    except (TypeError, ValueError, AttributeError, RecursionError):
        return ""


def _api_message(e) -> str:
    import msgspec

    try:
        return msgspec.json.decode(e.body).get("message") or e.reason
    except (TypeError, ValueError, AttributeError, RecursionError):
        return str(e.reason or "").strip() or "no detail"
