"""The ReclaimPolicy spec (parsed through its field table, refused with file, line and field)
and `gpuctl reclaim render --deploy`: manifests valid for Kubernetes (kubernetes-validate,
strict), RBAC that allows exactly what the policy's actions write."""

from __future__ import annotations

import pytest
import yaml

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.reclaim.core import deploy
from gpuctl.reclaim.core import policy as pol
from tests.k8s_schema import assert_valid

GOOD = """apiVersion: gpuctl/v1
kind: ReclaimPolicy
name: lab
busyPercent: 10
exempt: {namespaces: [kube-system]}
rules:
  - name: notebooks
    namespaces: research
    selector: "app=notebook,!keep"
    idleFor: 1h
    action: [scale-to-zero, suspend]
    grace: 30m
  - idleFor: 4h
"""


def test_a_policy_is_read_with_its_defaults():
    p = pol.parse_policy(load_yaml(GOOD, "p.yaml"))
    assert (p.name, p.busy_percent, p.max_actions, p.exempt_namespaces) == (
        "lab",
        10,
        10,
        ("kube-system",),
    )
    first, second = p.rules
    assert (first.namespaces, first.idle_for_s, first.grace_s) == (("research",), 3600, 1800)
    assert (
        first.action_for("Deployment") == "scale-to-zero" and first.action_for("Job") == "suspend"
    )
    assert first.action_for("Pod") == "report"  # delete is opt-in only
    assert first.covers("research", {"app": "notebook"}) and not first.covers(
        "research", {"app": "notebook", "keep": ""}
    )
    assert (second.name, second.actions, second.namespaces) == ("rule-2", ("report",), ())


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        (
            GOOD.replace("action: [scale-to-zero, suspend]", "action: evict"),
            "rules[0].action[0]",
            11,
        ),
        (GOOD.replace("idleFor: 1h", "idleFor: soon"), "rules[0].idleFor", 10),
        (GOOD.replace("busyPercent: 10", "busyPercent: 0"), "busyPercent", 4),
        (GOOD.replace("    grace: 30m", "    graze: 30m"), "rules[0].graze", 12),
        (
            GOOD.replace('selector: "app=notebook,!keep"', 'selector: "a=(b"'),
            "rules[0].selector",
            9,
        ),
    ],
)
def test_a_bad_policy_names_file_line_and_field(text, field, line):
    with pytest.raises(SpecError) as e:
        pol.parse_policy(load_yaml(text, "p.yaml"))
    assert (e.value.field, e.value.line, e.value.file) == (field, line, "p.yaml")


def test_the_schema_and_the_parser_agree(cli):
    import json

    import jsonschema

    r = cli("schema", "reclaim-policy", "-o", "json")
    assert r.code == 0, r
    jsonschema.validate(yaml.safe_load(GOOD), json.loads(r.out))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**yaml.safe_load(GOOD), "extra": 1}, json.loads(r.out))


def rules_of(docs, kind):
    return [r for d in docs if d["kind"] == kind for r in d.get("rules", [])]


@pytest.mark.parametrize("every", [None, 600])
def test_render_deploy_is_valid_and_allows_exactly_the_policys_actions(every):
    p = pol.parse_policy(load_yaml(GOOD, "p.yaml"))
    docs = deploy.render(
        p, GOOD, "gpuctl", "registry.example/gpuctl:1", "http://prom:9090", every_s=every
    )
    for d in docs:
        assert_valid(d)
    kinds = [d["kind"] for d in docs]
    assert kinds[-1] == ("Deployment" if every else "CronJob")
    act = next(
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-act")
    )
    granted = {
        (g, r, v)
        for rule in act["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("kueue.x-k8s.io", "workloads", "patch") in granted  # suspend, through Kueue
    assert ("", "pods/eviction", "create") not in granted  # delete is not in the policy
    assert ("", "pods", "delete") not in granted and all(v != "delete" for *_, v in granted)
    # a rule covers every namespace: the write role is bound cluster-wide
    assert any(
        d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("-act") for d in docs
    )


def test_a_report_only_policy_for_named_namespaces_writes_only_there():
    text = "apiVersion: gpuctl/v1\nkind: ReclaimPolicy\nrules:\n  - namespaces: [a, b]\n"
    p = pol.parse_policy(load_yaml(text, "p.yaml"))
    docs = deploy.render(p, text, "gpuctl", "img:1", "http://prom:9090")
    for d in docs:
        assert_valid(d)
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["a", "b"]
    assert not any(
        d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("-act") for d in docs
    )
    granted = {r for rule in rules_of(docs, "ClusterRole") for r in rule["resources"]}
    assert "pods/eviction" not in granted
    assert not any(
        "patch" in rule["verbs"] and "workloads" in rule["resources"]
        for rule in rules_of(docs, "ClusterRole")
    )


def test_render_deploy_through_the_cli(cli, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(GOOD)
    r = cli(
        "reclaim",
        "render",
        "--deploy",
        "--policy",
        str(f),
        "--image",
        "img:1",
        "--prometheus",
        "http://prom:9090",
    )
    assert r.code == 0, r
    docs = list(yaml.safe_load_all(r.out))
    assert docs[-1]["kind"] == "CronJob"
    assert yaml.safe_load(docs[1]["data"]["policy.yaml"]) == yaml.safe_load(GOOD)
