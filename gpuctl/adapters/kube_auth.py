"""Loading a kubeconfig without trusting what it points at: a kubeconfig that is a FIFO or a
device is refused (reading one blocks forever), and a credential plugin (a user's `exec`,
e.g. EKS's `aws eks get-token`) runs under the request deadline in a process group of its
own, ended with its children on timeout or Ctrl-C. What it prints is a credential: it never
reaches a message unredacted. A plugin that may talk to the person at the terminal (its
interactiveMode, as client-go decides it) gets gpuctl's stdin and stderr instead, and runs
in gpuctl's process group, as kubectl runs it, so that the terminal reaches it.

The official client runs the plugin itself (kubernetes/config/exec_provider.py) with no
timeout, and logs its stderr as it is. Here the plugin runs first, as the client would run
it (the same ExecCredential request in KUBERNETES_EXEC_INFO, its `env` added), and the
user's `exec` is replaced by what it returned before the client reads the configuration.
As in client-go, a command that is a path is relative to the kubeconfig's directory, and
the plugin runs in gpuctl's working directory (the Python client would run it in the
kubeconfig's).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from typing import Any

from gpuctl.adapters import kube_credentials
from gpuctl.common.errors import BackendError, Interrupted, UsageError
from gpuctl.common.text import redact_secrets


def check_files(config_file: str) -> None:
    """Refuse a kubeconfig path (KUBECONFIG may list several) that exists but is not a
    regular file: opening a FIFO waits for a writer, a device never ends."""
    for path in filter(None, config_file.split(os.pathsep)):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # missing: the client says so, or falls back to the in-cluster config
        if not stat.S_ISREG(mode):
            raise UsageError(f"kubeconfig {path}: not a regular file")


def read(config_file: str) -> Any:
    """The configuration of CONFIG_FILE (KUBECONFIG's files merged, as the client merges
    them: its ConfigNode), read and parsed once for the contexts and the loading."""
    from kubernetes.config import kube_config

    merger = kube_config.KubeConfigMerger(config_file)
    if merger.config is None:
        raise kube_config.ConfigException("Invalid kube-config file. No configuration found.")
    return merger.config


def contexts(root: Any) -> tuple[list[dict], Any]:
    """The contexts of the configuration ROOT, and its current one (the client's
    list_kube_config_contexts, without reading the file again)."""
    from kubernetes.config import kube_config

    loader = kube_config.KubeConfigLoader(config_dict=root, config_base_path=None)
    return loader.list_contexts(), loader.current_context


def load(
    root: Any,
    context: str | None,
    cfg: Any,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> Callable[[], None] | None:
    """Load CONTEXT (None: the current one) of the configuration ROOT (read) into the
    client's configuration CFG, running the context's credential plugin, if any, within
    DEADLINE seconds. A bearer token from a tokenFile or a plugin is renewed before a
    request as client-go renews it (gpuctl.adapters.kube_credentials, with CLOCK and
    WALL_CLOCK); a plugin's token after a 401 too: what to call then is returned."""
    from kubernetes.config import kube_config

    user, cluster, base, where = _active_user(root, context)
    if user is None:
        user = {}
    elif problem := user_problem(user):
        raise UsageError(f"{where}: {problem}")
    if cluster is not None and isinstance(cluster.value.get("cluster"), dict):
        if problem := cluster_problem(cluster.value["cluster"]):
            raise UsageError(
                f"kubeconfig {cluster.path}: cluster {cluster.value.get('name')!r}: {problem}"
            )
    bearer: Callable[[], str] | None = None
    refused: Callable[[], None] | None = None
    if plugin_serves(user):
        bearer, refused = _plugin(user, cluster, base, deadline, where, wall_clock)
    else:
        user.pop("exec", None)  # another credential wins: the client would run it too
    if isinstance(user.get("tokenFile"), str) and user["tokenFile"]:
        path = os.path.join(base, os.path.expanduser(user.pop("tokenFile")))
        bearer = kube_credentials.TokenFile(path, user.get("token"), clock)
        user["token"] = bearer()
    # config_base_path None: relative paths (certificate-authority, tokenFile) resolve against
    # the directory of the file that names them, as the client's own loader does
    loader = kube_config.KubeConfigLoader(
        config_dict=root, active_context=context, config_base_path=None
    )
    loader.load_and_set(cfg)
    if bearer is not None:  # the client calls it before each request
        cfg.refresh_api_key_hook = lambda c: c.api_key.update(BearerToken=f"Bearer {bearer()}")
    return refused


def _plugin(
    user: dict, cluster: Any, base: str, deadline: float, where: str, wall_clock: Callable
) -> tuple[Callable[[], str] | None, Callable[[], None] | None]:
    """Run the USER's plugin and put its credential in USER; when that is a token, (the
    token, renewed when it expires, and what to call when the API server refuses it)."""
    exec_config = user.pop("exec")
    info = None
    if exec_config.get("provideClusterInfo") and cluster is not None:
        info = exec_cluster(cluster.value.get("cluster") or {}, _dir(cluster.path))
    plugin = kube_credentials.Plugin(
        lambda: run_plugin(exec_config, info, base, deadline, where), wall_clock
    )
    used = [plugin()]
    user.update(used[0])
    if "token" not in used[0]:
        return None, None

    def bearer() -> str:
        used[0] = plugin()
        return used[0].get("token", "")

    return bearer, lambda: plugin.rejected(used[0])


