"""`mig rebalance --drain` keeps a gang's topology domain: it does not evict a pod whose gang
keeps within one domain (required pod affinity on a topology key to its own pods, as
`topology:` and JobSet's exclusive placement render it), since its plan counts the room
evicted pods come back to cluster-wide, not in that domain."""

from __future__ import annotations

from gpuctl.mig.core.drain import DrainPolicy

BLOCK = "topology.k8s.aws/network-node-layer-3"


def _pod(affinity_to=None):
    labels = {"gang": "g"}
    meta = {"name": "p", "namespace": "ml", "labels": labels, "ownerReferences": [{"kind": "Job", "name": "o", "controller": True}]}  # fmt: skip
    spec: dict = {}
    if affinity_to is not None:
        term = {"labelSelector": {"matchLabels": affinity_to}, "topologyKey": BLOCK}
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}  # fmt: skip
    return {"metadata": meta, "spec": spec}


def test_a_pod_of_a_gang_kept_within_a_block_is_not_drained():
    policy = DrainPolicy(frozenset({"ml"}))
    owners = {("Job", "ml", "o"): {"metadata": {"name": "o", "namespace": "ml"}}}
    assert policy.why_not(_pod(), owners) is None
    why = policy.why_not(_pod({"gang": "g"}), owners)
    assert why == (
        f"its gang keeps within one {BLOCK} domain, which the plan does not count room in"
    )
    # affinity to other pods (not its own gang's) keeps nothing of its own
    assert policy.why_not(_pod({"app": "cache"}), owners) is None
