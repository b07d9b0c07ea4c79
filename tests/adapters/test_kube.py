"""The Kubernetes adapter's verbs against the API emulator, through each transport (gpuctl's
lean one and the official client's)."""

import pytest

from gpuctl.adapters.kube import Conflict, Forbidden, Kube, NotFound
from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.k8s.labels import QUEUE_LABEL
from tests.gpu_cluster import mark, node, pod, seed, writes

pytestmark = pytest.mark.usefixtures("kube_client")


@pytest.fixture
def k(kube):
    with Kube() as k:
        yield k


def config_map(name, namespace=None, data=None):
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


def test_namespaced_object_round_trip(k, kube):
    made = k.create(config_map("cfg", "team-a", {"a": "1"}))
    assert made["metadata"]["name"] == "cfg"
    assert k.read("ConfigMap", "cfg", "team-a")["data"] == {"a": "1"}
    k.patch("ConfigMap", "cfg", "team-a", {"data": {"b": "2"}})  # strategic merge
    assert k.read("ConfigMap", "cfg", "team-a")["data"] == {"a": "1", "b": "2"}
    k.patch("ConfigMap", "cfg", "team-a", [{"op": "replace", "path": "/data", "value": {}}])
    assert not k.read("ConfigMap", "cfg", "team-a").get("data")
    since = mark(kube)
    k.delete("ConfigMap", "cfg", "team-a")
    assert writes(kube, since) == [("DELETE", "/api/v1/namespaces/team-a/configmaps/cfg")]
    with pytest.raises(NotFound, match="reading ConfigMap team-a/cfg: not found"):
        k.read("ConfigMap", "cfg", "team-a")


def test_cluster_scoped_objects_and_the_context_namespace(k, kube):
    k.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    assert k.read("Namespace", "ml")["metadata"]["name"] == "ml"
    k.create(config_map("plain"))  # no namespace: the kubeconfig context's ("default")
    assert k.read("ConfigMap", "plain")["metadata"]["name"] == "plain"  # read: the same
    assert ("POST", "/api/v1/namespaces") in writes(kube, 0)
    assert ("POST", "/api/v1/namespaces/default/configmaps") in writes(kube, 0)


def test_jobs_are_deleted_with_their_pods(k, kube):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }
    k.create(job)
    since = mark(kube)
    k.delete("Job", "train", "ml")
    (method, path, query) = kube.requests()[since]
    assert (path, query.get("propagationPolicy")) == (
        "/apis/batch/v1/namespaces/ml/jobs/train",
        "Background",
    )
    assert k.list_objects("Job", "ml") == []


def test_list_in_one_namespace_or_all_sends_the_selectors(k, kube, kube_api):
    seed(kube_api, pod("a", "ml"), pod("b", "web"), node("gpu-1"))
    assert [p["metadata"]["name"] for p in k.list_objects("Pod", "ml")] == ["a"]
    assert sorted(p["metadata"]["name"] for p in k.list_objects("Pod")) == ["a", "b"]
    since = mark(kube)
    assert [n["metadata"]["name"] for n in k.list_objects("Node", selector="pool=a")] == ["gpu-1"]
    k.list_objects("DaemonSet", field_selector="metadata.name=x")
    assert [(p, q) for _, p, q in kube.requests()[since:]] == [
        ("/api/v1/nodes", {"labelSelector": "pool=a"}),
        ("/apis/apps/v1/daemonsets", {"fieldSelector": "metadata.name=x"}),
    ]


def test_dry_run_create_asks_the_server_to_only_check(k, kube):
    since = mark(kube)
    k.create(config_map("cfg", "ml"), dry_run=True)
    assert [q.get("dryRun") for _, _, q in kube.requests()[since:]] == ["All"]


def test_node_labels_are_set_and_removed(k, kube_api):
    seed(kube_api, node("gpu-1", labels={"old": "x"}))
    k.patch_node_labels("gpu-1", {"new": "y", "old": None})
    labels = k.read_node("gpu-1")["metadata"]["labels"]
    assert labels["new"] == "y" and "old" not in labels
    with pytest.raises(GpuctlError, match="no node 'gpu-9' in the cluster"):
        k.read_node("gpu-9")


