"""GPU model names as people type them, as GPUs report them and as GPU Feature Discovery
labels nodes with them (gpuctl.gpus.names), against the models of the geometry table."""

import pytest

from gpuctl.common.errors import EXIT_USAGE, UsageError
from gpuctl.gpus import names
from gpuctl.gpus.geometry import find_model, known_model, models
from gpuctl.gpus.names import gpu_type_warning, reported, split_product

GFD = "nvidia.com/gpu.product"


@pytest.mark.parametrize(
    "typed,model",
    [
        # the names the issue quotes, and their family
        ("H100", "H100-80GB"),
        ("h100", "H100-80GB"),
        ("H100 NVL", "H100-NVL"),
        ("h100_nvl", "H100-NVL"),
        ("a100-80gb", "A100-80GB"),
        ("A100 80 GB", "A100-80GB"),
        ("A100_40G", "A100-40GB"),
        ("H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        # GPU Feature Discovery's product label, MIG and sharing suffixes included
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me-SHARED", "H100-80GB"),
        ("nvidia-h100-nvl-shared", "H100-NVL"),
        ("NVIDIA-A100-80GB-PCIe", "A100-80GB"),
        ("NVIDIA-H100-PCIe-MIG-2g.20gb", "H100-80GB"),
        # the MIG guide's product names, and shortened ones that name one model
        ("H100-SXM5 80GB", "H100-80GB"),
        ("H100 SXM", "H100-80GB"),
        ("H100 PCIe", "H100-80GB"),  # the 94 GB PCIe board is the H100 NVL's kind
        ("H100-PCIE 94GB", "H100-NVL"),
        ("H100 94GB", "H100-NVL"),
        ("A100 SXM4 80GB", "A100-80GB"),
        ("H200", "H200"),
        ("H200 141GB", "H200"),
        ("h200-nvl", "H200-NVL"),
        ("GH200 144G HBM3e", "GH200-144GB"),
        ("GH200 480GB", "GH200-480GB"),
        ("H20", "H20"),
        ("B200", "B200"),
        ("GB200", "GB200"),
        ("NVIDIA GB200", "GB200"),
        ("B300", "B300"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("gb300", "GB300"),
        ("A30", "A30"),
        ("rtx pro 6000", "RTX-PRO-6000"),
        ("  H100  ", "H100-80GB"),
    ],
)
def test_typed_names_resolve_to_one_model(typed, model):
    assert find_model(typed).short_name == model


@pytest.mark.parametrize(
    "typed,choices",
    [
        ("A100", ["A100-40GB", "A100-80GB"]),
        ("a100 sxm4", ["A100-40GB", "A100-80GB"]),
        ("A100 PCIe", ["A100-40GB", "A100-80GB"]),
        ("NVIDIA-A100-SHARED", ["A100-40GB", "A100-80GB"]),
        ("GH200", ["GH200-480GB", "GH200-144GB"]),
    ],
)
def test_ambiguous_names_are_refused_with_the_candidates(typed, choices):
    with pytest.raises(UsageError, match="ambiguous") as e:
        find_model(typed)
    assert e.value.exit_code == EXIT_USAGE
    assert e.value.message.split("could be ")[1].split(" or ") == choices


@pytest.mark.parametrize(
    "typed,words",
    [
        ("", "no GPU model given"),
        ("   ", "no GPU model given"),
        ("nvidia", "unknown GPU model"),
        ("80GB", "unknown GPU model"),  # a size is no model
        ("HBM3", "unknown GPU model"),
        ("NVL", "unknown GPU model"),
        ("H100 A100", "unknown GPU model"),
        ("H100 96GB", "unknown GPU model"),  # no H100 has 96 GB but the GH200's, named so
        ("RTX 6000", "unknown GPU model"),  # the Quadro, or RTX 6000 Ada: neither has MIG
        ("V100", "unknown GPU model"),
        ("h10080gb", "unknown GPU model"),  # words run together are not separated
        ("H1-00-80GB", "unknown GPU model"),
        ("H100;rm -rf /", "unknown GPU model"),
        ("../H100", "unknown GPU model"),
        ("H100\nNVL", "unknown GPU model"),
        ("Ｈ１００", "unknown GPU model"),  # full-width letters look alike, are not
        ("H100\u200b", "unknown GPU model"),
        ("H" + "1" * 5000, "too long"),
    ],
)
def test_names_that_mean_no_model_are_refused(typed, words):
    with pytest.raises(UsageError, match=words) as e:
        find_model(typed)
    assert e.value.exit_code == EXIT_USAGE
    assert len(e.value.message) < 200


def test_the_refusal_says_what_there_is():
    with pytest.raises(UsageError) as e:
        find_model("H100 SXM5 96GB")
    assert e.value.hint == "models like it: H100-80GB, H100-NVL"
    with pytest.raises(UsageError) as e:
        find_model("T4")
    assert "T4 has no MIG" in e.value.hint and "H100-80GB" in e.value.hint


@pytest.mark.parametrize("model", models(), ids=lambda m: m.short_name)
def test_every_model_by_each_of_its_names(model):
    spellings = [
        model.short_name,
        model.short_name.lower().replace("-", "_"),
        model.short_name.upper().replace("-", " "),
        *names.reported_names(model),
        *(n.replace(" ", "-") for n in names.reported_names(model)),
        *(n.lower() for n in names.PRODUCT_NAMES.get(model.short_name, ())),
    ]
    for text in spellings:
        assert find_model(text) is model, text
    for text in (model.short_name, *names.reported_names(model)):
        assert known_model(text) is model, text
    label = names.product_label(model)
    for p in model.profiles:
        value = f"{label}-MIG-{p.name.replace('+', '.')}-SHARED"
        assert split_product(value) == (label, p.name, True)
        assert find_model(value) is model


def test_no_two_models_share_a_name():
    seen = {}
    for m in models():
        for n in (
            m.short_name,
            *names.reported_names(m),
            *names.PRODUCT_NAMES.get(m.short_name, ()),
        ):
            assert seen.setdefault(names.tokens(n), m) is m, n


@pytest.mark.parametrize(
    "name,model",
    [
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA H100 PCIe", "H100-80GB"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA GH200 480GB", "GH200-480GB"),
        # a GPU's own name is whole: a name gpuctl has no geometry for is not taken for
        # a model of its family
        ("NVIDIA H100", None),
        ("NVIDIA H800", None),
        ("NVIDIA A100", None),
        ("Tesla T4", None),
        ("NVIDIA GH200", None),
        ("", None),
        ("NVIDIA", None),
    ],
)
def test_reported_names_are_whole_names(name, model):
    found = reported(name, models())
    assert (found.short_name if found else None) == model


@pytest.mark.parametrize(
    "label,parts",
    [
        ("NVIDIA-H100-80GB-HBM3", ("NVIDIA-H100-80GB-HBM3", None, False)),
        ("NVIDIA-A10G-SHARED", ("NVIDIA-A10G", None, True)),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", ("NVIDIA-A100-SXM4-40GB", "1g.5gb", False)),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me", ("NVIDIA-H100-80GB-HBM3", "1g.10gb+me", False)),
        (
            "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition-MIG-1g.24gb.me.all-SHARED",
            ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "1g.24gb+me.all", True),
        ),
        ("NVIDIA-A100-SXM4-40GB-MIG-INVALID", ("NVIDIA-A100-SXM4-40GB", "invalid", False)),
        # GFD writes these words in capitals: other spellings are part of the name
        ("NVIDIA-A10G-shared", ("NVIDIA-A10G-shared", None, False)),
        ("", ("", None, False)),
    ],
)
def test_gfd_product_labels_split_as_gfd_writes_them(label, parts):
    assert split_product(label) == parts


