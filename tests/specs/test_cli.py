"""`gpuctl init` writes starter specs that render as they are and that their schema
accepts; `gpuctl schema` prints the schemas."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest
import yaml

from gpuctl.specs.core.schemas import schema
from gpuctl.specs.core.starters import STARTERS


@pytest.mark.parametrize("name", sorted(STARTERS))
def test_a_starter_validates_and_renders_as_it_is(cli, tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    done = cli("init", name, "-f", path)
    assert done.code == 0, done
    assert "gpuctl schema" in done.err
    text = path.read_text()
    kind = STARTERS[name][1]
    assert text.splitlines()[0] == f"# yaml-language-server: $schema=gpuctl-{kind}.schema.json"
    jsonschema.Draft202012Validator(schema(kind)).validate(yaml.safe_load(text))
    if kind in ("job", "service"):
        rendered = cli("render", path, "-o", "json")
        assert rendered.code == 0, rendered
        assert rendered.out.strip().startswith("{")
    else:
        planned = cli("provision", "-f", path, "--dry-run", "-o", "json")
        assert planned.code == 0, planned
        assert json.loads(planned.out)["cluster"] == yaml.safe_load(text)["name"]


def test_init_prints_to_stdout_without_a_file(cli):
    done = cli("init", "mig-job")
    assert done.code == 0
    assert "mig: 1g.10gb" in done.out and done.out.startswith("# yaml-language-server: ")
    assert cli("init", "mig-job", "-f", "-").out == done.out
    assert cli("init", "mig-job", "-o", "yaml").out == done.out  # -o is a format, as everywhere


def test_init_o_file_is_the_old_spelling_of_f(cli, tmp_path):
    done = cli("init", "job", "-o", tmp_path / "job.yaml")
    assert done.code == 0 and "-o FILE is now -f FILE" in done.err
    assert (tmp_path / "job.yaml").read_text().startswith("# yaml-language-server: ")


def test_init_refuses_to_replace_a_file_unless_forced(cli, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("mine\n")
    refused = cli("init", "job", "-f", path)
    assert refused.code == 2 and "exists" in refused.err and "--force" in refused.err
    assert path.read_text() == "mine\n"
    link = tmp_path / "link.yaml"
    os.symlink(tmp_path / "elsewhere.yaml", link)  # a dangling link is refused too
    assert cli("init", "job", "-f", link).code == 2
    assert not (tmp_path / "elsewhere.yaml").exists()
    assert cli("init", "job", "-f", path, "--force").code == 0
    assert path.read_text().startswith("# yaml-language-server: ")


def test_init_refuses_an_unknown_starter(cli):
    done = cli("init", "notebook")
    assert done.code == 2 and "notebook" in done.err


@pytest.mark.parametrize("kind", ["job", "service", "cluster"])
def test_schema_prints_json_or_yaml(cli, kind):
    as_json = json.loads(cli("schema", kind).out)
    as_yaml = yaml.safe_load(cli("schema", kind, "-o", "yaml").out)
    assert as_json == as_yaml == schema(kind)
    jsonschema.Draft202012Validator.check_schema(as_json)
    assert as_json["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("kind", ["fifo", "symlink-to-stdout", "symlink-to-file", "directory"])
def test_init_force_replaces_only_a_regular_file(cli, tmp_path, kind):
    import os

    target = tmp_path / "job.yaml"
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep me\n")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink-to-stdout":
        target.symlink_to("/dev/stdout")
    elif kind == "symlink-to-file":
        target.symlink_to(elsewhere)
    else:
        target.mkdir()
    r = cli("init", "job", "-o", str(target), "--force")
    assert r.code == 2 and "is not a regular file" in r.err and r.out == "", r
    assert elsewhere.read_text() == "keep me\n"
    assert os.path.lexists(target) and not target.is_file() or target.is_symlink()
