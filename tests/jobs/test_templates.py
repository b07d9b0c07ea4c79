"""Site templates: the merge rules, where errors point, loops, `render --explain`, and the
templates shipped with gpuctl."""

import os
import textwrap

import pytest

from gpuctl.common.errors import GpuctlError, SpecError, UsageError
from gpuctl.jobs import sources
from gpuctl.jobs.core import templates
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.sources import load_job
from tests import ROOT
from tests.jobs.test_spec import offered
from tests.k8s_schema import assert_valid

HEAD = "apiVersion: gpuctl/v1\n"
TEMPLATE = HEAD + "kind: Template\n"


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A templates_dir (from the environment) and a function that writes files."""
    tdir = tmp_path / "site"
    tdir.mkdir()
    monkeypatch.setenv("GPUCTL_TEMPLATES_DIR", str(tdir))

    def write(name: str, text: str, where=None) -> str:
        path = (where or tdir) / name
        path.write_text(textwrap.dedent(text))
        return str(path)

    write.dir = tdir
    write.tmp = tmp_path
    return write


def job(site, text: str, name: str = "job.yaml") -> str:
    return site(name, HEAD + "name: train\n" + textwrap.dedent(text), site.tmp)


def error_of(path: str, template: str | None = None) -> GpuctlError:
    with pytest.raises(GpuctlError) as e:
        load_job(path, template)
    assert "\n" not in e.value.message
    return e.value


def pod_spec(spec) -> dict:
    objs = render(spec)
    for obj in objs:
        assert_valid(obj)
    last = objs[-1]
    return last["spec"] if last["kind"] == "Pod" else last["spec"]["template"]["spec"]


def test_the_job_wins_for_scalars_and_merges_maps_by_key(site):
    site(
        "base.yaml",
        TEMPLATE
        + "image: site/base:1\ngpus: 2\nshm: 8Gi\npriority: low\ncommand: [python, a.py]\n"
        + "env: {A: template, B: template}\nlabels: {team: infra, tier: batch}\n"
        + "node_selector: {zone: a, pool: gpu}\n"
        + "extra_resources: {vpc.amazonaws.com/efa: 4, example.com/fpga: 1}\n",
    )
    spec, _ = load_job(
        job(
            site,
            """\
            template: base
            gpus: 4
            priority: high
            command: [torchrun]
            env: {B: job, C: job}
            labels: {team: ml}
            node_selector: {zone: b}
            extra_resources: {example.com/fpga: 0}
            """,
        )
    )
    assert (spec.image, spec.gpus, spec.shm, spec.priority) == ("site/base:1", 4, "8Gi", "high")
    assert spec.command == ("torchrun",)  # a list comes whole from one layer
    assert dict(spec.env) == {"A": "template", "B": "job", "C": "job"}
    assert dict(spec.labels) == {"team": "ml", "tier": "batch"}
    assert dict(spec.node_selector) == {"zone": "b", "pool": "gpu"}
    assert dict(spec.extra_resources) == {"vpc.amazonaws.com/efa": "4"}  # 0 drops the fpga


def test_lists_of_named_things_merge_by_name(site):
    site(
        "base.yaml",
        TEMPLATE
        + textwrap.dedent("""\
        volumes:
          - {name: data, pvc: site-data, mount: /data, read_only: true}
          - {name: scratch, empty_dir: 10Gi, mount: /scratch}
        secrets:
          - {secret: hf-token, env: {HF_TOKEN: token}}
          - {secret: wandb, mount: /etc/wandb}
        tolerations:
          - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}
          - {key: spot, operator: Exists, effect: NoExecute}
        image_pull_secrets: [site-registry, shared]
        """),
    )
    spec, _ = load_job(
        job(
            site,
            """\
            image: x
            template: base
            volumes:
              - {name: data, pvc: my-data, mount: /mine}
              - {name: ckpt, pvc: ckpt, mount: /ckpt}
            secrets:
              - {secret: hf-token, env: {HF_TOKEN: other-key}}
            tolerations:
              - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
            image_pull_secrets: [shared, mine]
            """,
        )
    )
    assert [(v.name, v.source, v.mount) for v in spec.volumes] == [
        ("scratch", None, "/scratch"),
        ("data", "my-data", "/mine"),
        ("ckpt", "ckpt", "/ckpt"),
    ]
    assert [(s.secret, s.env) for s in spec.secrets] == [
        ("wandb", ()),
        ("hf-token", (("HF_TOKEN", "other-key"),)),
    ]
    assert [t.get("value") for t in spec.tolerations] == [None, "ml"]
    assert spec.image_pull_secrets == ("site-registry", "shared", "mine")
    pod_spec(spec)


@pytest.mark.parametrize(
    "template_text, job_text, expected",
    [
        ("gpus: 2\nshared: true\n", "mig: 1g.10gb\n", ("nvidia.com/mig-1g.10gb", 1)),
        ("mig: 1g.10gb\n", "gpus: 2\n", ("nvidia.com/gpu", 2)),
        ("mig: 1g.10gb\n", "shared: true\n", ("nvidia.com/gpu.shared", 1)),
        ("gpus: 2\nshared: true\n", "gpus: 4\n", ("nvidia.com/gpu.shared", 4)),
    ],
)
def test_whole_gpus_and_mig_are_alternatives(site, template_text, job_text, expected):
    site("base.yaml", TEMPLATE + template_text)
    spec, _ = load_job(job(site, "image: x\ntemplate: base\n" + job_text))
    assert offered(spec) == expected


def test_templates_chain_and_the_site_default_goes_under_all(site, monkeypatch):
    site("site.yaml", TEMPLATE + "priority: site\nenv: {A: site, B: site, C: site}\n")
    site("efa.yaml", TEMPLATE + "template: site\nenv: {A: efa, B: efa}\n")
    site("defaults.yaml", TEMPLATE + "env: {A: d, B: d, C: d, D: d}\nretries: 3\n")
    monkeypatch.setenv("GPUCTL_DEFAULT_TEMPLATE", "defaults")
    spec, merged = load_job(job(site, "image: x\ntemplate: efa\nenv: {A: job}\n"))
    assert dict(spec.env) == {"A": "job", "B": "efa", "C": "site", "D": "d"}
    assert (spec.priority, spec.retries) == ("site", 3)
    assert [layer.source for layer in merged.layers] == [
        "job",
        "template efa",
        "template site",
        "default template defaults",
    ]
    # a default already inherited through the job's own chain is not applied twice
    monkeypatch.setenv("GPUCTL_DEFAULT_TEMPLATE", "site")
    _, merged = load_job(job(site, "image: x\ntemplate: efa\n"))
    assert [layer.source for layer in merged.layers] == ["job", "template efa", "template site"]


def test_the_command_line_template_replaces_the_specs_own(site):
    site("a.yaml", TEMPLATE + "priority: from-a\n")
    site("b.yaml", TEMPLATE + "priority: from-b\n")
    path = job(site, "image: x\ntemplate: a\n")
    assert load_job(path)[0].priority == "from-a"
    assert load_job(path, "b")[0].priority == "from-b"


def test_a_template_path_is_read_beside_the_file_that_names_it(site):
    (site.tmp / "t").mkdir()
    site("base.yaml", TEMPLATE + "priority: beside\n", site.tmp / "t")
    site("mid.yaml", TEMPLATE + "template: base.yaml\nshm: 1Gi\n", site.tmp / "t")
    spec, _ = load_job(job(site, "image: x\ntemplate: t/mid.yaml\n"))
    assert (spec.priority, spec.shm) == ("beside", "1Gi")


def test_a_site_template_overrides_a_shipped_one_of_the_same_name(site):
    site("notebook.yaml", TEMPLATE + "deadline: 1h\n")
    spec, _ = load_job(job(site, "image: x\ntemplate: notebook\n"))
    assert spec.deadline == 3600 and not spec.shared


# ---------- errors: one line, naming the file, line and field where the problem is ----------


def test_a_template_cannot_set_the_name(site):
    t = site("named.yaml", TEMPLATE + "name: sneaky\ngpus: 1\n")
    e = error_of(job(site, "image: x\ntemplate: named\n"))
    assert isinstance(e, SpecError) and (e.file, e.line, e.field) == (t, 3, "name")
    assert "cannot set the job's name" in e.message


@pytest.mark.parametrize(
    "chain, where, loop",
    [
        ({"a": "b", "b": "a"}, ("b", 3), "template loop: a → b → a"),
        ({"a": "a"}, ("a", 3), "template loop: a → a"),
        ({"a": "b", "b": "c", "c": "b"}, ("c", 3), "template loop: a → b → c → b"),
    ],
)
def test_a_template_loop_is_one_clear_error(site, chain, where, loop):
    for name, parent in chain.items():
        site(f"{name}.yaml", TEMPLATE + f"template: {parent}\n")
    e = error_of(job(site, "image: x\ntemplate: a\n"))
    assert (e.file, e.line, e.field) == (str(site.dir / f"{where[0]}.yaml"), where[1], "template")
    assert loop in e.message


def test_templates_nest_at_most_max_depth(site):
    depth = templates.MAX_DEPTH
    for i in range(depth + 1):
        site(f"t{i}.yaml", TEMPLATE + (f"template: t{i + 1}\n" if i < depth else ""))
    e = error_of(job(site, "image: x\ntemplate: t0\n"))
    assert f"nest deeper than {depth}" in e.message and e.file.endswith(f"t{depth - 1}.yaml")
    site(f"t{depth - 1}.yaml", TEMPLATE)  # the chain ends one earlier: exactly MAX_DEPTH
    assert len(load_job(job(site, "image: x\ntemplate: t0\n"))[1].layers) == depth + 1


def test_an_unknown_template_names_where_it_was_asked_for(site, monkeypatch, tmp_path):
    site("efa.yaml", TEMPLATE)
    path = job(site, "image: x\ntemplate: efa-p6\n")
    e = error_of(path)
    assert (e.file, e.line, e.field) == (path, 4, "template")
    assert f"no template 'efa-p6' in {site.dir} or {sources.shipped_dir()}" in e.message
    assert "efa, efa-p4d, efa-p5" in e.hint  # the site's and the shipped ones
    e = error_of(path, "nope")
    assert isinstance(e, UsageError) and e.message.startswith("--template nope: no template")
    e = error_of(path, "")
    assert isinstance(e, UsageError) and "neither a template name nor a path" in e.message
    e = error_of(job(site, "image: x\ntemplate: ../../etc/passwd\n"))
    assert "no template file" in e.message
    e = error_of(job(site, "image: x\ntemplate: 'a b'\n"))
    assert "neither a template name nor a path" in e.message
    # the site default: the settings file's line
    config = tmp_path / "config.yaml"
    config.write_text("gpu_label_key: gpu-type\ndefault_template: missing\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(config))
    e = error_of(job(site, "image: x\n"))
    assert (e.file, e.line, e.field) == (str(config), 2, "default_template")


@pytest.mark.parametrize(
    "template_text, line, field, needle",
    [
        ("gpus: -1\n", 3, "gpus", "at least 0"),
        ("gpus: 010\n", 3, "gpus", "'010' is not a plain decimal number"),
        ("nodes: 0x10\n", 3, "nodes", "'0x10' is not a plain decimal number"),
        ("gpuz: 1\n", 3, "gpuz", "did you mean 'gpus'"),
        ("volumes: [{name: h, hostPath: /etc, mount: /h}]\n", 3, "volumes[0].hostPath", "hostPath"),
        ("volumes: [{name: s, pvc: s, mount: /dev/shm}]\n", 3, "volumes[0].mount", "shm:"),
        ("volumes: [{name: s, pvc: s, mount: rel}]\n", 3, "volumes[0].mount", "absolute"),
    ],
)
def test_a_bad_template_is_reported_in_its_own_file(site, template_text, line, field, needle):
    t = site("bad.yaml", TEMPLATE + template_text)
    # the job overrides the field: the template is still checked, on its own
    e = error_of(job(site, "image: x\ntemplate: bad\ngpus: 2\nvolumes: []\n"))
    assert (e.file, e.line, e.field) == (t, line, field), e.message
    assert needle in e.message


def test_conflicts_between_job_and_template_name_both_places(site):
    t = site("base.yaml", TEMPLATE + "volumes: [{name: data, pvc: d, mount: /data}]\n")
    path = job(site, "image: x\ntemplate: base\nvolumes: [{name: sub, pvc: s, mount: /data/sub}]\n")
    e = error_of(path)
    assert (e.file, e.line, e.field) == (path, 5, "volumes[1].mount")
    assert f"/data/sub is under /data, mounted by volumes[0].mount ({t}:3)" in e.message
    # a variable gpuctl sets on the workers of a multi-node job, from a template
    t = site("base.yaml", TEMPLATE + "env:\n  EPOCHS: '1'\n  MASTER_PORT: '1'\n")
    e = error_of(job(site, "image: x\ntemplate: base\nnodes: 2\n"))
    assert (e.file, e.line, e.field) == (t, 5, "env.MASTER_PORT")
    # a job-only field from a template on a bare Pod
    t = site("base.yaml", TEMPLATE + "ttl_after_finished: 1h\n")
    e = error_of(job(site, "image: x\nkind: Pod\ntemplate: base\n"))
    assert (e.file, e.line, e.field) == (t, 3, "ttl_after_finished")


def test_a_template_given_as_a_job_and_a_job_as_a_template_are_named_so(site):
    t = site("base.yaml", TEMPLATE + "gpus: 1\n")
    e = error_of(t)
    assert (e.field, e.line) == ("kind", 2) and "a site template, not a job" in e.message
    other = job(site, "kind: Pod\nimage: x\n", "other.yaml")
    e = error_of(job(site, "image: x\ntemplate: other.yaml\n"))
    assert (e.file, e.line, e.field) == (other, 3, "kind")
    assert "a template says kind: Template (this is a Pod)" in e.message
    other = job(site, "image: x\n", "other.yaml")
    e = error_of(job(site, "image: x\ntemplate: other.yaml\n"))
    assert (e.file, e.line, e.field) == (other, 1, None)
    assert "a template says kind: Template" in e.message


def test_a_job_with_no_template_is_parsed_as_written(site):
    path = job(site, "image: x\nenv: {A: '1'}\n")
    spec, merged = load_job(path)
    assert merged.doc.file == path and len(merged.layers) == 1 and dict(spec.env) == {"A": "1"}


# ---------- explain ----------


def test_explain_says_where_each_field_came_from(site):
    t = site(
        "base.yaml",
        TEMPLATE + "shm: 8Gi\nenv: {A: t, B: t}\nvolumes: [{name: data, pvc: d, mount: /data}]\n",
    )
    path = job(site, "image: x\ntemplate: base\nenv: {B: job}\nnodes: 2\n")
    spec, merged = load_job(path)
    rows = {r["field"]: r for r in templates.explain(merged, spec)}
    assert rows["image"] == {"field": "image", "value": "x", "from": "job", "at": f"{path}:3"}
    assert rows["shm"] == {"field": "shm", "value": "8Gi", "from": "template base", "at": f"{t}:3"}
    assert (rows["env.A"]["from"], rows["env.B"]["from"]) == ("template base", "job")
    assert rows["volumes[data]"]["value"] == "{name: data, pvc: d, mount: /data}"
    assert rows["volumes[data]"]["at"] == f"{t}:5"
    assert rows["gpus"] == {"field": "gpus", "value": "1", "from": "default", "at": ""}
    assert rows["retries"]["from"] == "default" and rows["nodes"]["value"] == "2"
    assert "cpu" not in rows  # not set anywhere, no default


def test_render_explain_cli(cli, site):
    site("base.yaml", TEMPLATE + "shm: 8Gi\n")
    path = job(site, "image: x\ntemplate: base\n")
    r = cli("render", path, "--explain")
    assert r.code == 0, r
    assert "job ← template base" in r.out
    assert [ln.split()[:3] for ln in r.out.splitlines() if ln.split()[:1] == ["shm"]] == [
        ["shm", "8Gi", "template"]
    ]
    r = cli("render", path, "--explain", "-o", "json")
    import json

    (report,) = json.loads(r.out)
    assert report["layers"][1] == {"from": "template base", "file": str(site.dir / "base.yaml")}
    r = cli("render", path, "--template", "nope")
    assert r.code == 2 and "--template nope: no template 'nope'" in r.err


# ---------- the templates shipped with gpuctl ----------

SHIPPED = sorted(
    os.path.splitext(n)[0]
    for n in os.listdir(os.path.join(ROOT, "templates"))
    if n.endswith(".yaml")
)


def test_the_documented_templates_are_shipped():
    assert SHIPPED == ["datasets", "efa-p4d", "efa-p5", "notebook"]
    assert sources.shipped_dir() == os.path.join(ROOT, "templates")


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("nodes", [1, 2])
def test_every_shipped_template_renders_schema_valid(site, name, nodes):
    spec, merged = load_job(job(site, f"image: x\ntemplate: {name}\nnodes: {nodes}\n"))
    assert merged.layers[1].doc.file == os.path.join(sources.shipped_dir(), f"{name}.yaml")
    pod_spec(spec)


@pytest.mark.parametrize(
    "name, instance, efa", [("efa-p4d", "p4d.24xlarge", "4"), ("efa-p5", "p5.48xlarge", "32")]
)
def test_efa_templates(site, name, instance, efa):
    spec, _ = load_job(job(site, f"image: x\ntemplate: {name}\nnodes: 4\n"))
    pod = pod_spec(spec)
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": efa}
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": instance}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert (
        env["NODE_RANK"] is None and env["WORLD_SIZE"] == "4"
    )  # torchrun's, beside them (K workers)
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]


def test_datasets_and_notebook_templates(site):
    spec, _ = load_job(job(site, "image: x\ntemplate: datasets\n"))
    (v,) = spec.volumes
    assert (v.kind, v.source, v.mount, v.read_only) == ("pvc", "datasets", "/datasets", True)
    spec, _ = load_job(job(site, "image: x\ntemplate: notebook\n"))
    assert offered(spec) == ("nvidia.com/gpu.shared", 1)
    assert (spec.deadline, spec.ttl_after_finished) == (8 * 3600, 3600)


def test_a_number_a_template_writes_oddly_is_refused_in_the_merged_job_too(site):
    """The job's own value is plain; the template's deadline (1:04, base 60 in YAML 1.1)
    reaches the merged job, which refuses it at the template's line."""
    t = site("odd.yaml", TEMPLATE + "deadline: 1:04\n")
    e = error_of(job(site, "image: x\ntemplate: odd\n"))
    assert (e.file, e.line, e.field) == (t, 3, "deadline"), e.message
    assert "'1:04' is not a" in e.message