def test_watch_reports_changes_and_ends_when_quiet(k, kube_api):
    seed(kube_api, node("gpu-1"), node("gpu-2"))
    events = list(k.watch("Node", timeout_seconds=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "gpu-1"),
        ("ADDED", "gpu-2"),
    ]


def test_pod_log_lines(k, kube):
    kube.call(lambda: kube.emulator["get /api/v1/namespaces/ml/pods/p/log"] << b"one\ntwo\npartial")
    assert list(k.pod_log_lines("p", "ml")) == ["one", "two", "partial"]


def test_kinds_it_does_not_know_are_refused_before_anything_is_sent(k, kube):
    with pytest.raises(
        GpuctlError, match="not handle Kubernetes objects of kind leaderworkerset.x-k8s.io/v1 Lws"
    ):
        k.create({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "Lws", "metadata": {}})
    with pytest.raises(GpuctlError, match="of kind batch/v2 Job"):
        k.create({"apiVersion": "batch/v2", "kind": "Job", "metadata": {"name": "j"}})
    with pytest.raises(GpuctlError, match="of kind example.com/v1 ClusterQueue"):
        k.read("ClusterQueue", "a", api_version="example.com/v1")
    with pytest.raises(GpuctlError, match="of kind PriorityClass"):
        k.list_objects("PriorityClass")
    assert kube.requests() == []


def test_http_errors_become_gpuctl_errors(k, kube):
    k.create(config_map("cfg", "ml"))
    with pytest.raises(Conflict, match="creating ConfigMap ml/cfg: already exists"):
        k.create(config_map("cfg", "ml"))
    with pytest.raises(NotFound, match="deleting Pod ml/nope: not found"):
        k.delete("Pod", "nope", "ml")
    kube.call(lambda: kube.emulator["get /api/v1/namespaces/ml/configmaps"] << 403)
    with pytest.raises(Forbidden, match="listing configmaps in namespace ml: not allowed") as e:
        k.list_objects("ConfigMap", "ml")
    assert "RBAC" in e.value.hint
    kube.call(lambda: kube.emulator["get /api/v1/nodes/gpu-1"] << 500)
    with pytest.raises(BackendError, match=r"reading Node gpu-1: the API server failed \(HTTP 500"):
        k.read_node("gpu-1")
    kube.call(lambda: kube.emulator["get /api/v1/namespaces"] << b"<html>Sign in</html>")
    with pytest.raises(BackendError, match="did not answer with JSON"):
        k.list_objects("Namespace")


# --- custom resources ---------------------------------------------------------------