def _active_user(root: Any, context: str | None) -> tuple[dict | None, Any, str, str]:
    """The user and cluster entries of CONTEXT in the merged configuration ROOT (the
    client's ConfigNodes; the user's dict is the one the client will read), the directory
    of the file that defines the user, and the user's place for messages."""
    name = context or root.safe_get("current-context")
    ctx = _entry(root, "contexts", name)
    if ctx is None or not isinstance(ctx.value.get("context"), dict):
        return None, None, "", ""
    refs = ctx.value["context"]
    cluster = _entry(root, "clusters", refs.get("cluster"))
    user = _entry(root, "users", refs.get("user"))
    if user is None or not isinstance(user.value.get("user"), dict):
        return None, cluster, "", ""
    return (
        user.value["user"],
        cluster,
        _dir(user.path),
        f"kubeconfig {user.path}: user {refs['user']!r}",
    )


def _dir(path: Any) -> str:
    return os.path.abspath(os.path.dirname(path)) if isinstance(path, str) else ""


# A user's credentials other than a plugin: with one of them, client-go runs no plugin
# (exec's UpdateTransportConfig leaves a transport with token, basic or certificate auth).
_NOT_A_PLUGIN = ("token", "tokenFile", "username", "password")
_CERTIFICATE = ("client-certificate", "client-certificate-data")


def plugin_serves(user: dict) -> bool:
    """Whether the kubeconfig USER's exec plugin is what authenticates it, as client-go
    decides: a token, tokenFile, username/password or client certificate wins over it."""
    return isinstance(user.get("exec"), dict) and not any(
        user.get(k) for k in (*_NOT_A_PLUGIN, *_CERTIFICATE)
    )


def user_problem(user: dict) -> str | None:
    """What client-go refuses in a kubeconfig USER (clientcmd's validation.go and the
    transport's HTTPWrappersForConfig), or None."""
    if (user.get("token") or user.get("tokenFile")) and (
        user.get("username") or user.get("password")
    ):
        return "both a token and a username/password (only one is allowed)"
    for key in ("client-certificate", "client-key"):
        if user.get(key) and user.get(f"{key}-data"):
            return f"both {key} and {key}-data (only one is allowed)"
    if not user.get("as") and any(user.get(k) for k in ("as-uid", "as-groups", "as-user-extra")):
        return "as-uid, as-groups or as-user-extra without `as`, the user to impersonate"
    exec_config = user.get("exec")
    return _exec_problem(exec_config) if isinstance(exec_config, dict) else None


def cluster_problem(cluster: dict) -> str | None:
    """What client-go's validation refuses in a kubeconfig CLUSTER beyond its server, or
    None."""
    if cluster.get("certificate-authority") and cluster.get("certificate-authority-data"):
        return "both certificate-authority and certificate-authority-data (only one is allowed)"
    return None


INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
_BEFORE_V1 = ("client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1alpha1")


def interactive_mode(exec_config: dict) -> Any:
    """A plugin's interactiveMode, defaulted as clientcmd's v1 defaults do: IfAvailable for
    a v1beta1 or v1alpha1 plugin that names none; a v1 plugin must name one."""
    mode = exec_config.get("interactiveMode")
    if not mode and exec_config.get("apiVersion") in _BEFORE_V1:
        return "IfAvailable"
    return mode


def _exec_problem(exec_config: dict) -> str | None:
    command, api_version = exec_config.get("command"), exec_config.get("apiVersion")
    if not command or not isinstance(command, str):
        return "exec has no command"
    if not api_version or not isinstance(api_version, str):
        return "exec has no apiVersion"
    env = exec_config.get("env") or []
    if not isinstance(env, list) or not all(isinstance(e, dict) and e.get("name") for e in env):
        return "exec env is not a list of entries with a name"
    mode = interactive_mode(exec_config)
    if not mode:
        return (
            f"exec has no interactiveMode (Never, IfAvailable or Always: {api_version} needs one)"
        )
    if mode not in INTERACTIVE_MODES:
        return f"exec interactiveMode {str(mode)[:40]!r} is not Never, IfAvailable or Always"
    return None


# The entry of a cluster's extensions a plugin gets as its cluster's config (client-go).
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"


