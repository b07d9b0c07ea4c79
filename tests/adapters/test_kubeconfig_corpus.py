"""A kubeconfig corpus, read by both transports of the Kube adapter (gpuctl's lean one and
the official client's), which must give the same answers and the same errors.

The forms are those client-go reads (k8s.io/client-go/tools/clientcmd/api/v1/types.go:
Cluster server, certificate-authority(-data), insecure-skip-tls-verify, tls-server-name,
proxy-url; AuthInfo token, tokenFile, client-certificate(-data), client-key(-data),
username/password, as/as-groups, exec, auth-provider; Context cluster, user, namespace)
and the merging of KUBECONFIG's files (clientcmd/loader.go: the first file to name an entry
wins). The cluster is the API emulator; https and client certificates are a TLS proxy in
front of it, with a CA and certificates made here, that records who each request says it
is (bearer token, client certificate)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl

import pytest
import yaml

from gpuctl.adapters.kube import Kube
from gpuctl.common.errors import GpuctlError

pytestmark = pytest.mark.integration

BOTH = ["lean", "kubernetes"]


def _certificates(tmp_path_factory):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    out = tmp_path_factory.mktemp("pki")

    def pem(obj) -> bytes:
        if hasattr(obj, "public_bytes"):
            return obj.public_bytes(serialization.Encoding.PEM)
        return obj.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def issue(cn, issuer=None, ca=False, sans=(), client=False):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        signer_name, signer_key = issuer or (name, key)
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(signer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), False)
        if client:
            usage = x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH])
            builder = builder.add_extension(usage, False)
        return name, key, builder.sign(signer_key, hashes.SHA256())

    ca_name, ca_key, ca_cert = issue("test-ca", ca=True)
    files = {"ca": pem(ca_cert)}
    ip = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    for label, sans in (("server", [ip]), ("named", [x509.DNSName("kube.internal")])):
        _, key, cert = issue(label, (ca_name, ca_key), sans=sans)
        files[f"{label}.crt"], files[f"{label}.key"] = pem(cert), pem(key)
    for user in ("alice", "bob"):
        _, key, cert = issue(user, (ca_name, ca_key), client=True)
        files[f"{user}.crt"], files[f"{user}.key"] = pem(cert), pem(key)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return _certificates(tmp_path_factory)


def tls_proxy(fault_proxy, kube, pki, cert: str = "server"):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    ctx.load_verify_locations(pki / "ca")
    ctx.verify_mode = ssl.CERT_OPTIONAL  # a client certificate, when one is sent
    return fault_proxy(kube.url, tls=ctx)


def b64(path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(path, cluster: dict, user: dict, namespace: str | None = None, **more) -> str:
    context = {"cluster": "c", "user": "u", **({"namespace": namespace} if namespace else {})}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": context}],
        **more,
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def answer(client: str, monkeypatch, path: str | None = None) -> tuple:
    """(the namespace, the namespaces listed) through CLIENT; or the error's class and text."""
    monkeypatch.setenv("GPUCTL_KUBE_CLIENT", client)
    if path:
        monkeypatch.setenv("KUBECONFIG", path)
    try:
        with Kube() as k:
            return k.namespace, sorted(n["metadata"]["name"] for n in k.list_objects("Namespace"))
    except GpuctlError as e:
        return type(e).__name__, e.message


def same_on_both(monkeypatch, path: str | None = None) -> tuple:
    lean, official = (answer(c, monkeypatch, path) for c in BOTH)
    assert lean == official
    return lean


def who(proxy) -> list[tuple[str | None, str | None]]:
    """(Authorization, client certificate's CN) of each request the proxy saw."""
    seen = [{k.lower(): v for k, v in h.items()} for _, _, h in proxy.requests]
    return [(h.get("authorization"), h.get("x-client-certificate-cn")) for h in seen]


@pytest.fixture
def cluster_with_namespace(kube, kube_api):
    from tests.gpu_cluster import seed

    seed(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})