@pytest.mark.parametrize(
    "value,key,warning",
    [
        # gpuctl's own spelling (its examples, `provision`) and GFD's: no warning
        ("h100", "gpu-type", None),
        ("a100", "gpu-type", None),
        ("a100-80gb", "gpu-type", None),
        ("l40s", "gpu-type", None),
        ("t4", "gpu-type", None),
        ("v100", "gpu-type", None),
        ("rtx-pro-6000", "gpu-type", None),
        ("NVIDIA-H100-80GB-HBM3", "gpu-type", None),
        ("NVIDIA-H100-80GB-HBM3", GFD, None),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", GFD, None),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me-SHARED", GFD, None),
        ("Tesla-T4-SHARED", GFD, None),
        ("NVIDIA-L40S", GFD, None),
        # another spelling of a GPU gpuctl knows, under a key whose values are a site's
        ("nvidia-tesla-t4", "cloud.google.com/gke-accelerator", None),
        ("nvidia-h100-80gb", "cloud.google.com/gke-accelerator", None),
        ("a100-pcie", "gpu-type", None),
        # only the case differs: nodes never match
        ("H100", "gpu-type", "differs only in case from 'h100'"),
        ("A100-80GB", "gpu-type", "differs only in case from 'a100-80gb'"),
        ("nvidia-h100-80gb-hbm3", "gpu-type", "differs only in case from 'NVIDIA-H100-80GB-HBM3'"),
        ("nvidia-h100-80gb-hbm3", GFD, "differs only in case from 'NVIDIA-H100-80GB-HBM3'"),
        (
            "nvidia-a100-sxm4-40gb-mig-1g.5gb-shared",
            GFD,
            "differs only in case from 'NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED'",
        ),
        ("TESLA-T4", GFD, "differs only in case from 'Tesla-T4'"),
        # GFD's key holds GFD's values only
        ("h100", GFD, "writes NVIDIA-H100-80GB-HBM3 or NVIDIA-H100-PCIe or NVIDIA-H100-NVL"),
        ("a100-pcie", GFD, "writes NVIDIA-A100-PCIE-40GB or NVIDIA-A100-80GB-PCIe"),
        ("NVIDIA-RTX-A6000", GFD, "not a nvidia.com/gpu.product value gpuctl knows"),
        # a MIG profile the GPU does not have is in no label
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.5gb", GFD, "H100-80GB has no MIG profile '1g.5gb'"),
        # nothing gpuctl knows
        ("rtx6000", "gpu-type", "matches no GPU name gpuctl knows"),
        ("fast", "gpu-type", "the job only runs on nodes labelled gpu-type=fast exactly"),
    ],
)
def test_gpu_type_warnings(value, key, warning):
    got = gpu_type_warning(value, key, models())
    if warning is None:
        assert got is None
    else:
        assert got is not None and warning in got


def test_a_node_label_gpuctl_writes_draws_no_warning():
    # `provision` labels nodes with the cluster spec's gpu_type; the examples use these
    for m in [*models(), *names.WITHOUT_MIG]:
        for value in (m.short_name.lower(), "-".join(names.family(m))):
            assert gpu_type_warning(value, "gpu-type", models()) is None, value
        assert gpu_type_warning(names.product_label(m), GFD, models()) is None
