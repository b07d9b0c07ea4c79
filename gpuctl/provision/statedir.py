"""Where a cluster's Terraform working directory (and its local state) lives.

It belongs to the cluster, not to the directory gpuctl happens to run in: a run from
another directory must find the same state, or Terraform would plan a second VPC for a
cluster that exists. The directory is `$XDG_STATE_HOME/gpuctl/<cluster>` (default
`~/.local/state/gpuctl/<cluster>`); a spec with an S3 `state` keeps the state itself there
and this directory only holds the working files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpuctl.common.errors import GpuctlError
from gpuctl.provision.core.spec import ClusterSpec
from gpuctl.provision.core.tfvars import TFVARS_FILE
from gpuctl.runtime.files import make_private_dir

# Where earlier gpuctl versions kept it, relative to the directory they ran in.
LEGACY_ROOT = Path(".gpuctl") / "clusters"
STATE_FILE = "terraform.tfstate"


def state_home() -> Path:
    """$XDG_STATE_HOME/gpuctl, or ~/.local/state/gpuctl (a relative XDG_STATE_HOME is
    ignored, as the XDG base directory specification says)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "gpuctl"


def cluster_workdir(spec: ClusterSpec, chosen: Path | None = None) -> Path:
    """The cluster's working directory: `chosen` (--workdir) or its own under state_home().
    Refuses a directory that holds another cluster of the same name (another region), and
    one whose state sits in the old per-directory place instead."""
    if chosen is not None:
        workdir = chosen
    else:
        home = state_home()
        try:
            make_private_dir(home)  # Terraform state holds secrets: private from the start
        except OSError as e:
            raise GpuctlError(
                f"cannot create the state directory {home}: {e.strerror or e}",
                hint="set XDG_STATE_HOME to a writable directory, or pass --workdir DIR",
            ) from None
        workdir = home / spec.name
        legacy = LEGACY_ROOT / spec.name
        if (legacy / STATE_FILE).is_file() and not (workdir / STATE_FILE).exists():
            raise GpuctlError(
                f"cluster {spec.name!r} has Terraform state in {legacy.resolve()}, where "
                f"earlier gpuctl versions kept it; gpuctl now keeps it in {workdir}",
                hint=f"move it (mv {legacy.resolve()} {workdir}), or pass --workdir {legacy}",
            )
    _check_same_cluster(workdir, spec)
    return workdir


def describe(spec: ClusterSpec, workdir: Path) -> str:
    """Where the state is, in words, for `provision` and `destroy` to print."""
    if spec.state is not None:
        return f"s3://{spec.state.s3_bucket}/{spec.state.key} (working directory {workdir})"
    return str(workdir / STATE_FILE)


def _check_same_cluster(workdir: Path, spec: ClusterSpec) -> None:
    if not (workdir / STATE_FILE).exists() and not (workdir / ".terraform").exists():
        return  # Terraform never ran here (a dry run at most): nothing is tied to it
    try:
        written = json.loads((workdir / TFVARS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # nothing there yet (or not gpuctl's: prepare_workdir refuses that)
    if not isinstance(written, dict):
        return
    theirs = (written.get("cluster_name"), written.get("region"))
    if theirs != (spec.name, spec.region):
        raise GpuctlError(
            f"{workdir} holds cluster {theirs[0]!r} in {theirs[1]}, not {spec.name!r} in "
            f"{spec.region}",
            hint="a second cluster of the same name needs its own --workdir DIR",
        )