def test_a_token_and_the_contexts_namespace(tmp_path, kube, fault_proxy, monkeypatch):
    proxy = fault_proxy(kube.url)
    path = kubeconfig(tmp_path / "kc", {"server": proxy.url}, {"token": "abc"}, "team-a")
    assert same_on_both(monkeypatch, path)[0] == "team-a"
    assert set(who(proxy)) == {("Bearer abc", None)}


@pytest.mark.parametrize("form", ["data", "files"])
def test_a_client_certificate_over_tls_to_a_cluster_of_its_own_ca(
    form, tmp_path, kube, pki, fault_proxy, monkeypatch
):
    proxy = tls_proxy(fault_proxy, kube, pki)
    if form == "data":
        cluster = {"server": proxy.url, "certificate-authority-data": b64(pki / "ca")}
        user = {
            "client-certificate-data": b64(pki / "alice.crt"),
            "client-key-data": b64(pki / "alice.key"),
        }
    else:  # relative paths: beside the kubeconfig that names them
        (tmp_path / "certs").symlink_to(pki)
        cluster = {"server": proxy.url, "certificate-authority": "certs/ca"}
        user = {"client-certificate": "certs/alice.crt", "client-key": "certs/alice.key"}
    path = kubeconfig(tmp_path / "kc", cluster, user)
    assert same_on_both(monkeypatch, path) == ("default", [])
    assert set(who(proxy)) == {(None, "alice")}


V1 = "client.authentication.k8s.io/v1"


def exec_plugin(tmp_path, status: dict, **exec_config) -> dict:
    """A user's `exec`: a script that prints an ExecCredential of STATUS, and leaves the
    KUBERNETES_EXEC_INFO it was given, and whether its stdin was a terminal, in ran.json."""
    credential = {"apiVersion": V1, "kind": "ExecCredential", "status": status}
    (tmp_path / "credential.json").write_text(json.dumps(credential))
    plugin = tmp_path / "get-credential"
    plugin.write_text(
        "#!/bin/sh\n"
        "[ -t 0 ] && tty=true || tty=false\n"
        f'printf \'{{"tty": %s, "info": %s}}\' $tty "$KUBERNETES_EXEC_INFO" > {tmp_path}/ran.json\n'
        f"cat {tmp_path / 'credential.json'}\n"
    )
    plugin.chmod(0o755)
    return {"apiVersion": V1, "command": str(plugin), "interactiveMode": "Never", **exec_config}


def test_an_exec_plugins_client_certificate(tmp_path, kube, pki, fault_proxy, monkeypatch):
    """A credential plugin may answer with a client certificate and key (PEM in its
    ExecCredential's status) instead of a token."""
    proxy = tls_proxy(fault_proxy, kube, pki)
    status = {
        "clientCertificateData": (pki / "alice.crt").read_text(),
        "clientKeyData": (pki / "alice.key").read_text(),
    }
    cluster = {"server": proxy.url, "certificate-authority-data": b64(pki / "ca")}
    path = kubeconfig(tmp_path / "kc", cluster, {"exec": exec_plugin(tmp_path, status)})
    assert same_on_both(monkeypatch, path) == ("default", [])
    assert set(who(proxy)) == {(None, "alice")}


@pytest.mark.parametrize("other", ["token", "tokenFile", "username/password"])
def test_a_users_other_credential_wins_over_its_exec_plugin(
    other, tmp_path, kube, fault_proxy, monkeypatch
):
    """clientcmd accepts a user with both, and the plugin never runs: exec's
    UpdateTransportConfig leaves a transport that has token, basic or certificate auth
    as it is (the official Python client would send the token, but run the plugin for a
    user of username/password: gpuctl, which runs the plugin for it, follows client-go)."""
    proxy = fault_proxy(kube.url)
    (tmp_path / "token").write_text("from-a-file\n")
    user = {
        "token": {"token": "abc"},
        "tokenFile": {"tokenFile": "token"},
        "username/password": {"username": "admin", "password": "pw"},
    }[other]
    user["exec"] = exec_plugin(tmp_path, {"token": "from-the-plugin"})
    path = kubeconfig(tmp_path / "kc", {"server": proxy.url}, user)
    assert same_on_both(monkeypatch, path) == ("default", [])
    sent = {
        "token": "Bearer abc",
        "tokenFile": "Bearer from-a-file",
        "username/password": "Basic " + base64.b64encode(b"admin:pw").decode(),
    }[other]
    assert set(who(proxy)) == {(sent, None)}
    assert not (tmp_path / "ran.json").exists()


