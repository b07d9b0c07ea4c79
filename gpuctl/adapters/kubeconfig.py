"""Reading kubeconfig files as client-go's clientcmd reads them, without the `kubernetes`
package (whose import costs more CPU than kubectl's whole run): the lean transport
(gpuctl.adapters.kube_http) connects with what this returns.

The loading rules (client-go tools/clientcmd/loader.go): --kubeconfig names one file, which
must exist; else KUBECONFIG's files (duplicates once, missing ones skipped), else
~/.kube/config. Of several files, the first to name a cluster, user or context wins, and
the whole entry is its (nothing of a later file's entry of that name is kept); the first
file that sets current-context wins. A relative path (certificate-authority,
client-certificate, client-key, tokenFile) is resolved against the directory of the file
that names it. The checks of client-go's validation.go are made, one message each, naming
the file and the entry.

What it leaves to the official client (Target.legacy): a user's `auth-provider` (the
legacy gcp, azure and oidc plugins, whose refresh logic lives in the `kubernetes` package).
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field

from gpuctl.adapters import kube_auth
from gpuctl.common.errors import UsageError

# The service account's files inside a pod (client-go rest.InClusterConfig).
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class Problem(Exception):
    """The kubeconfig cannot be used as it is: one line, naming the file and the entry."""


@dataclass
class Target:
    """Where and how to connect: a context of a kubeconfig, resolved."""

    context: str | None
    namespace: str | None
    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    basic: tuple[str, str] | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)  # impersonation
    exec_config: dict | None = None  # a credential plugin to run (gpuctl.adapters.kube_auth)
    cluster_info: dict | None = None  # what a plugin's provideClusterInfo tells it
    base: str = ""  # the directory of the file that defines the user
    user: str = "kubeconfig"  # the file and the user, for messages
    legacy: str | None = None  # an auth-provider's name: the official client serves it


@dataclass
class Entry:
    value: dict
    origin: str  # the file that defined it


@dataclass
class Merged:
    """KUBECONFIG's files merged: each map's entries by name, the first file's winning."""

    files: list[str]
    clusters: dict[str, Entry] = field(default_factory=dict)
    users: dict[str, Entry] = field(default_factory=dict)
    contexts: dict[str, Entry] = field(default_factory=dict)
    current: str | None = None


def files(explicit: str | None) -> list[str]:
    """The kubeconfig files to read, in precedence order."""
    if explicit:
        path = os.path.expanduser(explicit)
        if not os.path.exists(path):
            raise UsageError(f"--kubeconfig {explicit}: no such file")
        return [path]
    listed = os.environ.get("KUBECONFIG")
    if listed:
        return list(dict.fromkeys(p for p in listed.split(os.pathsep) if p))
    return [os.path.expanduser("~/.kube/config")]


def merge(paths: list[str]) -> Merged:
    """The files' configurations merged (a missing file is skipped); Problem when none
    exists or one is not a kubeconfig."""
    merged = Merged(files=[])
    for path in paths:
        data = _read(path)
        if data is None:
            continue
        merged.files.append(path)
        for section, entries in (
            ("clusters", merged.clusters),
            ("users", merged.users),
            ("contexts", merged.contexts),
        ):
            for i, item in enumerate(_list(data, section, path)):
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise Problem(f"kubeconfig {path}: {section}[{i}] has no name")
                entries.setdefault(item["name"], Entry(item, path))
        current = data.get("current-context")
        if merged.current is None and isinstance(current, str) and current:
            merged.current = current
    if not merged.files:
        raise Problem(f"no kubeconfig file at {os.pathsep.join(paths)}")
    return merged


def _read(path: str) -> dict | None:
    import yaml

    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Problem(f"kubeconfig {path}: {e.strerror or e}") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
    except (yaml.YAMLError, RecursionError) as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        why = getattr(e, "problem", None) or "not valid YAML"
        raise Problem(f"kubeconfig {path}{line}: not valid YAML ({why})") from None
    if data is None:  # an empty file: client-go reads it as an empty configuration
        return {}
    if not isinstance(data, dict):
        raise Problem(f"kubeconfig {path}: not a kubeconfig (a {type(data).__name__})")
    return data


