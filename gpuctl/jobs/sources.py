"""Loading a job spec with its site templates: where a template named NAME is found (the
settings' templates_dir, then the templates shipped with gpuctl), or read from a PATH."""

from __future__ import annotations

import os
import re

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.specfile import Doc, load_yaml_file
from gpuctl.jobs.core import templates
from gpuctl.jobs.core.spec import JobSpec, parse_job
from gpuctl.runtime import shipped
from gpuctl.runtime.config import setting

SUFFIXES = (".yaml", ".yml")
_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]*")


def shipped_dir() -> str:
    """The templates shipped with gpuctl (templates/ of the checkout, gpuctl/templates/ when
    installed)."""
    return str(shipped.directory("templates"))


def is_path(ref: str) -> bool:
    """A reference with a '/' or a .yaml/.yml ending is a file; anything else a name."""
    return "/" in ref or ref.endswith(SUFFIXES)


class Finder:
    """Finds and reads templates by name (in DIRS, in order) or by path."""

    def __init__(self, templates_dir: str | None):
        self.dirs = [os.path.expanduser(d) for d in (templates_dir, shipped_dir()) if d]

    def __call__(self, ref: str, beside: str | None) -> tuple[str, Doc]:
        path = self.find(ref, beside)
        # the real path tells one file from another for loop detection; errors show PATH
        return os.path.realpath(path), load_yaml_file(path)

    def find(self, ref: str, beside: str | None = None) -> str:
        if is_path(ref):
            path = os.path.expanduser(ref)
            if beside is not None and not os.path.isabs(path):
                path = os.path.join(os.path.dirname(beside), path)
            if not os.path.isfile(path):
                raise templates.TemplateNotFound(f"no template file {path}")
            return path
        if not _NAME.fullmatch(ref):
            raise templates.TemplateNotFound(
                f"{ref!r} is neither a template name nor a path to a .yaml file"
            )
        for directory in self.dirs:
            for suffix in SUFFIXES:
                path = os.path.join(directory, ref + suffix)
                if os.path.isfile(path):
                    return path
        known = self.names()
        raise templates.TemplateNotFound(
            f"no template {ref!r} in {' or '.join(self.dirs)}",
            hint="templates there: " + ", ".join(known) if known else None,
        )

    def names(self) -> list[str]:
        found: set[str] = set()
        for directory in self.dirs:
            try:
                entries = os.listdir(directory)
            except OSError:
                continue
            found.update(e.rsplit(".", 1)[0] for e in entries if e.endswith(SUFFIXES))
        return sorted(found)


def load_job(path: str, template: str | None = None) -> tuple[JobSpec, templates.Merged]:
    """The job spec in PATH merged with its templates (TEMPLATE replaces its own
    `template:`; the settings' default_template goes under both), and the merge itself."""
    finder = Finder(setting("templates_dir", None, _directory_problem))
    default = setting("default_template", None, lambda ref: _missing(finder, ref))
    merged = templates.resolve(
        load_yaml_file(path),
        finder,
        template=None if template is None else _ref(template, "--template"),
        default=None if default is None else _ref(default, "default_template (settings)"),
    )
    return parse_job(merged.doc), merged


def _ref(text: str, where: str) -> templates.Ref:
    def error(message: str, hint: str | None = None) -> GpuctlError:
        return UsageError(f"{where} {text}: {message}", hint)

    return templates.Ref(text, None, error)


def _directory_problem(path: str) -> str | None:
    return None if os.path.isdir(os.path.expanduser(path)) else "not a directory"


def _missing(finder: Finder, ref: str) -> str | None:
    try:
        finder.find(ref)
    except templates.TemplateNotFound as e:
        return e.message
    return None
