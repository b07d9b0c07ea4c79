"""The one never rule: marks on the object and on every controller up its chain, labels and
annotations alike; an owner that could not be read covers nothing. The ownerReferences are in
the shape controllers write them (metav1.NewControllerRef: apiVersion, kind, name, uid,
controller, blockOwnerDeletion); the chains are those of the built-in controllers and
JobSet's (Pod → ReplicaSet → Deployment, Pod → Job → CronJob, Pod → Job → JobSet)."""

import pytest

from gpuctl.k8s.marks import marked, never
from tests.k8s.test_objects import obj, ref


def chain(*links):
    """Objects KIND NAME each owned by the next: returns the first and the owners by key."""
    made = []
    for i, (kind, name) in enumerate(links):
        up = [ref(*links[i + 1])] if i + 1 < len(links) else []
        made.append(obj(kind, name, owners=up))
    owners = {(o["kind"], "ml", o["metadata"]["name"]): o for o in made[1:]}
    return made, owners


CHAINS = [
    [("Pod", "web-7c5d-x2x9z"), ("ReplicaSet", "web-7c5d"), ("Deployment", "web")],
    [("Pod", "nightly-28900-abcde"), ("Job", "nightly-28900"), ("CronJob", "nightly")],
    [("Pod", "gang-workers-0-0-h5x2k"), ("Job", "gang-workers-0"), ("JobSet", "gang")],
]


@pytest.mark.parametrize("links", CHAINS)
@pytest.mark.parametrize("key", ["gpuctl.io/reclaim", "gpuctl.io/evict"])
@pytest.mark.parametrize("where", ["labels", "annotations"])
def test_a_mark_anywhere_up_the_chain_is_found(links, key, where):
    for at in range(len(links)):
        made, owners = chain(*links)
        made[at]["metadata"][where] = {key: "never"}
        why = never(made[0], owners)
        assert why is not None and f"{key}: never" in why, (at, why)
        if at:
            kind, name = links[at]
            assert f"its {kind} ml/{name} is marked" in why


@pytest.mark.parametrize("links", CHAINS)
def test_an_unmarked_chain_read_whole_is_covered(links):
    made, owners = chain(*links)
    made[1]["metadata"]["labels"] = {"gpuctl.io/reclaim": "always"}  # not the value never
    assert never(made[0], owners) is None


@pytest.mark.parametrize("links", CHAINS)
def test_an_owner_that_could_not_be_read_covers_nothing(links):
    made, owners = chain(*links)
    kind, name = links[-1]
    del owners[(kind, "ml", name)]  # not listed: RBAC, or a kind gpuctl does not read
    assert never(made[0], owners) == (
        f"its {kind} ml/{name} could not be read: whether it is marked never is not known"
    )


def test_each_place_is_read_on_its_own():
    pod = obj("Pod", "p", labels={"gpuctl.io/evict": "sometimes"},
              annotations={"gpuctl.io/evict": "never"})  # fmt: skip
    assert marked(pod) == "gpuctl.io/evict: never (annotation)"
    assert marked(obj("Pod", "q", labels={"gpuctl.io/reclaim": "never"})) == (
        "gpuctl.io/reclaim: never (label)"
    )
    assert marked(obj("Pod", "r")) is None and marked(None) is None