def _list(data: dict, section: str, path: str) -> list:
    items = data.get(section)
    if items is None:
        return []
    if not isinstance(items, list):
        raise Problem(f"kubeconfig {path}: {section} is not a list")
    return items


def target(merged: Merged, context: str | None) -> Target:
    """CONTEXT (None: the current one) resolved into what a connection needs."""
    name = context or merged.current
    if not name:
        raise Problem(f"kubeconfig {_where(merged)}: no current-context, and no context named")
    ctx_entry = merged.contexts.get(name)
    if ctx_entry is None:
        raise Problem(f"kubeconfig {_where(merged)}: no context {name!r}")
    ctx = _section(ctx_entry, "context", f"context {name!r}")
    cluster_name = ctx.get("cluster")
    where = f"kubeconfig {ctx_entry.origin}: context {name!r}"
    if not isinstance(cluster_name, str) or not cluster_name:
        raise Problem(f"{where} names no cluster")
    cluster_entry = merged.clusters.get(cluster_name)
    if cluster_entry is None:
        raise Problem(f"{where}: no cluster {cluster_name!r}")
    namespace = ctx.get("namespace")
    out = _cluster(cluster_entry, cluster_name, name)
    out.namespace = namespace if isinstance(namespace, str) and namespace else None
    user_name = ctx.get("user")
    if isinstance(user_name, str) and user_name:
        user_entry = merged.users.get(user_name)
        if user_entry is None:
            raise Problem(f"{where}: no user {user_name!r}")
        _user(user_entry, user_name, out, cluster_entry)
    return out


def _where(merged: Merged) -> str:
    return os.pathsep.join(merged.files)


def _section(entry: Entry, key: str, what: str) -> dict:
    value = entry.value.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Problem(f"kubeconfig {entry.origin}: {what}: {key} is not a mapping")
    return value


def _cluster(entry: Entry, name: str, context: str) -> Target:
    from urllib.parse import urlsplit

    c = _section(entry, "cluster", f"cluster {name!r}")
    where = f"kubeconfig {entry.origin}: cluster {name!r}"
    if problem := kube_auth.cluster_problem(c):
        raise Problem(f"{where}: {problem}")
    server = _text(c, "server", where)
    if not server:
        raise Problem(f"{where}: no server")
    try:
        url = urlsplit(server)
        url.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        raise Problem(f"{where}: server {server!r} is not a URL") from None
    if url.scheme not in ("https", "http") or not url.hostname:
        raise Problem(f"{where}: server {server!r} is not an http(s) URL")
    out = Target(context=context, namespace=None, server=server.rstrip("/"))
    out.insecure = c.get("insecure-skip-tls-verify") is True
    out.ca_data = _data(c, "certificate-authority-data", where)
    ca_file = _text(c, "certificate-authority", where)
    out.ca_file = _resolve(ca_file, entry.origin) if ca_file and not out.ca_data else None
    if out.insecure and (out.ca_data or out.ca_file):
        raise Problem(
            f"{where}: insecure-skip-tls-verify and a certificate-authority together "
            "(client-go refuses a root certificate with the insecure flag)"
        )
    if out.ca_file and not os.path.isfile(out.ca_file):
        raise Problem(f"{where}: certificate-authority {out.ca_file}: no such file")
    out.tls_server_name = _text(c, "tls-server-name", where) or None
    proxy = _text(c, "proxy-url", where)
    if proxy:
        if urlsplit(proxy).scheme not in ("http", "https", "socks5", "socks5h"):
            raise Problem(f"{where}: proxy-url {proxy!r}: the scheme is not http, https or socks5")
        out.proxy_url = proxy
    return out


