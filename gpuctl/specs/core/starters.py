"""Starter specs: the shipped examples, with a first line that points editors at the spec's
JSON Schema (yaml-language-server's modeline, a path relative to the spec file)."""

from __future__ import annotations

from gpuctl.specs.core.schemas import file_name

# starter -> (the example it is made from, the schema of its kind)
STARTERS = {
    "job": ("job.yaml", "job"),
    "multinode": ("multinode-train.yaml", "job"),
    "mig-job": ("mig-job.yaml", "job"),
    "tpu-job": ("tpu-slice.yaml", "job"),
    "trainium-job": ("trainium-train.yaml", "job"),
    "nvl72-job": ("nvl72-train.yaml", "job"),
    "service": ("inference-service.yaml", "service"),
    "cluster": ("cluster.yaml", "cluster"),
}


def starter(name: str, example: str) -> str:
    """The text `gpuctl init NAME` writes, from the text of its EXAMPLE."""
    kind = STARTERS[name][1]
    schema = file_name(kind)
    header = (
        f"# yaml-language-server: $schema={schema}\n"
        f"# Editors check the fields against {schema} beside this file: "
        f"gpuctl schema {kind} > {schema}\n"
    )
    return header + example
