"""Watches that follow the informer contract (gpuctl.k8s.informer through Kube.informer),
against the API emulator over HTTP: list, then watch from the list's resourceVersion with
bookmarks, resume from the newest resourceVersion seen, list again only on 410 Gone."""

import threading

import pytest

from gpuctl.adapters.kube import Kube
from gpuctl.k8s.informer import Expired


@pytest.fixture
def k(kube):
    with Kube() as k:
        yield k


@pytest.fixture
def core(kube_api):
    from kubernetes import client

    return client.CoreV1Api(kube_api)


def config_map(name, data=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {}}


def requests_of(kube, path="/api/v1/configmaps"):
    """(lists, watches) the emulator served on PATH, each as its query."""
    served = [query for _, p, query in kube.requests() if p == path]
    return [q for q in served if "watch" not in q], [q for q in served if "watch" in q]


def names(informer):
    return sorted(o["metadata"]["name"] for o in informer.objects())


def emulator(kube, **settings):
    """Set the emulator's watch cache: `history` (events kept), `bookmark_s`."""
    for setting, value in settings.items():
        kube.call(setattr, kube.emulator, setting, value)


def test_a_change_between_the_list_and_the_watch_is_not_missed(k, core):
    core.create_namespaced_config_map("default", config_map("kept"))
    core.create_namespaced_config_map("default", config_map("gone"))
    informer = k.informer("ConfigMap", timeout_seconds=1)
    informer.relist()
    listed = informer.version
    core.create_namespaced_config_map("default", config_map("new"))
    core.patch_namespaced_config_map("kept", "default", {"data": {"a": "1"}})
    core.delete_namespaced_config_map("gone", "default")
    assert not informer.follow()
    assert names(informer) == ["kept", "new"]
    assert informer.store["default/kept"]["data"] == {"a": "1"}
    assert int(informer.version) > int(listed)


def test_a_watch_that_ends_resumes_from_its_last_version_without_a_list(k, core, kube):
    seen = []
    informer = k.informer("ConfigMap", timeout_seconds=1, on_change=lambda t, o: seen.append(t))
    core.create_namespaced_config_map("default", config_map("a"))
    informer.relist()
    listed = informer.version
    informer.follow()  # ends after its second: nothing changed
    core.create_namespaced_config_map("default", config_map("b"))
    informer.follow()
    after_b = informer.version
    informer.follow()
    lists, watches = requests_of(kube)
    assert len(lists) == 1 and informer.lists == 1
    # each watch starts where the one before ended, with bookmarks asked for
    assert [w["resourceVersion"] for w in watches] == [listed, listed, after_b]
    assert all(w["allowWatchBookmarks"] == "true" for w in watches)
    assert names(informer) == ["a", "b"] and seen == ["ADDED"]  # a came with the list


def test_a_version_the_server_no_longer_keeps_lists_again_and_drops_the_deleted(k, core, kube):
    for name in ("a", "b"):
        core.create_namespaced_config_map("default", config_map(name))
    replaced = []
    informer = k.informer("ConfigMap", timeout_seconds=1, on_replace=replaced.append)
    informer.relist()
    emulator(kube, history=2)
    core.delete_namespaced_config_map("a", "default")
    for name in ("c", "d", "e"):
        core.create_namespaced_config_map("default", config_map(name))
    with pytest.raises(Expired, match="too old resource version"):
        list(k.watch("ConfigMap", timeout_seconds=1, resource_version=informer.version))
    assert informer.follow()  # 410: listed again
    assert names(informer) == ["b", "c", "d", "e"] and informer.lists == 2
    assert [sorted(o["metadata"]["name"] for o in r) for r in replaced][-1] == names(informer)
    lists, _ = requests_of(kube)
    assert len(lists) == 2


def test_bookmarks_move_the_version_on_while_the_kind_is_quiet(k, core, kube):
    core.create_namespaced_config_map("default", config_map("a"))
    informer = k.informer("ConfigMap", timeout_seconds=2)
    informer.relist()
    listed = informer.version
    emulator(kube, bookmark_s=0.3)
    events = []
    watch = k.watch("ConfigMap", timeout_seconds=2, resource_version=listed, bookmarks=True)
    core.create_namespace({"metadata": {"name": "elsewhere"}})  # another kind's change
    for event in watch:
        events.append(event)
        informer.apply(event)
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and {e["type"] for e in events} == {"BOOKMARK"}
    assert bookmarks[-1]["object"]["kind"] == "ConfigMap"
    assert int(informer.version) > int(listed)  # the namespace's version, no ConfigMap's
    assert names(informer) == ["a"]


def test_an_unset_version_watch_sends_the_objects_first(k, core):
    core.create_namespaced_config_map("default", config_map("a"))
    events = list(k.watch("ConfigMap", timeout_seconds=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a")]


def test_a_named_informer_keeps_only_that_object(k, core):
    for name in ("a", "b"):
        core.create_namespaced_config_map("default", config_map(name))
    informer = k.informer("ConfigMap", "default", name="b", timeout_seconds=1)
    informer.relist()
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    core.patch_namespaced_config_map("b", "default", {"data": {"x": "2"}})
    informer.follow()
    assert list(informer.store) == ["default/b"]
    assert informer.store["default/b"]["data"] == {"x": "2"}


def test_a_watch_answered_http_410_is_expired(k, kube):
    gone = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version: 3 (9)",
        "reason": "Expired",
        "code": 410,
    }
    kube.call(lambda: kube.emulator["get /api/v1/configmaps"] << 410 << gone)
    with pytest.raises(Expired, match="too old resource version: 3"):
        list(k.watch("ConfigMap", timeout_seconds=1, resource_version="3"))


def test_every_event_is_newer_than_the_last_so_a_watch_resumes_from_any(k, core):
    listed = k.list_with_version("ConfigMap")[1]
    held = config_map("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_config_map("default", held)
    core.delete_namespaced_config_map("held", "default")  # marked: MODIFIED
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    events = list(k.watch("ConfigMap", timeout_seconds=1, resource_version=listed))
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert versions == sorted(set(versions))
    rest = k.watch("ConfigMap", timeout_seconds=1, resource_version=str(versions[2]))
    assert [e["type"] for e in rest] == ["DELETED"]


def test_a_bookmark_never_runs_ahead_of_the_events_the_watch_has_yet_to_send(k, core, kube):
    """A BOOKMARK says "everything up to here was sent": a client that stops at one (the
    sandbox's catch-up, gpuctl.sim.controllers) and resumes from its version must not
    skip an event the watch was still to send, even while writes keep coming."""
    emulator(kube, bookmark_s=0.001)
    listed = k.list_with_version("ConfigMap")[1]
    events: list[dict] = []

    def write() -> None:
        for i in range(30):
            core.create_namespaced_config_map("default", config_map(f"c{i}"))

    writes = threading.Thread(target=write)
    watch = k.watch("ConfigMap", timeout_seconds=5, resource_version=listed, bookmarks=True)
    for event in watch:
        if not events:
            writes.start()
        events.append(event)
        if sum(e["type"] == "ADDED" for e in events) == 30:
            break
    writes.join()
    newest_bookmarked = 0
    for event in events:
        version = int(event["object"]["metadata"]["resourceVersion"])
        if event["type"] == "BOOKMARK":
            newest_bookmarked = max(newest_bookmarked, version)
        else:
            assert version > newest_bookmarked, "an event came after a bookmark past it"
