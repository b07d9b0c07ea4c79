"""Every named config in NVIDIA's own mig-parted files (tests/mig/upstream/ and the GPU
Operator's ConfigMap in gpuctl/sim/crds/, kept as published) on the simulated node of each GPU model it targets: validate → dry-run → apply
→ assert → export, through the CLI. A config must either go all the way or be refused when
it is validated, with the reason; never pass the dry-run and then fail while applying.

Which models a config targets is read from the file itself: the models whose PCI ids its
device-filters name, or, for a config without filters, the models that have all of its
profiles (NVIDIA's unfiltered configs apply to every GPU). Where such a model cannot hold
the layout (all-1g.10gb with 7 instances on an A100-40GB, which has 4), the dry-run must
refuse it with that reason and change nothing. A config that no model can hold fails the
test (a model missing from the geometry table, as B300 and GB300 once were)."""

import json
import pathlib
from dataclasses import dataclass
from functools import cache

import pytest
import yaml

import gpuctl.sim
from gpuctl.common.errors import GpuctlError, SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.gpus.geometry import GpuModel, models
from gpuctl.mig.core import migparted
from gpuctl.mig.core.diff import GpuState
from gpuctl.sim.node import NON_MIG_MODELS, canonical_spec
from tests.clirun import run_gpuctl as run

UPSTREAM = pathlib.Path(__file__).parent / "upstream"
# the GPU Operator's ConfigMap ships with the sandbox, which serves it (gpuctl/sim/crds/)
OPERATOR = pathlib.Path(gpuctl.sim.__file__).parent / "crds" / "gpu-operator_0400_configmap.yaml"
PATHS = {p.name: p for p in [*UPSTREAM.glob("*.yaml"), OPERATOR]}
FILES = sorted(PATHS)


def config_text(name: str) -> str:
    """The mig-parted config in a file: the file itself, or the config.yaml of the
    ConfigMap in a Kubernetes manifest."""
    text = PATHS[name].read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    if len(docs) == 1 and "mig-configs" in docs[0]:
        return text
    maps = [d["data"]["config.yaml"] for d in docs if "config.yaml" in (d.get("data") or {})]
    assert len(maps) == 1, name
    return maps[0]


@cache
def parsed(name: str) -> migparted.MigConfigFile:
    return migparted.parse(load_yaml(config_text(name), name))


def has_profiles(model: GpuModel, entry: migparted.Entry) -> bool:
    try:
        for profile in entry.layout:
            model.profile(profile)
    except GpuctlError:
        return False
    return True


def targets(name: str, config: str) -> list[GpuModel]:
    entries = parsed(name).select(config)
    filters = {f.device for e in entries for f in e.device_filter}
    if filters:
        return [m for m in models() if {int(i, 16) for i in m.pci_device_ids} & filters]
    return [m for m in models() if all(has_profiles(m, e) for e in entries)]


def gpus_needed(name: str, config: str) -> int:
    """Enough GPUs for the indexes the config names (custom-config names GPUs 0-7)."""
    entries = parsed(name).select(config)
    indexes = [i for e in entries if isinstance(e.devices, tuple) for i in e.devices]
    return max(indexes, default=0) + 1


def node_models(name: str, config: str, model: GpuModel) -> tuple[GpuModel, ...]:
    """The node to run a config on: GPUs of the model it targets, and where its filters name
    a GPU without MIG that the simulator has (the DGX Station's display GPU), that GPU too:
    at the index the config gives it, or last."""
    node = [model] * gpus_needed(name, config)
    for entry in parsed(name).select(config):
        filters = {f.device for f in entry.device_filter}
        for other in NON_MIG_MODELS:
            if not filters & {int(i, 16) for i in other.pci_device_ids}:
                continue
            if isinstance(entry.devices, tuple):
                for i in entry.devices:
                    node[i] = other
            else:
                node.append(other)
    return tuple(node)


@dataclass(frozen=True)
class Case:
    file: str
    config: str
    node: tuple[GpuModel, ...]
    refusal: str | None  # the validation error expected, if the config cannot hold there

    @property
    def spec(self) -> str:
        return ",".join(f"1x{m.short_name}" for m in self.node)

    @property
    def model(self) -> GpuModel:
        return self.node[0]

    def __str__(self):
        return f"{self.file.removesuffix('.yaml')}:{self.config}@{canonical_spec(self.spec)}"


def _gpu(index: int, model: GpuModel) -> GpuState:
    pci = int(model.pci_device_ids[0], 16)
    if not model.profiles:  # a GPU without MIG, as NVML reports one
        return GpuState(index, model.nvml_name, f"GPU-{index}", None, None, pci_id=pci)
    return GpuState(index, model.nvml_name, f"GPU-{index}", model, (False, False), pci_id=pci)


