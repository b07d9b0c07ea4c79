"""The Kubernetes adapter: one place that loads kubeconfig, calls the official client and
turns its failures into gpuctl errors a person can act on.

Objects cross this boundary as plain dicts (the API's JSON shape), never client models.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from gpuctl.common.errors import BackendError, GpuctlError

DEFAULT_TIMEOUT = 15  # seconds per request


class NotFound(BackendError):
    pass


class Conflict(BackendError):
    pass


class Forbidden(BackendError):
    """HTTP 403: RBAC does not allow this request."""


class Kube:
    """A connection to one cluster (a kubeconfig context)."""

    def __init__(self, context: str | None = None, timeout: float = DEFAULT_TIMEOUT):
        import yaml
        from kubernetes import client, config

        self.timeout = timeout
        cfg = client.Configuration()
        # The client reads $KUBECONFIG once at import time; read it now, per connection.
        config_file = os.path.expanduser(os.environ.get("KUBECONFIG") or "~/.kube/config")
        try:
            contexts, active = config.list_kube_config_contexts(config_file=config_file)
            if context:
                active = next((c for c in contexts if c["name"] == context), None)
                if active is None:
                    raise GpuctlError(
                        f"no context {context!r} in the kubeconfig",
                        hint="contexts: " + ", ".join(c["name"] for c in contexts),
                    )
            config.load_kube_config(
                config_file=config_file, context=context, client_configuration=cfg
            )
            self.namespace = str(active.get("context", {}).get("namespace") or "default")
            self.context = active.get("name")
        # a kubeconfig that is not YAML, or YAML of the wrong shape, fails inside the client
        except (
            config.ConfigException,
            OSError,
            yaml.YAMLError,
            TypeError,
            AttributeError,
            KeyError,
            ValueError,
        ) as e:
            try:  # inside a pod: the service account
                config.load_incluster_config(client_configuration=cfg)
                with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                    self.namespace = f.read().strip() or "default"
                self.context = "in-cluster"
            except (config.ConfigException, OSError):
                raise GpuctlError(
                    f"no usable Kubernetes configuration: {_first_line(e)}",
                    hint="set KUBECONFIG or create ~/.kube/config (or pass --context)",
                ) from None
        # Only connection setup is retried: a request that reached the server is never resent.
        import urllib3

        cfg.retries = urllib3.Retry(total=2, connect=2, read=0, status=0, backoff_factor=0.2)
        self.host = cfg.host
        self.api = client.ApiClient(cfg)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, fn: Callable, *args, what: str = "", **kwargs) -> Any:
        """Call a client method with a timeout; return the response body as plain data."""
        data = self.raw(fn, *args, what=what, **kwargs).data
        try:
            return json.loads(data) if data else None
        except ValueError:  # e.g. a proxy's or a web server's HTML page
            subject = f"{what}: " if what else ""
            raise BackendError(
                f"{subject}{self.host} did not answer with JSON",
                hint="is the kubeconfig's server a Kubernetes API server?",
            ) from None

    def read_node(self, name: str) -> dict:
        try:
            return self.call(self.core.read_node, name, what=f"reading node {name}")
        except NotFound:
            raise GpuctlError(
                f"no node {name!r} in the cluster", hint="kubectl get nodes lists them"
            ) from None

    def unfinished_pods(self, namespace: str | None = None) -> list[dict]:
        """Pods not yet Succeeded or Failed, in one namespace or all. Callers check the phase
        again: not every server (nor the test emulator) applies field selectors."""
        running = "status.phase!=Succeeded,status.phase!=Failed"
        if namespace:
            return self.call(
                self.core.list_namespaced_pod,
                namespace,
                field_selector=running,
                what=f"listing pods in namespace {namespace}",
            )["items"]
        return self.call(
            self.core.list_pod_for_all_namespaces, field_selector=running, what="listing pods"
        )["items"]

    def raw(self, fn: Callable, *args, what: str = "", **kwargs):
        """Call a client method; return the undecoded HTTP response (for streams)."""
        kwargs.setdefault("_request_timeout", self.timeout)
        kwargs["_preload_content"] = False
        return self._guard(fn, args, kwargs, what)

    def stream(self, fn: Callable, *args, what: str = "", **kwargs) -> Iterator[dict]:
        """Watch events ({type, object}) as plain data. Ends when the server closes the watch
        or when nothing arrives for `timeout_seconds` (+2 s grace): the caller loops."""
        import urllib3
        from kubernetes import watch

        timeout = kwargs.setdefault("timeout_seconds", 60)
        kwargs.setdefault("_request_timeout", (self.timeout, timeout + 2))
        w = watch.Watch()
        try:
            for event in w.stream(fn, *args, **kwargs):
                obj = event.get("raw_object") or self.api.sanitize_for_serialization(
                    event["object"]
                )
                yield {"type": event["type"], "object": obj}
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            return  # a quiet watch: no news
        except urllib3.exceptions.ProtocolError as e:
            if "timed out" in str(e):
                return
            raise self._map(e, what) from None
        except Exception as e:
            raise self._map(e, what) from None
        finally:
            w.stop()

    def _guard(self, fn, args, kwargs, what):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise self._map(e, what) from None

    def _map(self, e: Exception, what: str) -> GpuctlError:
        import ssl

        import urllib3
        from kubernetes.client.exceptions import ApiException

        subject = f"{what}: " if what else ""
        if isinstance(e, ApiException):
            reason = _api_message(e)
            if e.status == 404:
                return NotFound(f"{subject}not found ({reason})")
            if e.status == 409:
                return Conflict(f"{subject}already exists ({reason})")
            if e.status in (401, 403):
                return (Forbidden if e.status == 403 else BackendError)(
                    f"{subject}not allowed by the cluster (HTTP {e.status}: {reason})",
                    hint="check your credentials and RBAC for this namespace",
                )
            if e.status == 422 or e.status == 400:
                return BackendError(f"{subject}rejected by the API server: {reason}")
            if e.status and e.status >= 500:
                return BackendError(
                    f"{subject}the API server failed (HTTP {e.status}: {reason})",
                    hint="retry later; check the control plane's health",
                )
            return BackendError(f"{subject}HTTP {e.status}: {reason}")
        if isinstance(e, (urllib3.exceptions.HTTPError, OSError)):
            if isinstance(e, (urllib3.exceptions.TimeoutError, TimeoutError)) or "timed out" in str(
                e
            ):
                return BackendError(
                    f"{subject}the Kubernetes API at {self.host} timed out",
                    hint="check the network path to the cluster",
                )
            if "SSLError" in str(e) or isinstance(e, ssl.SSLError):  # reached, but TLS failed
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
            return BackendError(
                f"{subject}cannot reach the Kubernetes API at {self.host}",
                hint="is the cluster up and the kubeconfig context right?",
            )
        return BackendError(f"{subject}{type(e).__name__}: {_first_line(e)}")


def _api_message(e) -> str:
    try:
        return json.loads(e.body).get("message") or e.reason
    except (TypeError, ValueError, AttributeError):
        return str(e.reason or "").strip() or "no detail"


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
