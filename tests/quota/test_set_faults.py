"""`gpuctl quota set` under faults: a new namespace and its quota are created together or not
at all (or the message says exactly what is left), through a proxy in front of the API
emulator that refuses or loses answers."""

import json

import pytest

from gpuctl.quota.core.rules import QUOTA_NAME
from tests.standins.faults import drop_answer, race_creator, reply

QUOTAS = "/api/v1/namespaces/team-a/resourcequotas"
NAMESPACE = "/api/v1/namespaces/team-a"
FORBIDDEN = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": 'resourcequotas is forbidden: User "dev" cannot create resource',
        "reason": "Forbidden",
        "code": 403,
    }
)


@pytest.fixture
def core(kube_api):
    from kubernetes import client

    return client.CoreV1Api(kube_api)


def namespaces(core):
    return [n.metadata.name for n in core.list_namespace().items]


def quotas(core):
    return [q.metadata.name for q in core.list_namespaced_resource_quota("team-a").items]


def test_a_refused_quota_takes_the_new_namespace_back(cli, core, proxied_kube):
    proxied_kube.on("POST", QUOTAS, reply(403, FORBIDDEN))
    r = cli("quota", "set", "team-a", "--gpus", "4")
    assert r.code == 1 and "not allowed by the cluster (HTTP 403" in r.err, r
    assert "the objects created before the failure were removed: Namespace/team-a" in r.err
    assert "team-a" not in namespaces(core)


def test_a_quota_made_behind_a_lost_answer_is_removed_with_its_namespace(cli, core, proxied_kube):
    rule = proxied_kube.on("POST", QUOTAS, drop_answer())
    r = cli("quota", "set", "team-a", "--gpus", "4")
    assert rule.fired.is_set() and r.code == 1, r
    assert f"removed: ResourceQuota/{QUOTA_NAME}, Namespace/team-a" in r.err
    assert "team-a" not in namespaces(core) and quotas(core) == []


def test_when_the_namespace_cannot_be_removed_the_message_says_so(cli, core, proxied_kube):
    proxied_kube.on("POST", QUOTAS, reply(403, FORBIDDEN))
    proxied_kube.on("DELETE", NAMESPACE, reply(403, FORBIDDEN.replace("create", "delete")))
    r = cli("quota", "set", "team-a", "--gpus", "4")
    assert r.code == 1
    lines = r.err.strip().splitlines()[-3:]  # after the plan
    assert "rollback incomplete: 1 object(s) left in the cluster" in lines[0]
    assert lines[1].startswith("  left: Namespace/team-a (deleting it failed: ")
    assert lines[1].endswith("; remove it with: kubectl delete namespace team-a")
    assert lines[2] == "  hint: remove them with: kubectl delete namespace team-a"
    assert "team-a" in namespaces(core)


def test_an_update_whose_answer_was_lost_is_restored(cli, core, proxied_kube):
    assert cli("quota", "set", "team-a", "--gpus", "4").code == 0
    rule = proxied_kube.on("PATCH", f"{QUOTAS}/{QUOTA_NAME}", drop_answer())
    r = cli("quota", "set", "team-a", "--gpus", "8", "--yes")
    assert rule.fired.is_set() and r.code == 1, r
    assert f"the hard limits were restored: ResourceQuota team-a/{QUOTA_NAME}" in r.err
    hard = core.read_namespaced_resource_quota(QUOTA_NAME, "team-a").spec.hard
    assert hard == {"requests.nvidia.com/gpu": "4"}


def test_a_rollback_leaves_a_namespace_another_client_made_behind_a_lost_answer(
    cli, core, proxied_kube
):
    """Another team creates Namespace team-a (and puts a ConfigMap in it) while gpuctl's
    create of it goes unanswered: the rollback must not remove their namespace."""

    def theirs(obj):
        core.create_namespace(obj)
        core.create_namespaced_config_map(
            "team-a", {"metadata": {"name": "their-settings"}, "data": {"k": "v"}}
        )

    rule = proxied_kube.on("POST", "/api/v1/namespaces", race_creator(theirs))
    r = cli("quota", "set", "team-a", "--gpus", "4")
    assert rule.fired.is_set() and r.code == 1, r
    assert "team-a" in namespaces(core) and "nothing was changed" in r.err, r.err
    assert [c.metadata.name for c in core.list_namespaced_config_map("team-a").items] == [
        "their-settings"
    ]
