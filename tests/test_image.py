"""The image of gpuctl's in-cluster parts: `make image` builds IMAGE:VERSION from
Containerfile (the wheel on a slim Python base), and what gpuctl renders to run in the
cluster (the scheduler extender, the reclaimer) names that image by default."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from gpuctl import __version__
from gpuctl.k8s import images
from tests import ROOT

pytestmark = pytest.mark.integration  # runs make and gpuctl


def _make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-s", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_make_image_builds_the_name_and_version_the_rendered_objects_use():
    plan = _make("-n", "image", "ENGINE=podman")
    assert plan.returncode == 0, plan.stderr
    build = re.search(r"^podman build -f Containerfile -t (\S+) build/image$", plan.stdout, re.M)
    assert build, plan.stdout
    assert build.group(1) == images.DEFAULT == f"localhost/gpuctl:{__version__}"
    assert "--no-deps --wheel-dir build/image ." in plan.stdout  # the checkout's wheel


def test_make_image_without_an_engine_says_what_to_install():
    r = _make("image", "ENGINE=")
    assert r.returncode != 0
    assert "install docker, podman or buildah" in r.stderr
    assert not os.path.exists(os.path.join(ROOT, "build", "image", "Containerfile"))


def test_the_containerfile_installs_the_wheel_on_slim_python_as_a_non_root_user():
    with open(os.path.join(ROOT, "Containerfile"), encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    text = "\n".join(lines)
    assert re.search(r"^FROM docker\.io/library/python:\$\{PYTHON\}-slim$", text, re.M)
    assert "COPY gpuctl-*.whl /tmp/" in text and "pip install" in text
    user = re.search(r"^USER (\d+):(\d+)$", text, re.M)  # numeric: runAsNonRoot checks it
    assert user and int(user.group(1)) != 0
    assert not re.search(r"^(ENTRYPOINT|CMD)\b", text, re.M)  # the manifests give the command


def _rendered(cli, *args: str) -> list[dict]:
    r = cli(*args)
    assert r.code == 0, r
    return [d for d in yaml.safe_load_all(r.out) if d]


def _images(docs: list[dict]) -> set[str]:
    found = set()
    for d in docs:
        spec = d.get("spec", {})
        pod = spec.get("jobTemplate", {}).get("spec", spec).get("template", {}).get("spec", {})
        found |= {c["image"] for c in pod.get("containers", [])}
    return found


def test_the_reclaimer_and_the_extender_run_the_default_image(cli):
    reclaim = _rendered(cli, "reclaim", "render", "--deploy", "--prometheus", "http://p:9090")
    assert _images(reclaim) == {images.DEFAULT}
    sched = _rendered(cli, "sched", "render", "--extender", "--deploy", "--kube-version", "v1.31.0")
    assert images.DEFAULT in _images(sched)
    assert "registry.k8s.io/kube-scheduler:v1.31.0" in _images(sched)
    every = _rendered(
        cli, "reclaim", "render", "--deploy", "--prometheus", "http://p:9090", "--every", "10m"
    )
    assert _images(every) == {images.DEFAULT}
