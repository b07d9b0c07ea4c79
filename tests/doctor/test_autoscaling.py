"""doctor's autoscaling check: only where a gpuctl service autoscales; KEDA's operator for
a ScaledObject, an external metrics API (not KEDA's) for an HPA."""

import json

import pytest

from gpuctl.doctor.core.autoscale_checks import check_autoscaling
from gpuctl.doctor.core.checks import FAIL, PASS, WARN

SO = {"metadata": {"name": "chat", "namespace": "ml"}}
KEDA = {
    "metadata": {"name": "keda-operator", "namespace": "keda"},
    "spec": {
        "template": {
            "spec": {
                "containers": [{"name": "keda-operator", "image": "ghcr.io/kedacore/keda:2.20.2"}]
            }
        }
    },
}


def test_no_autoscaled_service_no_check():
    assert check_autoscaling([], [], True, True, [KEDA]) is None


@pytest.mark.parametrize(
    "scaled, hpas, keda, external, deployments, status",
    [
        ([SO], [], True, True, [KEDA], PASS),
        ([SO], [], True, True, [], WARN),  # the CRDs, but no operator
        ([], [SO], False, True, [], PASS),  # prometheus-adapter serves external metrics
        ([], [SO], False, False, [], FAIL),  # nothing serves the HPA's metric
        ([], [SO], True, True, [KEDA], WARN),  # KEDA's metrics server owns external metrics
    ],
)
def test_what_each_autoscaler_needs(scaled, hpas, keda, external, deployments, status):
    check = check_autoscaling(scaled, hpas, keda, external, deployments)
    assert check is not None and check.status == status, check
    assert check.status == PASS or check.fix


@pytest.mark.integration
def test_doctor_warns_of_a_scaled_object_that_no_operator_serves(cli, kube, tmp_path):
    kube.install_crds("ScaledObject")
    spec = tmp_path / "svc.yaml"
    spec.write_text(
        "apiVersion: gpuctl/v1\nkind: Service\nname: chat\nimage: x\ngpus: 0\nport: 80\n"
        "autoscale: {max: 3, rps: 10}\n"
    )
    assert cli("submit", str(spec)).code == 0
    r = cli("doctor", "-o", "json")
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert checks["autoscaling"]["status"] == WARN
    assert "default/chat" in checks["autoscaling"]["detail"]
