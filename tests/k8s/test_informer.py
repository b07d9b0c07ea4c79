"""gpuctl.k8s.informer as a state machine: a list and watches given as plain functions
(the API emulator's tests: tests/adapters/test_informer.py)."""

import pytest

from gpuctl.common.errors import BackendError
from gpuctl.k8s.informer import Expired, Informer, key_of


def obj(name, version, namespace="ml", **extra):
    meta = {"name": name, "resourceVersion": version}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, **extra}


class Server:
    """Lists and watches scripted in order; what each watch was asked from."""

    def __init__(self, lists, watches):
        self.lists, self.watches, self.asked = list(lists), list(watches), []

    def list(self):
        return self.lists.pop(0)

    def watch(self, version):
        self.asked.append(version)
        found = self.watches.pop(0)
        if isinstance(found, Exception):
            raise found
        return iter(found)


def test_events_and_bookmarks_move_the_store_and_the_version_on():
    server = Server(
        [([obj("a", "5"), obj("b", "6")], "7")],
        [
            [
                {"type": "MODIFIED", "object": obj("a", "8", data=1)},
                {"type": "DELETED", "object": obj("b", "9")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
            ],
            [{"type": "ADDED", "object": obj("c", "13")}],
        ],
    )
    changes = []
    informer = Informer(server.list, server.watch, lambda t, o: changes.append((t, key_of(o))))
    assert not informer.follow()
    assert informer.version == "12" and sorted(informer.store) == ["ml/a"]
    assert informer.store["ml/a"]["data"] == 1
    assert not informer.follow()
    assert server.asked == ["7", "12"] and informer.lists == 1
    assert changes == [("MODIFIED", "ml/a"), ("DELETED", "ml/b"), ("ADDED", "ml/c")]


def test_410_lists_again_and_replaces_the_store():
    server = Server(
        [([obj("a", "5"), obj("b", "6")], "7"), ([obj("b", "6"), obj("c", "30")], "31")],
        [Expired("too old resource version: 7 (20)"), []],
    )
    replaced = []
    informer = Informer(server.list, server.watch, on_replace=replaced.append)
    assert informer.follow()
    assert sorted(informer.store) == ["ml/b", "ml/c"] and informer.version == "31"
    assert informer.lists == 2 and len(replaced) == 2
    informer.follow()
    assert server.asked == ["7", "31"]


def test_another_failure_is_the_callers_and_the_next_watch_resumes_without_a_list():
    server = Server([([obj("a", "5")], "7")], [BackendError("connection broke"), []])
    informer = Informer(server.list, server.watch)
    with pytest.raises(BackendError, match="connection broke"):
        informer.follow()
    informer.follow()
    assert server.asked == ["7", "7"] and informer.lists == 1


def test_a_cluster_scoped_object_is_keyed_by_its_name():
    assert key_of(obj("gpu-1", "1", namespace=None)) == "gpu-1"
    assert key_of(obj("p", "1")) == "ml/p"


def test_a_transform_shapes_what_the_store_and_the_callbacks_get():
    server = Server(
        [([obj("a", "5", data=1, spare="x" * 100)], "7")],
        [
            [
                {"type": "ADDED", "object": obj("b", "8", data=2, spare="y")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
                {"type": "DELETED", "object": obj("a", "13", data=1, spare="x")},
            ]
        ],
    )
    seen, replaced = [], []

    def transform(o):
        return {"metadata": o["metadata"], "data": o["data"]}

    informer = Informer(
        server.list,
        server.watch,
        lambda t, o: seen.append((t, o)),
        lambda objects: replaced.extend(objects),
        transform=transform,
    )
    informer.relist()
    assert replaced == [{"metadata": {"name": "a", "namespace": "ml", "resourceVersion": "5"},
                         "data": 1}]  # fmt: skip
    informer.follow()
    assert informer.version == "13" and list(informer.store) == ["ml/b"]
    assert informer.store["ml/b"] == {"metadata": obj("b", "8")["metadata"], "data": 2}
    assert [(t, sorted(o)) for t, o in seen] == [
        ("ADDED", ["data", "metadata"]),
        ("DELETED", ["data", "metadata"]),
    ]