def test_provide_cluster_info_tells_the_plugin_the_cluster_as_client_go_does(
    tmp_path, kube, pki, fault_proxy, monkeypatch
):
    """KUBERNETES_EXEC_INFO's spec.cluster (client-go rest.ConfigToExecCluster): the CA
    as data though the kubeconfig names a file, the extension for the plugin as config
    (the official Python client would pass the kubeconfig's cluster entry as it is)."""
    proxy = tls_proxy(fault_proxy, kube, pki, cert="named")
    (tmp_path / "certs").symlink_to(pki)
    cluster = {
        "server": proxy.url,
        "certificate-authority": "certs/ca",
        "tls-server-name": "kube.internal",
        "extensions": [
            {"name": "other", "extension": {"x": 1}},
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "kube"}},
        ],
    }
    user = {"exec": exec_plugin(tmp_path, {"token": "t"}, provideClusterInfo=True)}
    path = kubeconfig(tmp_path / "kc", cluster, user)
    for client in BOTH:
        (tmp_path / "ran.json").unlink(missing_ok=True)
        assert answer(client, monkeypatch, path) == ("default", [])
        told = json.loads((tmp_path / "ran.json").read_text())["info"]["spec"]["cluster"]
        assert told == {
            "server": proxy.url,
            "tls-server-name": "kube.internal",
            "certificate-authority-data": b64(pki / "ca"),
            "config": {"audience": "kube"},
        }


def test_a_server_certificate_not_trusted_is_the_same_error(
    tmp_path, kube, pki, fault_proxy, monkeypatch
):
    proxy = tls_proxy(fault_proxy, kube, pki)
    path = kubeconfig(tmp_path / "kc", {"server": proxy.url}, {"token": "abc"})
    kind, message = same_on_both(monkeypatch, path)
    assert (kind, message) == (
        "BackendError",
        f"listing namespaces: the Kubernetes API at {proxy.url}: its certificate is not trusted",
    )
    insecure = {"server": proxy.url, "insecure-skip-tls-verify": True}
    path = kubeconfig(tmp_path / "kc", insecure, {"token": "abc"})
    assert same_on_both(monkeypatch, path) == ("default", [])


def test_tls_server_name_is_the_name_the_certificate_is_checked_against(
    tmp_path, kube, pki, fault_proxy, monkeypatch
):
    proxy = tls_proxy(fault_proxy, kube, pki, cert="named")  # kube.internal, not the IP
    cluster = {"server": proxy.url, "certificate-authority-data": b64(pki / "ca")}
    path = kubeconfig(tmp_path / "kc", cluster, {"token": "abc"})
    assert same_on_both(monkeypatch, path)[0] == "BackendError"
    cluster["tls-server-name"] = "kube.internal"
    path = kubeconfig(tmp_path / "kc", cluster, {"token": "abc"})
    assert same_on_both(monkeypatch, path) == ("default", [])


def test_proxy_url_carries_the_requests(tmp_path, kube, fault_proxy, monkeypatch):
    forward = fault_proxy(kube.url)  # an HTTP proxy: it is sent the whole URL
    cluster = {"server": "http://kube.invalid:6443", "proxy-url": forward.url}
    path = kubeconfig(tmp_path / "kc", cluster, {"token": "abc"})
    assert same_on_both(monkeypatch, path) == ("default", [])
    assert set(who(forward)) == {("Bearer abc", None)}


