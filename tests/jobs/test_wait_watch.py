"""`submit --wait` follows the job by an informer (gpuctl.jobs.service.wait, through
Kube.informer): one list of it by name, then watches from the list's resourceVersion that
resume where they ended, and a list again only when the API server answers 410 Gone.
Against the API emulator over HTTP."""

import pytest

from gpuctl.adapters.kube import Kube
from gpuctl.common.errors import BackendError
from gpuctl.jobs import service
from gpuctl.k8s.labels import JOB_LABEL, MANAGED_BY


@pytest.fixture
def batch(kube_api):
    from kubernetes import client

    return client.BatchV1Api(kube_api)


def make_job(batch, name="w"):
    labels = {MANAGED_BY[0]: MANAGED_BY[1], JOB_LABEL: name}
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": template},
    }
    batch.create_namespaced_job("default", job)


def status(succeeded=0, condition=None):
    conditions = [{"type": condition, "status": "True"}] if condition else []
    return {"status": {"active": 1 - succeeded, "succeeded": succeeded, "conditions": conditions}}


def reads_and_watches(kube, name="w"):
    path = "/apis/batch/v1/namespaces/default/jobs"
    served = kube.requests()
    by_name = f"metadata.name={name}"
    ours = [q for _, p, q in served if p == path and q.get("fieldSelector") == by_name]
    return [q for q in ours if "watch" not in q], [q for q in ours if "watch" in q]


def test_wait_reads_again_when_its_version_is_gone(kube, batch):
    make_job(batch)
    rows = []

    def on_update(row):
        rows.append(row["status"])
        if len(rows) == 1:  # between the read and the first watch: changes it cannot be sent
            kube.call(setattr, kube.emulator, "history", 0)
            batch.patch_namespaced_job_status("w", "default", status())
            batch.patch_namespaced_job_status("w", "default", status(1, "Complete"))

    with Kube() as k:
        final = service.wait(k, "Job", "w", "default", 20, on_update)
    assert service.job_status.status_of(final) == "Succeeded"
    reads, watches = reads_and_watches(kube)
    assert len(reads) == 2 and len(watches) == 1  # the watch answered 410: read again
    assert rows[-1] == "Succeeded"


def test_wait_resumes_each_watch_without_reading_again(kube, batch):
    import threading
    import time

    make_job(batch)
    kube.call(setattr, kube.emulator, "watch_s", 1.0)  # the server ends each watch after 1 s

    def finish():  # once a watch has ended and the next one is asked for
        deadline = time.monotonic() + 20
        while len(reads_and_watches(kube)[1]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        batch.patch_namespaced_job_status("w", "default", status(1, "Complete"))

    t = threading.Thread(target=finish)
    t.start()
    with Kube() as k:
        final = service.wait(k, "Job", "w", "default", 20, lambda row: None)
    t.join()
    assert service.job_status.status_of(final) == "Succeeded"
    reads, watches = reads_and_watches(kube)
    assert len(reads) == 1 and len(watches) >= 2
    assert all(w["allowWatchBookmarks"] == "true" and w["resourceVersion"] for w in watches)
    assert all(w["fieldSelector"] == "metadata.name=w" for w in watches)
    assert all(0 < int(w["timeoutSeconds"]) <= 20 for w in watches)  # none outlasts the wait


def test_wait_says_a_job_deleted_while_it_waits(kube, batch):
    make_job(batch)

    def on_update(row):
        batch.delete_namespaced_job("w", "default")

    with Kube() as k, pytest.raises(BackendError, match="Job default/w was deleted while waiting"):
        service.wait(k, "Job", "w", "default", 20, on_update)
