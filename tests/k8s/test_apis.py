"""Which version of Kueue's API gpuctl speaks with a cluster."""

from gpuctl.k8s import apis


def test_the_newest_kueue_version_gpuctl_speaks_is_chosen():
    assert apis.kueue_version(["v1beta1", "v1beta2", "v1alpha1"]) == "v1beta2"
    assert apis.kueue_version(["v1beta1"]) == "v1beta1"
    assert apis.kueue_version(["v1alpha1"]) is None
    assert apis.kueue_version([]) is None
    assert apis.kueue_api_version("v1beta1") == "kueue.x-k8s.io/v1beta1"
    assert apis.kueue_api_version(None) == "kueue.x-k8s.io/v1beta2"  # without a cluster to ask