def cluster_queue(name, **spec):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_custom_resources_round_trip_through_the_custom_objects_api(k, kube):
    kube.install_crds("ClusterQueue", "LocalQueue")
    since = mark(kube)
    k.create(cluster_queue("team-a", cohortName="ml"))
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "team-a", "namespace": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }
    k.create(lq)
    assert k.read("ClusterQueue", "team-a")["spec"] == {"cohortName": "ml"}
    assert k.read("LocalQueue", "team-a", "team-a")["spec"] == {"clusterQueue": "team-a"}
    assert [q["metadata"]["name"] for q in k.list_objects("LocalQueue")] == ["team-a"]
    assert k.list_objects("LocalQueue", "other") == []
    # a dict is a JSON merge patch (None removes a field), a list a JSON patch
    k.patch("ClusterQueue", "team-a", None, {"spec": {"cohortName": None}})
    assert k.read("ClusterQueue", "team-a")["spec"] == {}
    k.patch(
        "ClusterQueue", "team-a", None, [{"op": "add", "path": "/spec/cohortName", "value": "x"}]
    )
    assert k.read("ClusterQueue", "team-a")["spec"] == {"cohortName": "x"}
    k.delete("LocalQueue", "team-a", "team-a")
    assert [(m, p) for m, p in writes(kube, since)] == [
        ("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"),
        ("POST", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues"),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a"),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a"),
        ("DELETE", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/team-a"),
    ]
    merge, json_patch = [
        r
        for r in kube.call(lambda: list(kube.emulator._requests))
        if str(r.method).upper().endswith("PATCH")
    ]
    assert merge.headers["Content-Type"] == "application/merge-patch+json"
    assert json_patch.headers["Content-Type"] == "application/json-patch+json"
    with pytest.raises(NotFound, match="reading LocalQueue team-a/team-a: not found"):
        k.read("LocalQueue", "team-a", "team-a")


def test_another_version_of_the_group_when_asked(k, kube):
    kube.install_crds("ClusterQueue")
    k.create({**cluster_queue("old", cohort="ml"), "apiVersion": "kueue.x-k8s.io/v1beta1"})
    assert k.list_objects("ClusterQueue", api_version="kueue.x-k8s.io/v1beta1")[0]["spec"] == {
        "cohort": "ml"
    }
    assert ("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues") in [
        (str(m).rsplit(".", 1)[-1].upper(), p) for m, p, _ in kube.requests()
    ]


def test_an_object_the_crd_refuses_is_an_error_naming_it(k, kube):
    kube.install_crds("ClusterQueue")
    with pytest.raises(BackendError, match="creating ClusterQueue bad: rejected by the API server"):
        k.create(cluster_queue("bad", cohort="ml"))  # v1beta1's field name under v1beta2


def test_without_the_crd_the_server_has_no_such_resource(k, kube):
    with pytest.raises(NotFound, match="listing clusterqueues: not found"):
        k.list_objects("ClusterQueue")
    with pytest.raises(NotFound, match="creating ClusterQueue a: not found"):
        k.create(cluster_queue("a"))


def test_api_versions_come_from_discovery_once(k, kube):
    assert k.api_versions("kueue.x-k8s.io") == []  # read before the CRDs: cached per connection
    kube.install_crds("ClusterQueue", "JobSet")
    with Kube() as fresh:
        since = mark(kube)
        assert sorted(fresh.api_versions("kueue.x-k8s.io")) == ["v1beta1", "v1beta2"]
        assert fresh.api_versions("jobset.x-k8s.io") == ["v1alpha2"]
        assert fresh.api_versions("example.com") == []
        assert [p for _, p, _ in kube.requests()[since:]] == ["/apis/"]


def test_get_path_reads_an_aggregated_api(k, kube):
    path = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ml/localqueues/ml/pendingworkloads"
    kube.call(
        lambda: kube.emulator[f"get {path}"] << {"kind": "PendingWorkloadsSummary", "items": []}
    )
    assert k.get_path(path, {"limit": "10"}) == {"kind": "PendingWorkloadsSummary", "items": []}
    assert kube.requests()[-1][1:] == (path, {"limit": "10"})
    assert kube.requests()[-1] and "authorization" in {
        h.lower() for h in kube.call(lambda: kube.emulator._requests[-1].headers)
    }
    kube.call(lambda: kube.emulator["get /apis/visibility.kueue.x-k8s.io/v1beta2/x"] << 503)
    with pytest.raises(
        BackendError,
        match="reading /apis/visibility.kueue.x-k8s.io/v1beta2/x: the API server failed",
    ):
        k.get_path("/apis/visibility.kueue.x-k8s.io/v1beta2/x")


def test_watch_a_custom_resource(k, kube):
    kube.install_crds("JobSet")
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"replicatedJobs": []},
    }
    k.create(js)
    events = list(k.watch("JobSet", "ml", name="llm", timeout_seconds=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "llm")]


