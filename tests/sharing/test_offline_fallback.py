"""When a dry run may render without a cluster: no usable kubeconfig, or a cluster that
cannot be reached or does not answer. A cluster that answers with a refusal is no reason to
guess what it holds: its error stands, as without --dry-run. (A 5xx, like a timeout, is
no answer: a gateway in front of a cluster that is down.)"""

import socket

import pytest

from tests.standins.faults import drop_request, reply
from tests.standins.kube import write_kubeconfig

SHARE = ("share", "timeslice", "--replicas", "4", "--node", "gpu-1", "--dry-run", "-o", "yaml")
QUOTA = ("quota", "set", "team-a", "--gpus", "4", "--engine", "resourcequota", "--dry-run")
UNAUTHORIZED = (
    '{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}'
)


@pytest.mark.parametrize("args", [SHARE, QUOTA], ids=["share", "quota"])
@pytest.mark.parametrize("status", [400, 401])
def test_a_cluster_that_refuses_is_an_error_not_an_offline_render(cli, proxied_kube, args, status):
    body = UNAUTHORIZED.replace("401", str(status))
    proxied_kube.on("GET", r"/.*", reply(status, body), nth=None)
    r = cli(*args)
    assert r.code == 1 and r.out == "", r
    assert "no cluster (" not in r.err


def test_a_cluster_that_does_not_answer_is_rendered_offline(cli, proxied_kube):
    proxied_kube.on("GET", r"/.*", drop_request(), nth=None)
    r = cli(*SHARE)
    assert r.code == 0 and "no cluster (" in r.err and "kind: ConfigMap" in r.out, r


@pytest.mark.integration
def test_a_cluster_that_cannot_be_reached_is_rendered_offline(cli, tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kubeconfig", url))
    r = cli(*SHARE)
    assert r.code == 0 and "no cluster (" in r.err and "cannot reach" in r.err, r
