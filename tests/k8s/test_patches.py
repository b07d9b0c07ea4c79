"""JSON patches that hold only while the object is as expected: the operations RFC 6902
defines (test, add, replace, remove) on paths RFC 6901 escapes, applied here by `jsonpatch`
(the library the API emulator applies them with) as an API server applies them: whole or
not at all."""

import jsonpatch
import pytest

from gpuctl.k8s import patches

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gpu-1", "uid": "u1", "resourceVersion": "7",
                 "labels": {"nvidia.com/mig.config": "all-disabled"}},
    "spec": {},
}  # fmt: skip
CONFIG = ("metadata", "labels", "nvidia.com/mig.config")
CORDON = ("spec", "unschedulable")
RECORD = ("metadata", "annotations", "gpuctl.io/mig-rebalance")


def test_a_pointer_escapes_tilde_and_slash():
    assert patches.pointer(CONFIG) == "/metadata/labels/nvidia.com~1mig.config"
    assert patches.pointer(("metadata", "annotations", "a~b")) == "/metadata/annotations/a~0b"


def test_unset_means_absent_null_or_false():
    assert patches.holds(NODE, CORDON, None)
    assert patches.holds({"spec": {"unschedulable": False}}, CORDON, None)
    assert not patches.holds({"spec": {"unschedulable": True}}, CORDON, None)
    assert patches.holds(NODE, CONFIG, "all-disabled") and not patches.holds(NODE, CONFIG, "x")
    assert patches.what_differs(NODE, {CORDON: None, CONFIG: "x"}) == CONFIG


def test_the_change_applies_to_the_object_as_read():
    ops = patches.change(NODE, {CONFIG: "all-disabled", CORDON: None},
                         {CONFIG: "all-1g.10gb", CORDON: True, RECORD: "{}"})  # fmt: skip
    after = jsonpatch.apply_patch(NODE, ops)
    assert after["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert after["spec"]["unschedulable"] is True
    assert after["metadata"]["annotations"] == {"gpuctl.io/mig-rebalance": "{}"}  # made first
    back = patches.change(after, {CONFIG: "all-1g.10gb", CORDON: True}, {CONFIG: "all-disabled", CORDON: None, RECORD: None})  # fmt: skip
    restored = jsonpatch.apply_patch(after, back)
    assert restored["spec"] == {} and restored["metadata"]["labels"] == NODE["metadata"]["labels"]


@pytest.mark.parametrize(
    "other",
    [
        {"metadata": {"uid": "u2"}},  # replaced under the same name
        {"metadata": {"labels": {"nvidia.com/mig.config": "theirs"}}},  # another's config
        {"metadata": {"resourceVersion": "8"}},  # changed: an unset field cannot be tested
    ],
)
def test_another_clients_change_fails_the_patch(other):
    ops = patches.change(NODE, {CONFIG: "all-disabled", CORDON: None}, {CORDON: True})
    theirs = jsonpatch.apply_patch(NODE, [])  # a copy
    for key, value in other["metadata"].items():
        theirs["metadata"][key] = value
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(theirs, ops)
