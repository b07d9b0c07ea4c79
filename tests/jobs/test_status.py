"""Job status from the conditions of a Job as the API returns it."""

import pytest

from gpuctl.jobs.core import status as job_status


@pytest.mark.parametrize(
    "cond, status",
    [
        ("Complete", "Succeeded"),
        ("SuccessCriteriaMet", "Succeeded"),
        ("Failed", "Failed"),
        ("FailureTarget", "Failed"),
    ],
)
def test_a_job_is_finished_by_its_conditions(cond, status):
    job = {
        "kind": "Job",
        "status": {
            "active": 1,
            "conditions": [
                {"type": "Suspended", "status": "False"},
                {"type": cond, "status": "True"},
            ],
        },
    }
    assert job_status.status_of(job) == status
    job["status"]["conditions"][1]["status"] = "False"
    assert job_status.status_of(job) == "Running"
