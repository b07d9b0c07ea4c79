"""submit with volumes, secrets and templates against the Kubernetes API emulator: what a
job uses must exist before anything is created, and bad specs send nothing at all."""

import textwrap

import pytest

from tests.gpu_cluster import mark, writes
from tests.jobs.test_submit import add_node

HEAD = "apiVersion: gpuctl/v1\n"

JOB = HEAD + textwrap.dedent("""\
    name: train
    image: x
    gpus: 1
    volumes:
      - {name: data, pvc: imagenet, mount: /data, read_only: true}
      - {name: cfg, config_map: train-cfg, mount: /etc/train}
    secrets:
      - {secret: hf-token, env: {HF_TOKEN: token}}
    """)


@pytest.fixture
def core(kube_api):
    from kubernetes import client

    return client.CoreV1Api(kube_api)


def add_pvc(core, name, modes=("ReadOnlyMany",), phase="Bound", namespace="default"):
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Ti"}}},
            "status": {"phase": phase},
        },
    )


def add_config_map(core, name, namespace="default"):
    core.create_namespaced_config_map(
        namespace, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    )


def add_secret(core, name, keys, namespace="default"):
    core.create_namespaced_secret(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "data": {k: "eA==" for k in keys},
        },
    )


def test_a_job_whose_volumes_and_secrets_exist_is_created_with_them(cli, core, kube, tmp_path):
    add_node(core, "gpu-a", 8, "a100")
    add_pvc(core, "imagenet")
    add_config_map(core, "train-cfg")
    add_secret(core, "hf-token", ["token", "other"])
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    r = cli("submit", path)
    assert r.code == 0, r
    from kubernetes import client

    pod = client.BatchV1Api(core.api_client).read_namespaced_job("train", "default")
    pod = pod.spec.template.spec
    assert [v.persistent_volume_claim.claim_name for v in pod.volumes[:1]] == ["imagenet"]
    assert pod.containers[0].env[0].value_from.secret_key_ref.key == "token"
    # what submit read to check: each object once, by name, in the job's namespace
    reads = [q[1] for q in kube.requests() if q[0] == "GET"]
    assert "/api/v1/namespaces/default/persistentvolumeclaims/imagenet" in reads
    assert "/api/v1/namespaces/default/configmaps/train-cfg" in reads
    assert "/api/v1/namespaces/default/secrets/hf-token" in reads


@pytest.mark.parametrize(
    "missing, message",
    [
        (
            "pvc",
            "job.yaml:6: volumes[0].pvc: PersistentVolumeClaim default/imagenet does not exist",
        ),
        ("config_map", "job.yaml:7: volumes[1].config_map: ConfigMap default/train-cfg does not"),
        ("secret", "job.yaml:9: secrets[0].secret: Secret default/hf-token does not exist"),
        ("key", "job.yaml:9: secrets[0].secret: Secret default/hf-token has no key token"),
    ],
)
def test_submit_refuses_a_job_whose_volumes_or_secrets_are_missing(
    cli, core, kube, tmp_path, missing, message
):
    add_node(core, "gpu-a", 8, "a100")
    if missing != "pvc":
        add_pvc(core, "imagenet")
    if missing != "config_map":
        add_config_map(core, "train-cfg")
    if missing != "secret":
        add_secret(core, "hf-token", ["other"] if missing == "key" else ["token"])
    since = mark(kube)
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    for args in ((), ("--dry-run",)):
        r = cli("submit", path, *args)
        assert r.code == 1, r
        assert f"{tmp_path}/{message}" in r.err and "nothing was created" in r.err
    assert writes(kube, since) == []


def test_every_missing_object_is_named(cli, core, kube, tmp_path):
    add_node(core, "gpu-a", 8, "a100")
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    r = cli("submit", path)
    assert r.code == 1
    assert "PersistentVolumeClaim default/imagenet does not exist; nothing was created" in r.err
    assert "also: " in r.err and "ConfigMap default/train-cfg" in r.err
    assert "Secret default/hf-token" in r.err


