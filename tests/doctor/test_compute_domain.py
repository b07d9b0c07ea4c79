"""`gpuctl doctor --spec` for a spec that asks for a ComputeDomain, on GB200 trays in two
NVLink cliques (tests/data/computedomain), through the API emulator: the ComputeDomain API
and the driver's channel class must be there, and one clique must hold all the workers."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests import ROOT
from tests.gpu_cluster import seed
from tests.jobs.test_compute_domain import GB200, spec
from tests.jobs.test_submit import write

pytestmark = pytest.mark.integration

with open(os.path.join(ROOT, "tests", "data", "computedomain", "classes.yaml")) as f:
    CLASSES = [c for c in yaml.safe_load_all(f) if c]


def check(cli, path) -> tuple:
    r = cli("doctor", "--spec", path, "-o", "json")
    found = [c for c in json.loads(r.out)["checks"] if c["name"] == "compute-domain"]
    return r, found


def test_one_clique_holds_the_workers(cli, kube, kube_api, tmp_path):
    kube.install_crds("ComputeDomain")
    seed(kube_api, *GB200, *CLASSES)
    r, (ok,) = check(cli, write(tmp_path, spec(2)))
    assert ok["status"] == "pass", r
    assert "2 workers × 4 GPUs fit one clique: the largest clique, 5f1c0e7a-3b9d-4c21-9a64-2d8e7f0b1c35.32766, has 8 GPUs (2 clique(s))" in ok["detail"]  # fmt: skip
    r, (too_big,) = check(cli, write(tmp_path, spec(3)))
    assert r.code == 1 and too_big["status"] == "fail", r
    assert "3 workers × 4 GPUs must be within one NVLink clique; the largest clique" in too_big["detail"]  # fmt: skip


def test_the_driver_and_its_class_are_named_when_missing(cli, kube, kube_api, tmp_path):
    seed(kube_api, *GB200)
    r, (missing,) = check(cli, write(tmp_path, spec(2)))
    assert r.code == 1 and "serves no resource.nvidia.com/v1beta1" in missing["detail"], r
    assert "resources.computeDomains.enabled=true" in missing["fix"]
    kube.install_crds("ComputeDomain")
    r, (no_class,) = check(cli, write(tmp_path, spec(2)))
    assert "no DeviceClass compute-domain-default-channel.nvidia.com" in no_class["detail"], r


def test_a_spec_without_one_is_not_checked(cli, kube, kube_api, tmp_path):
    seed(kube_api, *GB200)
    r, found = check(cli, write(tmp_path, "name: train\nimage: x\ngpus: 4\nnodes: 2\n"))
    assert found == [], r
