"""Every YAML gpuctl reads goes through one reader, gpuctl.common.specfile.load_yaml (no
aliases, no object tags, no duplicate keys, bounded size and depth): a prices file, a
policy, a config read from the cluster. Two modules read otherwise: the simulator its own
shipped CRDs (gpuctl/sim/crd_schema.py: upstream files, 1.4 MB, read with the C loader),
and the kubeconfig reader (gpuctl/adapters/kubeconfig.py: a kubeconfig is read as
client-go reads it, aliases and all, with the C safe loader, since every cluster command
pays for it)."""

from __future__ import annotations

import pathlib
import re

from tests import ROOT

READS_YAML = re.compile(
    r"\b(?:yaml\.)?(?:safe_load(?:_all)?|full_load(?:_all)?|unsafe_load|load_all)\(|\byaml\.load\("
)
ALLOWED = {
    "gpuctl/common/specfile.py",
    "gpuctl/sim/crd_schema.py",
    "gpuctl/adapters/kubeconfig.py",
}


def test_no_module_reads_yaml_but_the_one_reader():
    found = []
    for path in sorted(pathlib.Path(ROOT, "gpuctl").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if READS_YAML.search(line.split("#")[0]):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "read YAML with gpuctl.common.specfile.load_yaml:\n" + "\n".join(found)