def desired(file: str, config: str, node: tuple[GpuModel, ...]):
    """What the config asks of each GPU of the node, worked out without the node."""
    cfg = parsed(file)
    return migparted.resolve(cfg, cfg.select(config), [_gpu(i, m) for i, m in enumerate(node)])


def _without_file(e: SpecError) -> str:
    return str(e).split(": ", 1)[1]  # the node gets the config under another file name


@cache
def cases() -> list[Case]:
    """One case per (file, config, targeted model). Where a config asks the same of such a
    node as one already listed (config-default.yaml repeats the GPU Operator's, and many
    configs share one name and layout), it runs once."""
    out, seen = [], set()
    for name in FILES:
        for config in parsed(name).names:
            for model in targets(name, config):
                node = node_models(name, config, model)
                try:
                    asked = desired(name, config, node)
                    key = repr([(d.enabled, d.layout) if d else None for d in asked.values()])
                    refusal = None
                except SpecError as e:
                    key = refusal = _without_file(e)
                if (node, key) not in seen:
                    seen.add((node, key))
                    out.append(Case(name, config, node, refusal))
    return out


def test_the_upstream_files_are_all_read_and_every_config_holds_on_a_model():
    assert len(FILES) == 6
    for name in FILES:
        cfg = parsed(name)
        assert not cfg.problems, (name, cfg.problems)
        for config in cfg.names:
            holds = []
            for model in targets(name, config):
                try:
                    desired(name, config, node_models(name, config, model))
                    holds.append(model)
                except SpecError:
                    pass
            assert holds, f"{name}: no GPU model gpuctl knows can hold {config!r}"
    # The models NVIDIA's default config names, B300 and GB300 among them, are all targeted.
    named = {c.model.short_name for c in cases() if c.refusal is None}
    assert {"B300", "GB300", "GB200", "B200", "H20", "GH200-144GB", "RTX-PRO-6000"} <= named


@pytest.mark.integration  # applying resets GPUs through the simulated nvidia-smi (a process)
@pytest.mark.parametrize("case", cases(), ids=str)
def test_config_goes_all_the_way_or_is_refused_first(case, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCTL_SIMULATE", case.spec)
    path = tmp_path / "config.yaml"
    path.write_text(config_text(case.file))
    args = ("-f", path, "-c", case.config)
    code, out, err = run(capsys, "mig", "configure", *args, "--dry-run")
    if case.refusal:  # refused when validated, with the reason; nothing changed
        assert code == 2 and case.refusal in err, err
        code, shown, _ = run(capsys, "mig", "show", "-o", "json")
        off = {"current": False, "pending": False}
        assert all(g["mig"] in (None, off) for g in json.loads(shown))
        return
    assert code == 0, err
    assert "dry run: nothing was changed" in out or "nothing to change" in out
    code, out, err = run(capsys, "mig", "configure", *args, "--yes", "--reset")
    assert code == 0, err
    code, out, err = run(capsys, "mig", "assert", *args)
    assert code == 0, err
    code, shown, _ = run(capsys, "mig", "show", "-o", "json")
    wanted = desired(case.file, case.config, case.node)
    for g in json.loads(shown):
        want = wanted[g["index"]]
        assert want is not None
        if g["mig"] is None:  # a GPU without MIG: the config leaves it so
            assert not want.enabled
            continue
        assert g["mig"]["current"] == want.enabled
        assert g["layout"] == (_canonical(case.model, want.layout) if want.enabled else {})
    code, exported, err = run(capsys, "mig", "export")
    assert code == 0, err
    back = tmp_path / "exported.yaml"
    back.write_text(exported)
    code, _, err = run(capsys, "mig", "assert", "-f", back, "-c", "current")
    assert code == 0, err


def _canonical(model: GpuModel, layout: dict[str, int]) -> dict[str, int]:
    """The names the GPU reports for a layout (an early driver's alias → today's name)."""
    out: dict[str, int] = {}
    for name, n in layout.items():
        p = model.profile(name).name
        out[p] = out.get(p, 0) + n
    return out


def test_configs_for_other_models_are_refused_at_validation_with_the_reason():
    """Each config without device-filters, on every model it does not target: refused
    before anything is planned, naming the profile that model lacks, with a hint listing
    the model's own."""
    refused = 0
    for name in FILES:
        cfg = parsed(name)
        for config in cfg.names:
            entries = cfg.select(config)
            if any(e.device_filter for e in entries):
                continue
            hit = {m.short_name for m in targets(name, config)}
            for model in models():
                if model.short_name in hit:
                    continue
                node = [_gpu(i, m) for i, m in enumerate(node_models(name, config, model))]
                with pytest.raises(SpecError) as e:
                    migparted.resolve(cfg, entries, node)
                message = str(e.value)
                assert f"{model.short_name} has no MIG profile" in message, message
                assert e.value.hint and e.value.hint.startswith(model.short_name), message
                refused += 1
    assert refused > 500