def exec_cluster(cluster: dict, base: str) -> dict:
    """The kubeconfig CLUSTER (of a file in the directory BASE) as a plugin with
    provideClusterInfo is told it (client-go rest.ConfigToExecCluster): the CA as data
    whether the file gives it as data or as a file, its extension named
    client.authentication.k8s.io/exec as `config`."""
    out: dict[str, Any] = {"server": cluster.get("server")}
    if cluster.get("tls-server-name"):
        out["tls-server-name"] = cluster["tls-server-name"]
    if cluster.get("insecure-skip-tls-verify") is True:
        out["insecure-skip-tls-verify"] = True
    ca_data, ca_file = (
        cluster.get("certificate-authority-data"),
        cluster.get("certificate-authority"),
    )
    if ca_data:
        out["certificate-authority-data"] = ca_data
    elif ca_file and isinstance(ca_file, str):
        path = os.path.join(base, os.path.expanduser(ca_file))
        try:
            with open(path, "rb") as f:
                out["certificate-authority-data"] = base64.b64encode(f.read()).decode()
        except OSError as e:
            raise UsageError(
                f"kubeconfig certificate-authority {path}: {e.strerror or e}"
            ) from None
    if cluster.get("proxy-url"):
        out["proxy-url"] = cluster["proxy-url"]
    if cluster.get("disable-compression") is True:
        out["disable-compression"] = True
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == _EXEC_EXTENSION:
            out["config"] = extension.get("extension")
    return out


def _entry(root: Any, section: str, name: Any) -> Any:
    if name is None or section not in root or not isinstance(root.value[section], list):
        return None
    return root[section].get_with_name(name, safe=True)


def run_plugin(
    exec_config: dict, cluster: dict | None, base: str, deadline: float, where: str = "kubeconfig"
) -> dict:
    """Run a kubeconfig `exec` credential plugin (checked: user_problem) for the user at
    WHERE, defined in a file of the directory BASE; return its ExecCredential's status.
    CLUSTER is what provideClusterInfo tells it (exec_cluster), or None. Unless its interactiveMode lets it talk to a terminal, it gets
    none (stdin closed): a plugin that would ask the user fails instead of waiting. Ended
    after DEADLINE seconds or on Ctrl-C."""
    command, api_version = exec_config["command"], exec_config["apiVersion"]
    if os.sep in command:  # a path, not a name to look up in PATH (clientcmd's loader)
        command = os.path.join(base, command)
    interactive = _interactive(exec_config, where)
    request: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": interactive},
    }
    if cluster is not None:
        request["spec"]["cluster"] = cluster
    env = dict(os.environ)
    env.update({str(e["name"]): str(e.get("value", "")) for e in exec_config.get("env") or []})
    env["KUBERNETES_EXEC_INFO"] = json.dumps(request)
    args = [command, *[str(a) for a in exec_config.get("args") or []]]
    what = f"the kubeconfig's credential plugin {os.path.basename(command)!r}"
    try:
        proc = subprocess.Popen(
            args,
            stdin=None if interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if interactive else subprocess.PIPE,
            env=env,
            start_new_session=not interactive,  # its own process group: ended with its children
        )
    except OSError as e:
        hint = exec_config.get("installHint")  # what client-go shows when it is missing
        raise BackendError(
            f"{what} cannot be started: {e.strerror or e}",
            hint=" ".join(str(hint).split()) if hint else None,
        ) from None
    try:
        out, err = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        _end(proc, interactive)
        raise BackendError(
            f"{what} gave no credential within {deadline:g} s",
            hint="run it by hand to see what it waits for (a login? the network?)",
        ) from None
    except KeyboardInterrupt:
        _end(proc, interactive)
        raise Interrupted("interrupted while the credential plugin ran") from None
    if proc.returncode != 0:
        said = redact_secrets((err or b"").decode(errors="replace").strip()).splitlines()
        raise BackendError(
            f"{what} failed (exit {proc.returncode})" + (f": {said[-1]}" if said else ""),
            hint="run it by hand to see why",
        )
    return _status(out, api_version, what)


def _interactive(exec_config: dict, where: str) -> bool:
    """Whether the plugin talks to the terminal (client-go's isInteractive): never with
    Never; with IfAvailable when stdin is a terminal; with Always, which refuses to run
    without one."""
    mode = interactive_mode(exec_config)
    try:
        terminal = os.isatty(0)
    except OSError:
        terminal = False
    if mode == "Always" and not terminal:
        raise UsageError(
            f"{where}: exec interactiveMode is Always, but standard input is not a terminal",
            hint="run gpuctl from a terminal, or log in first by running the plugin by hand",
        )
    return terminal and mode != "Never"


def _end(proc: subprocess.Popen, interactive: bool) -> None:
    try:
        if interactive:  # in gpuctl's process group: only the plugin itself
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


def _status(out: bytes, api_version: str, what: str) -> dict:
    try:
        data = json.loads(out)
    except ValueError:
        raise BackendError(f"{what} printed no ExecCredential (not JSON)") from None
    if not isinstance(data, dict) or not isinstance(data.get("status"), dict):
        raise BackendError(f"{what} printed no ExecCredential (no status)")
    if data.get("apiVersion") != api_version:
        raise BackendError(
            f"{what} answered apiVersion {str(data.get('apiVersion'))[:80]!r}, not {api_version!r}"
        )
    return data["status"]
