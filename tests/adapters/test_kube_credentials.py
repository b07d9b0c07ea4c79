"""Credentials renewed during a long run, as client-go renews them (transport/token_source.go,
plugin/pkg/client/auth/exec/exec.go): a tokenFile read again once a minute, an exec plugin run
again when its credential expires or is refused. Both transports connect to the API emulator
through a proxy that records each request's Authorization; their clocks are arguments, moved
here instead of waited on."""

from __future__ import annotations

import contextlib
import json

import pytest

from gpuctl.adapters import kube_auth, kubeconfig
from gpuctl.adapters.kube_client import ClientTransport
from gpuctl.adapters.kube_credentials import TokenFile
from gpuctl.adapters.kube_http import HttpFailure, Transport
from gpuctl.common.errors import UsageError
from tests.adapters.test_kubeconfig_corpus import _certificates, b64, tls_proxy, who
from tests.adapters.test_kubeconfig_corpus import kubeconfig as kubeconfig_file
from tests.standins.faults import reply

pytestmark = pytest.mark.integration

BOTH = ["lean", "kubernetes"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return _certificates(tmp_path_factory)


class Clock:
    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def write_kubeconfig(tmp_path, server: str, user: dict) -> str:
    return kubeconfig_file(tmp_path / "kc", {"server": server}, user)


def transport(client: str, path: str, clock: Clock, wall_clock: Clock):
    """The transport CLIENT connects with for the kubeconfig PATH, on these clocks."""
    if client == "lean":
        target = kubeconfig.target(kubeconfig.merge([path]), None)
        return Transport(target, 10, clock, wall_clock)
    from kubernetes import client as k8s

    cfg = k8s.Configuration()
    refused = kube_auth.load(kube_auth.read(path), None, cfg, 10, clock, wall_clock)
    return ClientTransport(cfg, refused)


def sent(proxy, t) -> str | None:
    """Send one request through T; the Authorization the API server got."""
    before = len(proxy.requests)
    with contextlib.suppress(HttpFailure):  # a 401 answer
        _ = t.request("GET", "/api/v1/namespaces", None, None, "application/json", 10).data
    (_, _, headers), *more = proxy.requests[before:]
    assert not more  # never sent again
    return {k.lower(): v for k, v in headers.items()}.get("authorization")


@pytest.mark.parametrize("client", BOTH)
def test_a_token_file_is_read_again_after_client_gos_period(client, tmp_path, kube, fault_proxy):
    """A projected service-account token rotated by the kubelet reaches a long-running
    process: read again once the last read is 50 s old (a minute, less 10 s of leeway);
    a read that fails keeps the last token (client-go logs "Unable to rotate token")."""
    proxy = fault_proxy(kube.url)
    (tmp_path / "token").write_text("one\n")
    clock = Clock(1000.0)
    t = transport(
        client, write_kubeconfig(tmp_path, proxy.url, {"tokenFile": "token"}), clock, Clock()
    )
    assert sent(proxy, t) == "Bearer one"
    (tmp_path / "token").write_text("two\n")
    clock.now += 49.9
    assert sent(proxy, t) == "Bearer one"
    clock.now += 0.1
    assert sent(proxy, t) == "Bearer two"
    (tmp_path / "token").unlink()
    clock.now += 120
    assert sent(proxy, t) == "Bearer two"


@pytest.mark.parametrize("client", BOTH)
def test_a_token_beside_a_token_file_serves_until_the_file_is_read(
    client, tmp_path, kube, fault_proxy
):
    """clientcmd keeps both; the file's token, once read, wins ("the last successfully
    read value takes precedence over BearerToken"), and the file need not exist at the
    start."""
    proxy = fault_proxy(kube.url)
    path = write_kubeconfig(tmp_path, proxy.url, {"token": "abc", "tokenFile": "token"})
    clock = Clock(1000.0)
    t = transport(client, path, clock, Clock())
    assert sent(proxy, t) == "Bearer abc"
    (tmp_path / "token").write_text("from-the-file")
    assert sent(proxy, t) == "Bearer from-the-file"


def test_a_token_file_alone_must_be_readable_at_the_start(tmp_path):
    with pytest.raises(UsageError, match=r"tokenFile .*/token: No such file"):
        TokenFile(str(tmp_path / "token"), None)


def counting_plugin(tmp_path, expires: str | None) -> dict:
    """An exec plugin whose n-th run answers token-n (expiring at EXPIRES, where $n is n);
    it counts its runs in tmp/runs."""
    status = '"token": "token-\'$n\'"' + (
        f', "expirationTimestamp": "{expires}"' if expires else ""
    )
    plugin = tmp_path / "get-token"
    plugin.write_text(
        "#!/bin/sh\n"
        f"n=$(( $(cat {tmp_path}/runs 2>/dev/null || echo 0) + 1 )); echo $n > {tmp_path}/runs\n"
        'echo \'{"apiVersion": "client.authentication.k8s.io/v1", '
        f'"kind": "ExecCredential", "status": {{{status}}}}}\'\n'
    )
    plugin.chmod(0o755)
    version = "client.authentication.k8s.io/v1"
    return {"exec": {"apiVersion": version, "command": str(plugin), "interactiveMode": "Never"}}


def runs(tmp_path) -> int:
    return int((tmp_path / "runs").read_text())


@pytest.mark.parametrize("client", BOTH)
def test_an_exec_credential_is_renewed_once_it_expires(client, tmp_path, kube, fault_proxy):
    """client-go's Authenticator runs the plugin again once now is after the credential's
    expirationTimestamp; until then every request carries the same one."""
    proxy = fault_proxy(kube.url)
    path = write_kubeconfig(
        tmp_path, proxy.url, counting_plugin(tmp_path, "203'$n'-01-01T00:00:00Z")
    )
    wall = Clock(1924991999.0)  # 2030-12-31T23:59:59Z; token-1 expires in 2031, token-2 2032
    t = transport(client, path, Clock(), wall)
    assert [sent(proxy, t), sent(proxy, t)] == ["Bearer token-1"] * 2
    wall.now += 2
    assert [sent(proxy, t), sent(proxy, t)] == ["Bearer token-2"] * 2
    assert runs(tmp_path) == 2


@pytest.mark.parametrize("client", BOTH)
def test_a_refused_exec_credential_is_renewed_for_the_next_request(
    client, tmp_path, kube, fault_proxy
):
    """A 401 to the plugin's credential runs the plugin again for the next request; the
    refused request is not sent again (client-go's exec roundTripper; the official Python
    client alone would keep the credential until its expirationTimestamp)."""
    proxy = fault_proxy(kube.url)
    path = write_kubeconfig(tmp_path, proxy.url, counting_plugin(tmp_path, None))
    t = transport(client, path, Clock(), Clock())
    assert sent(proxy, t) == "Bearer token-1"
    proxy.on("GET", "/api/v1/namespaces", reply(401, json.dumps({"kind": "Status", "code": 401})))
    assert sent(proxy, t) == "Bearer token-1"
    assert [sent(proxy, t), sent(proxy, t)] == ["Bearer token-2"] * 2
    assert runs(tmp_path) == 2


def test_a_renewed_client_certificate_is_what_the_next_connection_presents(
    tmp_path, kube, pki, fault_proxy
):
    """A plugin's client certificate renewed on expiry takes new connections (client-go
    closes those of the old one): the TLS handshake presents it."""
    proxy = tls_proxy(fault_proxy, kube, pki)
    for n, user in ((1, "alice"), (2, "bob")):
        status = {
            "clientCertificateData": (pki / f"{user}.crt").read_text(),
            "clientKeyData": (pki / f"{user}.key").read_text(),
            "expirationTimestamp": f"203{n}-01-01T00:00:00Z",
        }
        credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}
        (tmp_path / f"{n}.json").write_text(json.dumps({**credential, "status": status}))
    plugin = tmp_path / "get-cert"
    plugin.write_text(
        "#!/bin/sh\n"
        f"n=$(( $(cat {tmp_path}/runs 2>/dev/null || echo 0) + 1 )); echo $n > {tmp_path}/runs\n"
        f"cat {tmp_path}/$n.json\n"
    )
    plugin.chmod(0o755)
    version = "client.authentication.k8s.io/v1"
    user = {"exec": {"apiVersion": version, "command": str(plugin), "interactiveMode": "Never"}}
    cluster = {"server": proxy.url, "certificate-authority-data": b64(pki / "ca")}
    wall = Clock(1924991999.0)  # 2030-12-31T23:59:59Z: alice's expires in 2031, bob's 2032
    t = transport("lean", kubeconfig_file(tmp_path / "kc", cluster, user), Clock(), wall)
    sent(proxy, t), sent(proxy, t)
    wall.now += 2
    sent(proxy, t), sent(proxy, t)
    assert [cn for _, cn in who(proxy)] == ["alice", "alice", "bob", "bob"]
    assert runs(tmp_path) == 2
