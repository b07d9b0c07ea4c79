"""`quota set` stopped by a real SIGINT while a create hangs: exit 130, and the message says
what was undone."""

from tests.jobs.test_submit_faults import gpuctl_process, interrupt_when
from tests.standins.faults import delay, wait_until


def test_ctrl_c_while_the_quota_is_being_created_is_130_and_says_what_was_undone(
    kube_api, proxied_kube
):
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    rule = proxied_kube.on("POST", "/api/v1/namespaces/team-a/resourcequotas", delay(5))
    proc = gpuctl_process(
        "quota", "set", "team-a", "--gpus", "4", env_extra={"GPUCTL_REQUEST_TIMEOUT": "2"}
    )
    code, out, err = interrupt_when(proc, rule)
    assert code == 130, err
    assert "gpuctl: interrupted; " in err and "Namespace/team-a" in err, err
    assert wait_until(
        lambda: "team-a" not in [n.metadata.name for n in core.list_namespace().items], 10
    )