def test_without_proxy_url_the_environments_proxy_as_go_reads_it(
    tmp_path, kube, fault_proxy, monkeypatch
):
    """HTTP_PROXY/HTTPS_PROXY, less NO_PROXY (Go's ProxyFromEnvironment; the official
    Python client reads them too)."""
    forward = fault_proxy(kube.url)
    monkeypatch.setenv("HTTP_PROXY", forward.url)
    cluster = {"server": "http://kube.invalid:6443"}
    path = kubeconfig(tmp_path / "kc", cluster, {"token": "abc"})
    assert same_on_both(monkeypatch, path) == ("default", [])
    assert len(forward.requests) == 2
    monkeypatch.setenv("NO_PROXY", "kube.invalid")
    assert same_on_both(monkeypatch, path)[0] == "Unreachable"
    assert len(forward.requests) == 2


def test_username_and_password_are_basic_auth(tmp_path, kube, fault_proxy, monkeypatch):
    proxy = fault_proxy(kube.url)
    user = {"username": "admin", "password": "s3cret"}
    same_on_both(monkeypatch, kubeconfig(tmp_path / "kc", {"server": proxy.url}, user))
    assert set(who(proxy)) == {("Basic " + base64.b64encode(b"admin:s3cret").decode(), None)}


def test_kubeconfig_files_merge_as_clientcmd_merges_them(tmp_path, kube, fault_proxy, monkeypatch):
    """First file wins per name (its whole entry) and for current-context; a missing file
    is skipped; relative paths resolve beside the file that names them."""
    proxy = fault_proxy(kube.url)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "token").write_text("from-a-file\n")
    first = kubeconfig(tmp_path / "a" / "kc", {"server": proxy.url}, {"tokenFile": "token"})
    second = tmp_path / "b"
    second.write_text(
        yaml.safe_dump(
            {
                "current-context": "other",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "from-b"}}],
                "contexts": [
                    {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "ml"}}
                ],
            }
        )
    )
    listed = ":".join([str(tmp_path / "missing"), first, str(second), first])
    assert same_on_both(monkeypatch, listed) == ("default", [])
    assert set(who(proxy)) == {("Bearer from-a-file", None)}
    monkeypatch.setenv("GPUCTL_CONTEXT", "other")  # b's context, on a's cluster and user
    assert same_on_both(monkeypatch, listed) == ("ml", [])


def test_impersonation_headers(tmp_path, kube, fault_proxy, monkeypatch):
    """as/as-groups: client-go sends Impersonate-* headers (the official Python client
    does not read them: the lean transport only)."""
    proxy = fault_proxy(kube.url)
    user = {"token": "abc", "as": "bob", "as-groups": ["ml-admins"]}
    answer("lean", monkeypatch, kubeconfig(tmp_path / "kc", {"server": proxy.url}, user))
    seen = proxy.requests[-1][2]
    assert (seen["Impersonate-User"], seen["Impersonate-Group"]) == ("bob", "ml-admins")


def test_impersonation_sends_a_header_for_each_group_and_extra_value(tmp_path, monkeypatch):
    """client-go's impersonatingRoundTripper adds a header per group and per extra value
    (the API server reads them all and splits none at commas), an extra's key %-escaped.
    The lean transport only; a server of this test's records the repeated headers."""
    import http.server
    import threading

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers)
            body = b'{"kind": "NamespaceList", "items": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    user = {
        "token": "abc",
        "as": "bob",
        "as-groups": ["ml-admins", "a,b"],
        "as-user-extra": {"scopes.example.com/x y": ["1", "2"]},
    }
    cluster = {"server": f"http://127.0.0.1:{server.server_port}"}
    try:
        assert answer("lean", monkeypatch, kubeconfig(tmp_path / "kc", cluster, user)) == (
            "default",
            [],
        )
    finally:
        server.shutdown()
        server.server_close()
    headers = seen[-1]
    assert headers.get_all("Impersonate-User") == ["bob"]
    assert headers.get_all("Impersonate-Group") == ["ml-admins", "a,b"]
    assert headers.get_all("Impersonate-Extra-scopes.example.com%2Fx%20y") == ["1", "2"]


