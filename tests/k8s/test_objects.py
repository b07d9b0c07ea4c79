"""Reading any object's metadata and walking its owners. The ownerReferences are in the shape
controllers write them: metav1.NewControllerRef (k8s.io/apimachinery
pkg/apis/meta/v1/controller_ref.go) sets apiVersion, kind, name, uid, controller and
blockOwnerDeletion; the garbage collector's owners (a PVC's, an app's) carry no controller."""

from gpuctl.k8s import objects


def ref(kind, name, controller=True, api_version="apps/v1"):
    out = {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller:
        out |= {"controller": True, "blockOwnerDeletion": True}
    return out


def obj(kind, name, namespace="ml", owners=(), **meta):
    m = {"name": name, "uid": f"uid-{name}", **meta, "ownerReferences": list(owners)}
    if namespace:
        m["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": m}


def test_the_accessors_read_an_objects_metadata():
    pod = obj(
        "Pod",
        "web-7c5ddbdf54-x2x9z",
        labels={"app": "web", "pod-template-hash": "7c5ddbdf54"},
        annotations={"kubectl.kubernetes.io/restartedAt": "2026-11-30T12:00:00Z"},
    )
    assert objects.name_of(pod) == "web-7c5ddbdf54-x2x9z"
    assert objects.namespace_of(pod) == "ml"
    assert objects.uid_of(pod) == "uid-web-7c5ddbdf54-x2x9z"
    assert objects.labels_of(pod)["pod-template-hash"] == "7c5ddbdf54"
    assert objects.annotations_of(pod) == {
        "kubectl.kubernetes.io/restartedAt": "2026-11-30T12:00:00Z"
    }


def test_what_an_object_lacks_reads_as_empty():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}}
    for o in (node, {"kind": "Pod"}, {"metadata": None}, None):
        assert objects.namespace_of(o) == ""  # cluster-scoped, or no metadata at all
        assert objects.uid_of(o) is None
        assert objects.labels_of(o) == {} and objects.annotations_of(o) == {}
        assert objects.controller_of(o) is None
    assert objects.name_of(node) == "gpu-1" and objects.name_of(None) == ""


def test_the_controller_is_the_reference_marked_so():
    pvc_owner = ref("StatefulSet", "db", controller=False)
    pod = obj("Pod", "p", owners=[pvc_owner, ref("Job", "train", api_version="batch/v1")])
    assert objects.controller_of(pod)["name"] == "train"
    assert objects.controller_of(obj("Pod", "q", owners=[pvc_owner])) is None


def test_the_owner_chain_goes_up_from_the_nearest_controller():
    deployment = obj("Deployment", "web")
    rs = obj("ReplicaSet", "web-7c5ddbdf54", owners=[ref("Deployment", "web")])
    pod = obj("Pod", "web-7c5ddbdf54-x2x9z", owners=[ref("ReplicaSet", "web-7c5ddbdf54")])
    owners = {
        ("ReplicaSet", "ml", "web-7c5ddbdf54"): rs,
        ("Deployment", "ml", "web"): deployment,
        ("Deployment", "prod", "web"): obj("Deployment", "web", "prod"),  # not pod's namespace
    }
    chain = list(objects.owner_chain(pod, owners))
    assert [(r["kind"], up) for r, up in chain] == [("ReplicaSet", rs), ("Deployment", deployment)]
    # an owner not read (a kind gpuctl does not list) ends the chain with its reference
    del owners[("Deployment", "ml", "web")]
    assert [(r["kind"], up) for r, up in objects.owner_chain(pod, owners)] == [
        ("ReplicaSet", rs),
        ("Deployment", None),
    ]
    assert list(objects.owner_chain(deployment, owners)) == []  # nothing above it


def test_the_owner_chain_of_an_object_without_a_namespace_is_looked_up_in_default():
    job = obj("Job", "train", "default")
    pod = obj("Pod", "train-0", namespace="", owners=[ref("Job", "train", api_version="batch/v1")])
    assert [up for _, up in objects.owner_chain(pod, {("Job", "default", "train"): job})] == [job]


def test_an_owner_loop_ends_the_chain():
    a = obj("ReplicaSet", "a", owners=[ref("ReplicaSet", "b")])
    b = obj("ReplicaSet", "b", owners=[ref("ReplicaSet", "a")])
    owners = {("ReplicaSet", "ml", "a"): a, ("ReplicaSet", "ml", "b"): b}
    pod = obj("Pod", "p", owners=[ref("ReplicaSet", "a")])
    assert [up for _, up in objects.owner_chain(pod, owners)] == [a, b]