def test_claims_that_cannot_serve_every_worker(cli, core, kube, tmp_path):
    add_node(core, "n1", 8, "h100")
    add_node(core, "n2", 8, "h100")
    add_pvc(core, "solo", ["ReadWriteOncePod"])
    add_pvc(core, "rwo", ["ReadWriteOnce"])
    add_pvc(core, "gone", ["ReadWriteMany"], phase="Lost")
    spec = HEAD + "name: t\nimage: x\ngpus: 8\nnodes: 2\nvolumes: [{name: d, pvc: %s, mount: /d}]\n"
    since = mark(kube)
    path = tmp_path / "job.yaml"
    path.write_text(spec % "solo")
    r = cli("submit", path)
    assert r.code == 1 and "is ReadWriteOncePod: one pod only, and the job has 2 workers" in r.err
    path.write_text(spec % "gone")
    r = cli("submit", path)
    assert r.code == 1 and "PersistentVolumeClaim default/gone is Lost" in r.err
    assert writes(kube, since) == []
    path.write_text(spec % "rwo")
    r = cli("submit", path)
    assert r.code == 0, r
    assert "warning: " in r.err and "rwo is ReadWriteOnce: workers on other nodes" in r.err


def test_without_rights_to_read_secrets_submit_warns_and_goes_on(cli, core, kube, tmp_path):
    add_node(core, "gpu-a", 8, "a100")
    add_pvc(core, "imagenet")
    add_config_map(core, "train-cfg")
    kube.call(lambda: kube.emulator["get /api/v1/namespaces/default/secrets/hf-token"] << 403)
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    r = cli("submit", path)
    assert r.code == 0, r
    assert "warning: cannot check Secret default/hf-token: reading Secret" in r.err


def test_a_template_from_the_settings_reaches_the_cluster(cli, core, kube, tmp_path, monkeypatch):
    add_node(core, "gpu-a", 8, "a100")
    add_pvc(core, "datasets")
    tdir = tmp_path / "site"
    tdir.mkdir()
    (tdir / "site.yaml").write_text(
        HEAD + "kind: Template\ntemplate: datasets\nimage_pull_secrets: [registry]\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(f"templates_dir: {tdir}\ndefault_template: site\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(config))
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + "name: t\nimage: x\n")
    r = cli("submit", path)
    assert r.code == 0, r
    from kubernetes import client

    pod = client.BatchV1Api(core.api_client).read_namespaced_job("t", "default").spec.template.spec
    assert pod.volumes[0].persistent_volume_claim.claim_name == "datasets"
    assert pod.image_pull_secrets[0].name == "registry"


HOSTILE = {
    "duplicate mounts": (
        "volumes:\n  - {name: a, pvc: a, mount: /d}\n  - {name: b, pvc: b, mount: /d}\n",
        {},
        "volumes[1].mount: /d is also mounted by volumes[0].mount",
    ),
    "a relative path": (
        "volumes: [{name: a, pvc: a, mount: data}]\n",
        {},
        "volumes[0].mount: 'data' is not an absolute path",
    ),
    "a mount under another": (
        "volumes:\n  - {name: a, pvc: a, mount: /d}\nsecrets: [{secret: s, mount: /d/s}]\n",
        {},
        "secrets[0].mount: /d/s is under /d",
    ),
    "/dev/shm": (
        "volumes: [{name: a, empty_dir: 1Gi, memory: true, mount: /dev/shm}]\n",
        {},
        "volumes[0].mount: /dev/shm is where `shm:` mounts shared memory",
    ),
    "hostPath": (
        "volumes: [{name: a, hostPath: {path: /var/run/docker.sock}, mount: /s}]\n",
        {},
        "volumes[0].hostPath: a job cannot mount a directory of its node",
    ),
    "a hostPath from a template": (
        "template: t\n",
        {"t": "volumes: [{name: a, host_path: /, mount: /s}]\n"},
        "t.yaml:3: volumes[0].host_path: a job cannot mount a directory of its node",
    ),
    "a template that sets the name": (
        "template: t\n",
        {"t": "name: other\n"},
        "t.yaml:3: name: a template cannot set the job's name",
    ),
    "a template loop": (
        "template: a\n",
        {"a": "template: b\n", "b": "template: a\n"},
        "b.yaml:3: template: template loop: a → b → a",
    ),
    "an unknown template": ("template: nope\n", {}, "job.yaml:4: template: no template 'nope'"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_hostile_specs_get_one_clear_error_and_send_nothing(cli, kube, tmp_path, monkeypatch, case):
    extra, template_files, needle = HOSTILE[case]
    tdir = tmp_path / "site"
    tdir.mkdir()
    for name, text in template_files.items():
        (tdir / f"{name}.yaml").write_text(HEAD + "kind: Template\n" + text)
    monkeypatch.setenv("GPUCTL_TEMPLATES_DIR", str(tdir))
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + "name: t\nimage: x\n" + extra)
    for command in (("submit", path), ("render", path)):
        r = cli(*command)
        assert r.code == 2, r
        (line,) = [ln for ln in r.err.splitlines() if ln.startswith("gpuctl: error:")]
        assert needle in line
        assert r.out == ""
    assert kube.requests() == []
