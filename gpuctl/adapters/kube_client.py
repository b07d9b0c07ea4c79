"""The official `kubernetes` client as gpuctl's transport, for what the lean one
(gpuctl.adapters.kube_http) does not serve: a kubeconfig user's `auth-provider` (the legacy
gcp, azure and oidc plugins), or every request when the kube_client setting
(GPUCTL_KUBE_CLIENT) is `kubernetes`. Importing it costs about 0.35 s of CPU."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gpuctl.adapters import kube_auth
from gpuctl.adapters.kube_http import Broken, HttpFailure, Unsent, first_line
from gpuctl.common.errors import GpuctlError, UsageError


def load_config(
    context: str | None, kubeconfig: str | None, deadline: float
) -> tuple[Any, str | None, str | None, Callable[[], None] | None]:
    """(the client's Configuration, the namespace, the context's name, what to call when
    the API server refuses the credential) of the kubeconfig context (or, with none
    usable, of the pod's service account): the one place that reads credentials. The
    namespace is None where the context names none. A credential plugin the context runs
    has DEADLINE seconds (gpuctl.adapters.kube_auth)."""
    import yaml
    from kubernetes import client, config

    from gpuctl.runtime.config import setting_from

    context, context_from = setting_from("context", context)
    cfg = client.Configuration()
    # The client reads $KUBECONFIG once at import time; read it now, per connection.
    config_file = os.path.expanduser(kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config")
    if kubeconfig and not os.path.exists(config_file):  # named: no in-cluster fallback
        raise UsageError(f"--kubeconfig {kubeconfig}: no such file")
    kube_auth.check_files(config_file)
    try:
        root = kube_auth.read(config_file)
        contexts, active = kube_auth.contexts(root)
        if context:
            active = next((c for c in contexts if c["name"] == context), None)
            if active is None:
                raise UsageError(
                    f"no context {context!r} in the kubeconfig {config_file}"
                    + ("" if context_from == "the command line" else f" (from {context_from})"),
                    hint="contexts: " + ", ".join(c["name"] for c in contexts),
                )
        refused = kube_auth.load(root, context, cfg, deadline)
        return cfg, active.get("context", {}).get("namespace"), active.get("name"), refused
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
                return cfg, f.read().strip() or None, "in-cluster", None
        except (config.ConfigException, OSError):
            raise GpuctlError(
                f"no usable Kubernetes configuration: {first_line(e)}",
                hint="set KUBECONFIG or create ~/.kube/config (or pass --context)",
            ) from None


class ClientTransport:
    """Requests through the client's ApiClient (its credentials, TLS settings and pool), its
    failures raised as the lean transport's (gpuctl.adapters.kube_http)."""

    def __init__(self, cfg: Any, refused: Callable[[], None] | None = None):
        """REFUSED is called when the API server answers 401 (kube_auth.load)."""
        import urllib3
        from kubernetes import client

        self._refused = refused
        # Only connection setup is retried: a request that reached the server is never resent.
        cfg.retries = urllib3.Retry(total=2, connect=2, read=0, status=0, backoff_factor=0.2)
        if not cfg.verify_ssl:  # insecure-skip-tls-verify was asked for: kubectl warns not
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self.host = cfg.host
        self._api = client.ApiClient(cfg)

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, str | None] | None,
        body: Any,
        content_type: str,
        timeout: Any,
    ):
        """Send one request; the unread response of a 2xx answer, else HttpFailure."""
        from kubernetes.client.exceptions import ApiException

        request = self._api.param_serialize(
            method,
            path,
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None] or None,
            header_params={
                "Accept": "application/json",
                **({"Content-Type": content_type} if body is not None else {}),
            },
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            resp = self._api.call_api(*request, _request_timeout=timeout).response
        except ApiException as e:
            if e.status == 0:  # the client's wrapping of urllib3's SSLError
                raise Unsent(str(e.reason), tls=True) from None
            self._failed(e.status)
            raise HttpFailure(e.status, e.reason, e.body) from None
        except Exception as e:
            raise _translated(e) from None
        if not 200 <= resp.status < 300:
            self._failed(resp.status)
            raise HttpFailure(resp.status, resp.reason, resp.data)
        return _Answer(resp)

    def _failed(self, status: int) -> None:
        if status == 401 and self._refused is not None:
            self._refused()

    def close(self) -> None:
        self._api.close()


class _Answer:
    """urllib3's response, read as the lean transport's is (gpuctl.adapters.kube_http)."""

    def __init__(self, resp: Any):
        self._resp, self.status, self.reason = resp, resp.status, resp.reason

    @property
    def data(self) -> bytes:
        try:
            return self._resp.data
        except Exception as e:
            raise _translated(e) from None

    def stream(self, size: int):
        try:
            yield from self._resp.stream(size)
        except Exception as e:
            raise _translated(e) from None

    def release_conn(self) -> None:
        self._resp.release_conn()


def _translated(e: Exception) -> Exception:
    """urllib3's failure as the lean transport's: Unsent, TimeoutError or Broken."""
    import ssl

    from urllib3 import exceptions as failed

    cause = (getattr(e, "reason", None) if isinstance(e, failed.MaxRetryError) else None) or e
    if isinstance(cause, failed.SSLError | ssl.SSLError):
        return Unsent(str(cause), tls=True)
    if isinstance(cause, failed.NewConnectionError | failed.ConnectTimeoutError):
        return Unsent(first_line(cause))
    if isinstance(cause, failed.TimeoutError | TimeoutError) or "timed out" in str(cause):
        return TimeoutError(first_line(cause))
    if isinstance(cause, failed.ProtocolError) and len(cause.args) > 1:
        cause = cause.args[1]  # ("Connection aborted.", RemoteDisconnected(...))
    if isinstance(cause, failed.HTTPError | OSError):
        return Broken(first_line(cause))
    return e