def two_contexts(path, url):
    """A kubeconfig whose current context 'emu' works in 'default', and 'other' in team-b."""
    import yaml

    cluster = {"name": "emu", "cluster": {"server": url}}
    ctx = [
        {"name": "emu", "context": {"cluster": "emu", "user": "u", "namespace": "default"}},
        {"name": "other", "context": {"cluster": "emu", "user": "u", "namespace": "team-b"}},
    ]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "emu",
                "clusters": [cluster],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": ctx,
            }
        )
    )
    return str(path)


def test_context_and_namespace_settings(kube, tmp_path, monkeypatch):
    from gpuctl.common.errors import SpecError, UsageError

    monkeypatch.setenv("KUBECONFIG", two_contexts(tmp_path / "kubeconfig", kube.url))
    cfg = tmp_path / "config.yaml"
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))

    def connected(context=None):
        with Kube(context) as k:
            return k.context, k.namespace

    cfg.write_text("")
    assert connected() == ("emu", "default")  # the kubeconfig's own choice
    cfg.write_text("context: other\n")
    assert connected() == ("other", "team-b")  # the file's context, with its namespace
    cfg.write_text("context: other\nnamespace: ml\n")
    assert connected() == ("other", "ml")  # the file's namespace over the context's
    monkeypatch.setenv("GPUCTL_CONTEXT", "emu")
    monkeypatch.setenv("GPUCTL_NAMESPACE", "team-env")
    assert connected() == ("emu", "team-env")  # the environment over the file
    assert connected("other") == ("other", "team-env")  # --context over both
    monkeypatch.setenv("GPUCTL_CONTEXT", "gone")
    with pytest.raises(
        UsageError, match=r"no context 'gone' in the kubeconfig .* \(from GPUCTL_CONTEXT\)"
    ):
        connected()
    monkeypatch.delenv("GPUCTL_CONTEXT")
    monkeypatch.delenv("GPUCTL_NAMESPACE")
    cfg.write_text("namespace: Not_A_Namespace\n")
    with pytest.raises(SpecError) as e:
        connected()
    assert (e.value.file, e.value.line, e.value.field) == (str(cfg), 1, "namespace")


def test_serves_names_a_group_and_version_from_discovery(kube):
    kube.install_crds("JobSet", "ScaledObject")
    with Kube() as k:
        assert k.serves("jobset.x-k8s.io/v1alpha2") and k.serves("keda.sh/v1alpha1")
        assert not k.serves("jobset.x-k8s.io/v1alpha1")  # the group, not that version
        assert not k.serves("kueue.x-k8s.io/v1beta2")  # no such group


def test_the_kueue_version_is_the_newest_one_served_that_gpuctl_speaks(kube):
    with Kube() as k:
        since = mark(kube)
        assert k.kueue_version() is None and k.kueue_workloads() == []
        assert [p for _, p, _ in kube.requests()[since:]] == ["/apis/"]  # no Kueue: no list
    kube.install_crds("Workload", served=("v1beta1",))  # Kueue before 0.15
    with Kube() as k:
        assert k.kueue_version() == "v1beta1"


def test_kueue_workloads_are_listed_at_the_version_served(kube, kube_api):
    from tests import kueue_workloads
    from tests.gpu_cluster import seed_custom

    kube.install_crds("Workload")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "big", "namespace": "ml", "labels": {QUEUE_LABEL: "q"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }
    other = {**job, "metadata": {**job["metadata"], "namespace": "web"}}
    for j in (job, other):
        seed_custom(kube_api, kueue_workloads.workload_for(j))
    with Kube() as k:
        assert k.kueue_version() == "v1beta2"
        since = mark(kube)
        everywhere = k.kueue_workloads()
        in_ml = k.kueue_workloads("ml")
        paths = [p for _, p, _ in kube.requests()[since:]]
    assert sorted(w["metadata"]["namespace"] for w in everywhere) == ["ml", "web"]
    assert [w["metadata"]["namespace"] for w in in_ml] == ["ml"]
    assert {w["apiVersion"] for w in everywhere + in_ml} == {"kueue.x-k8s.io/v1beta2"}
    assert paths == [
        "/apis/kueue.x-k8s.io/v1beta2/workloads",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads",
    ]