def oidc_kubeconfig(path, server: str) -> tuple[str, str]:
    """A kubeconfig whose user logs in through the legacy oidc auth-provider, and its
    id-token (unexpired, so the client sends it as it is, with no refresh)."""

    def part(doc: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    id_token = ".".join([part({"alg": "none"}), part({"exp": 4102444800}), "sig"])
    provider = {
        "name": "oidc",
        "config": {"client-id": "k", "id-token": id_token, "idp-issuer-url": "https://i"},
    }
    return kubeconfig(path, {"server": server}, {"auth-provider": provider}), id_token


def test_an_auth_provider_user_is_served_by_the_official_client(
    tmp_path, kube, fault_proxy, monkeypatch, capsys
):
    """The lean transport hands such a user to the official client, and --debug says so
    once (not without --debug)."""
    from tests.clirun import run_gpuctl

    proxy = fault_proxy(kube.url)
    path, id_token = oidc_kubeconfig(tmp_path / "kc", proxy.url)
    monkeypatch.setenv("KUBECONFIG", path)
    monkeypatch.setenv("GPUCTL_KUBE_CLIENT", "lean")
    with Kube() as k:
        k.list_objects("Namespace")
        assert "auth-provider 'oidc'" in (k.note or "")
    assert set(who(proxy)) == {(f"Bearer {id_token}", None)}
    code, _, err = run_gpuctl(capsys, "--debug", "jobs", "list", "-A")
    assert code == 0 and err.count("the official kubernetes client serves it") == 1
    code, _, err = run_gpuctl(capsys, "jobs", "list", "-A")
    assert code == 0 and "official kubernetes client" not in err


# One broken field at a time: each transport refuses the kubeconfig; the lean one names
# the file and the entry.
BROKEN = {
    "no server": ({"cluster": {}}, "cluster 'c': no server"),
    "server not a URL": ({"cluster": {"server": "kube:port"}}, "is not"),
    "CA file missing": (
        {"cluster": {"server": "https://127.0.0.1:1", "certificate-authority": "nope.crt"}},
        "nope.crt: no such file",
    ),
    "CA data not base64": (
        {"cluster": {"server": "https://127.0.0.1:1", "certificate-authority-data": "%%%"}},
        "certificate-authority-data is not base64",
    ),
    "CA data not a certificate": (
        {
            "cluster": {
                "server": "https://127.0.0.1:1",
                "certificate-authority-data": base64.b64encode(b"not pem").decode(),
            }
        },
        "not a usable PEM certificate",
    ),
    "certificate without key": (
        {"user": {"client-certificate-data": base64.b64encode(b"x").decode()}},
        "client-key or client-key-data is needed",
    ),
    "key file missing": (
        {"user": {"client-certificate": "a.crt", "client-key": "a.key"}},
        "no such file",
    ),
    "no such cluster": ({"context": {"cluster": "gone", "user": "u"}}, "no cluster 'gone'"),
    "no such user": ({"context": {"cluster": "c", "user": "gone"}}, "no user 'gone'"),
    "no current context": ({"current-context": ""}, "no current-context"),
    # clientcmd's validation: "more than one authentication method found"; with a
    # tokenFile, the transport's "username/password or bearer token may be set, but not
    # both" (the official Python client sends the token: gpuctl refuses before it)
    "token and username": (
        {"user": {"token": "t", "username": "u", "password": "p"}},
        "user 'u': both a token and a username/password",
    ),
    "tokenFile and password": (
        {"user": {"tokenFile": "t", "password": "p"}},
        "user 'u': both a token and a username/password",
    ),
    # clientcmd's validation: one form of a credential or CA, `as` for the rest of
    # impersonation (the official Python client would take the data, and not impersonate)
    "CA file and data": (
        {
            "cluster": {
                "server": "https://127.0.0.1:1",
                "certificate-authority": "ca.crt",
                "certificate-authority-data": base64.b64encode(b"x").decode(),
            }
        },
        "cluster 'c': both certificate-authority and certificate-authority-data",
    ),
    "client certificate file and data": (
        {
            "user": {
                "client-certificate": "a.crt",
                "client-certificate-data": base64.b64encode(b"x").decode(),
                "client-key-data": base64.b64encode(b"x").decode(),
            }
        },
        "user 'u': both client-certificate and client-certificate-data",
    ),
    "as-groups without as": (
        {"user": {"token": "t", "as-groups": ["ml-admins"]}},
        "user 'u': as-uid, as-groups or as-user-extra without `as`",
    ),
    # clientcmd's validation of exec; its v1 defaults make a v1beta1 plugin IfAvailable
    "exec v1 without interactiveMode": (
        {"user": {"exec": {"apiVersion": V1, "command": "true"}}},
        "user 'u': exec has no interactiveMode (Never, IfAvailable or Always: "
        "client.authentication.k8s.io/v1 needs one)",
    ),
    "exec interactiveMode unknown": (
        {"user": {"exec": {"apiVersion": V1, "command": "true", "interactiveMode": "Sometimes"}}},
        "exec interactiveMode 'Sometimes' is not Never, IfAvailable or Always",
    ),
    "exec without apiVersion": (
        {"user": {"exec": {"command": "true", "interactiveMode": "Never"}}},
        "user 'u': exec has no apiVersion",
    ),
    "exec env without a name": (
        {
            "user": {
                "exec": {
                    "apiVersion": V1,
                    "command": "true",
                    "interactiveMode": "Never",
                    "env": [{"value": "x"}],
                }
            }
        },
        "exec env is not a list of entries with a name",
    ),
    "not YAML": (None, "not valid YAML"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_kubeconfig_broken_in_one_field_is_refused_by_both(case, tmp_path, monkeypatch):
    change, said = BROKEN[case]
    path = tmp_path / "kc"
    kubeconfig(path, {"server": "http://127.0.0.1:1"}, {"token": "t"})
    doc = yaml.safe_load(path.read_text())
    if change is None:
        path.write_text("clusters: [\n")
    else:
        for key, value in change.items():
            if key == "current-context":
                doc[key] = value
            else:
                doc[f"{key}s"][0][key] = value
        path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", str(path))
    for client in BOTH:
        monkeypatch.setenv("GPUCTL_KUBE_CLIENT", client)
        with pytest.raises(GpuctlError) as e:
            with Kube() as k:
                k.list_objects("Namespace")
        if client == "lean":
            assert said in e.value.message and "no usable Kubernetes configuration" in (
                e.value.message
            )


class _Relay:
    """A proxy on a local port: per client, `opened` reads the proxy protocol's request and
    answers it, returning where to connect; then the bytes are relayed both ways. `heads`
    records what each client asked."""

    def __init__(self, scheme: str):
        import socket
        import threading

        self.heads: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"{scheme}://user:p%40ss@127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.opened(client))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def opened(self, client) -> tuple[str, int]:
        raise NotImplementedError

    @staticmethod
    def _pipe(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def close(self) -> None:
        self._server.close()


class _ConnectProxy(_Relay):
    """An HTTP proxy that serves only CONNECT, as one in front of an https API server does."""

    def __init__(self):
        super().__init__("http")

    def opened(self, client) -> tuple[str, int]:
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        self.heads.append(head)
        host, port = head.split()[1].decode().rsplit(":", 1)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        return host, int(port)


class _Socks5Proxy(_Relay):
    """A SOCKS5 proxy (RFC 1928) asking for a username and password (RFC 1929); it records
    the credentials and the address asked for (a name: socks5h)."""

    def __init__(self):
        super().__init__("socks5h")

    def opened(self, client) -> tuple[str, int]:
        def read(n: int) -> bytes:
            data = b""
            while len(data) < n:
                data += client.recv(n - len(data))
            return data

        read(read(2)[1])  # version, then the methods offered
        client.sendall(b"\x05\x02")
        _, size = read(2)
        user = read(size)
        password = read(read(1)[0])
        client.sendall(b"\x01\x00")
        _, command, _, kind = read(4)
        assert command == 1 and kind == 3  # CONNECT to a domain name
        host = read(read(1)[0])
        port = int.from_bytes(read(2), "big")
        self.heads.append(b"%s:%s %s:%d" % (user, password, host, port))
        client.sendall(b"\x05\x00\x00\x01" + bytes(4) + bytes(2))
        return host.decode().replace("kube.invalid", "127.0.0.1"), port


def test_an_https_cluster_through_an_http_proxys_tunnel(
    tmp_path, kube, pki, fault_proxy, monkeypatch
):
    """proxy-url http:// before an https server: a CONNECT tunnel, the proxy's credentials
    (from the URL, percent-decoded) in Proxy-Authorization, TLS to the server through it."""
    server = tls_proxy(fault_proxy, kube, pki)
    tunnel = _ConnectProxy()
    try:
        cluster = {
            "server": server.url,
            "certificate-authority-data": b64(pki / "ca"),
            "proxy-url": tunnel.url,
        }
        path = kubeconfig(tmp_path / "kc", cluster, {"token": "abc"})
        assert same_on_both(monkeypatch, path) == ("default", [])
    finally:
        tunnel.close()
    port = server.url.rsplit(":", 1)[1]
    heads = [h.decode() for h in tunnel.heads]
    assert heads and all(h.startswith(f"CONNECT 127.0.0.1:{port} ") for h in heads)
    credentials = base64.b64encode(b"user:p@ss").decode()
    # the lean transport's tunnel first: the credentials as Go's Transport sends them; the
    # official client's urllib3 ProxyManager sends none unless told (proxy_headers)
    assert [f"Proxy-Authorization: Basic {credentials}" in h for h in heads] == [
        True,
        False,
    ]
    assert {authorization for authorization, _ in who(server)} == {"Bearer abc"}


def test_a_cluster_through_a_socks5_proxy(tmp_path, kube, monkeypatch):
    """proxy-url socks5h://: the proxy is sent the server's name to resolve, and the URL's
    credentials (percent-decoded)."""
    proxy = _Socks5Proxy()
    port = kube.url.rsplit(":", 1)[1].rstrip("/")
    try:
        cluster = {"server": f"http://kube.invalid:{port}", "proxy-url": proxy.url}
        path = kubeconfig(tmp_path / "kc", cluster, {"token": "abc"})
        assert same_on_both(monkeypatch, path) == ("default", [])
    finally:
        proxy.close()
    assert set(proxy.heads) == {f"user:p@ss kube.invalid:{port}".encode()}


def test_a_server_behind_a_path_prefix(tmp_path, kube, monkeypatch):
    """A server URL with a path (Rancher's https://rancher/k8s/clusters/c-m-1): every request
    goes under it, as client-go's rest client joins the two."""
    import http.client
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    prefix, upstream = "/k8s/clusters/c-m-1", urlsplit(kube.url)
    seen: list[str] = []

    class StripPrefix(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            if not self.path.startswith(prefix + "/"):
                self.send_error(404)
                return
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=10)
            conn.request("GET", self.path[len(prefix) :], headers=dict(self.headers))
            answer = conn.getresponse()
            body = answer.read()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.getheader("Content-Type") or "")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), StripPrefix)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}{prefix}"
        path = kubeconfig(tmp_path / "kc", {"server": url}, {"token": "abc"})
        assert same_on_both(monkeypatch, path) == ("default", [])
    finally:
        server.shutdown()
    assert seen and all(p.startswith(f"{prefix}/api/v1/namespaces") for p in seen)