def _user(entry: Entry, name: str, out: Target, cluster: Entry) -> None:
    u = _section(entry, "user", f"user {name!r}")
    where = out.user = f"kubeconfig {entry.origin}: user {name!r}"
    out.base = os.path.dirname(os.path.abspath(entry.origin))
    out.token = _text(u, "token", where) or None
    token_file = _text(u, "tokenFile", where)
    out.token_file = _resolve(token_file, entry.origin) if token_file else None
    username, password = _text(u, "username", where), _text(u, "password", where)
    if username or password:
        out.basic = (username, password)
    if problem := kube_auth.user_problem(u):
        raise Problem(f"{where}: {problem}")
    out.cert_data = _data(u, "client-certificate-data", where)
    out.key_data = _data(u, "client-key-data", where)
    cert, key = _text(u, "client-certificate", where), _text(u, "client-key", where)
    out.cert_file = _resolve(cert, entry.origin) if cert and not out.cert_data else None
    out.key_file = _resolve(key, entry.origin) if key and not out.key_data else None
    has_cert, has_key = bool(out.cert_data or out.cert_file), bool(out.key_data or out.key_file)
    if has_cert != has_key:
        missing = "client-key" if has_cert else "client-certificate"
        raise Problem(f"{where}: {missing} or {missing}-data is needed with the other")
    for path in (out.cert_file, out.key_file):
        if path and not os.path.isfile(path):
            raise Problem(f"{where}: {path}: no such file")
    exec_config, provider = u.get("exec"), u.get("auth-provider")
    if exec_config is not None and provider is not None:
        raise Problem(f"{where}: both an exec plugin and an auth-provider (only one is allowed)")
    if exec_config is not None:
        if not isinstance(exec_config, dict):
            raise Problem(f"{where}: exec is not a mapping")
        if kube_auth.plugin_serves(u):
            out.exec_config = exec_config
            if exec_config.get("provideClusterInfo"):
                base = os.path.dirname(os.path.abspath(cluster.origin))
                out.cluster_info = kube_auth.exec_cluster(cluster.value["cluster"], base)
    if provider is not None:
        provider_name = provider.get("name") if isinstance(provider, dict) else None
        out.legacy = str(provider_name or "unnamed")
    out.headers = _impersonation(u, where)


def _impersonation(u: dict, where: str) -> list[tuple[str, str]]:
    """The Impersonate-* headers of a user's `as`, `as-uid`, `as-groups` and
    `as-user-extra`, as client-go's impersonatingRoundTripper sends them: a header for each
    group and each extra value (the API server does not split one at its commas), an
    extra's key %-escaped where a header name cannot carry it."""
    headers = []
    if user := _text(u, "as", where):
        headers.append(("Impersonate-User", user))
    if uid := _text(u, "as-uid", where):
        headers.append(("Impersonate-Uid", uid))
    groups = u.get("as-groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise Problem(f"{where}: as-groups is not a list of names")
    headers += [("Impersonate-Group", g) for g in groups]
    extra = u.get("as-user-extra") or {}
    if not isinstance(extra, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()
    ):
        raise Problem(f"{where}: as-user-extra is not a map of lists of values")
    for key, values in extra.items():
        headers += [(f"Impersonate-Extra-{_header_key(str(key))}", v) for v in values]
    return headers


# What a header name may hold as it is (Go's net/http token characters).
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _header_key(key: str) -> str:
    return "".join(chr(b) if b in _TOKEN else f"%{b:02X}" for b in key.encode())


def _text(d: dict, key: str, where: str) -> str:
    value = d.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Problem(f"{where}: {key} is not text")
    return value


def _data(d: dict, key: str, where: str) -> bytes | None:
    text = _text(d, key, where)
    if not text:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise Problem(f"{where}: {key} is not base64") from None


def _resolve(path: str, origin: str) -> str:
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        return path
    return os.path.join(os.path.dirname(os.path.abspath(origin)), path)


def in_cluster() -> Target:
    """The pod's service account (client-go rest.InClusterConfig); Problem outside a pod."""
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    if not host or not port:
        raise Problem("not in a pod (no KUBERNETES_SERVICE_HOST/PORT)")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        with open(os.path.join(SERVICE_ACCOUNT, "namespace")) as f:
            namespace = f.read().strip() or None
    except OSError:
        namespace = None
    token_file = os.path.join(SERVICE_ACCOUNT, "token")
    if not os.path.isfile(token_file):
        raise Problem(f"in a pod, but no service account token at {token_file}")
    return Target(
        context="in-cluster",
        namespace=namespace,
        server=f"https://{host}:{port}",
        ca_file=os.path.join(SERVICE_ACCOUNT, "ca.crt"),
        token_file=token_file,
    )
