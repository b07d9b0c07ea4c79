"""Site templates: defaults a job spec inherits, merged under the job before it is parsed.

A template is a YAML file in the job spec's own vocabulary (``kind: Template``, every job
field except ``name``). A job names at most one template (``--template`` or ``template:``);
a template may name another one in turn, up to MAX_DEPTH deep, and a loop is an error. A
site default template (the settings' ``default_template``) goes under them all.

Merging: the job wins over its template, a template over the one it names. Scalars and
plain lists (command, args, gpu_type) come whole from the first layer that sets them;
env, labels, node_selector and extra_resources merge by key; volumes, secrets,
tolerations and image_pull_secrets merge by name (an entry replaces the entries of lower
layers with the same name). gpus/shared and mig are alternatives: a layer that sets one
drops the other from the layers below it.

The merged document keeps, for every part, the file and line it came from, so an error in
a template's part names the template's file, and ``explain`` says where each field came
from. Pure: the caller's ``load`` function reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.common.specfile import Doc, Fields, Path
from gpuctl.jobs.core import spec as job_spec

KIND = "Template"
MAX_DEPTH = 8  # templates one job may inherit through (a chain, not counting the default)
TEMPLATE_FIELDS = tuple(f for f in job_spec.FIELDS if f != "name")
BY_KEY = ("env", "labels", "node_selector", "extra_resources")
# field -> an entry's name (None: it has none, and replaces nothing)
BY_NAME: dict[str, Callable[[Any], Hashable]] = {
    "volumes": lambda e: e.get("name") if isinstance(e, dict) else None,
    "secrets": lambda e: e.get("secret") if isinstance(e, dict) else None,
    # a toleration is named by the taint it tolerates: its key and effect
    "tolerations": lambda e: (e.get("key"), e.get("effect")) if isinstance(e, dict) else None,
    "image_pull_secrets": lambda e: e if isinstance(e, str) else None,
}
ALTERNATIVES = {"mig": ("gpus", "shared"), "gpus": ("mig",), "shared": ("mig",)}
JOB_ONLY = ("apiVersion", "kind", "template")  # what a job says about itself


class TemplateNotFound(Exception):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


# (reference as written, the file it was written in or None) -> (the template's path, its
# document); raises TemplateNotFound
Loader = Callable[[str, "str | None"], tuple[str, Doc]]


@dataclass(frozen=True)
class Ref:
    """A template named somewhere: on the command line, in a job, a template, the settings."""

    text: str  # a name or a path, as written
    beside: str | None  # the file it was written in: a relative path starts from there
    error: Callable[[str, str | None], GpuctlError]  # an error about it, where it was written


@dataclass(frozen=True)
class Layer:
    doc: Doc
    source: str  # "job", "template efa-p5", "default template site"


@dataclass
class Merged:
    doc: Doc  # the job with its templates' defaults, ready for parse_job
    layers: tuple[Layer, ...]  # the job first, then each template under it

    def source_of(self, path: Path) -> tuple[str, str]:
        """(which layer, 'file:line') a part of the merged document came from."""
        file = self.doc.file_of(path)
        source = next((layer.source for layer in self.layers if layer.doc.file == file), file)
        line = self.doc.line(path)
        return source, file if line is None else f"{file}:{line}"


def resolve(
    job: Doc, load: Loader, template: Ref | None = None, default: Ref | None = None
) -> Merged:
    """The job merged with the template it names (TEMPLATE, given on the command line,
    replaces the spec's own `template:`) and then the site DEFAULT."""
    f = job.root()
    if f.data.get("kind") == KIND:
        raise f.error(
            "kind",
            "this is a site template, not a job",
            hint="use it with --template FILE, or template: FILE in a job spec",
        )
    own = f.text("template")
    if template is None and own is not None:
        template = Ref(own, job.file, _error_at(job, ("template",)))
    layers = [Layer(job, "job")]
    seen: set[str] = set()
    _follow(template, load, layers, seen, "template")
    _follow(default, load, layers, seen, "default template")
    return Merged(merge(layers), tuple(layers))


def _follow(ref: Ref | None, load: Loader, layers: list[Layer], seen: set[str], what: str) -> None:
    trail: list[tuple[str, str]] = []  # (path, name) of the templates of this chain
    while ref is not None:
        try:
            path, doc = load(ref.text, ref.beside)
        except TemplateNotFound as e:
            raise ref.error(e.message, e.hint) from None
        if any(p == path for p, _ in trail):
            loop = " → ".join([name for _, name in trail] + [ref.text])
            raise ref.error(f"template loop: {loop}", None)
        if path in seen:
            return  # inherited already, through the job's own chain
        if len(trail) == MAX_DEPTH:
            raise ref.error(f"templates nest deeper than {MAX_DEPTH}", None)
        t = check_template(doc)
        trail.append((path, ref.text))
        seen.add(path)
        layers.append(Layer(doc, f"{what} {ref.text}"))
        name = t.text("template")
        ref = None if name is None else Ref(name, path, _error_at(doc, ("template",)))


def _error_at(doc: Doc, path: Path) -> Callable[[str, str | None], GpuctlError]:
    def error(message: str, hint: str | None = None) -> GpuctlError:
        return doc.error(path, message, hint)

    return error


def check_template(doc: Doc) -> Fields:
    """The template's root fields, after checking it is one and its values are valid."""
    t = doc.root()
    api = t.text("apiVersion", required=True)
    if api != job_spec.API_VERSION:
        raise t.error(
            "apiVersion", f"unsupported version {api!r}; this gpuctl reads {job_spec.API_VERSION}"
        )
    kind = t.text("kind")
    if kind != KIND:
        raise t.error(
            "kind" if kind else None,
            f"a template says kind: {KIND}" + (f" (this is a {kind})" if kind else ""),
            hint="a job spec cannot stand in for a template",
        )
    if "name" in t.data:
        raise t.error("name", "a template cannot set the job's name; each job names itself")
    t.reject_unknown(TEMPLATE_FIELDS)
    # Its values follow the job's rules, checked on the template alone: a value a job
    # overrides is still checked, and the error names the template's file.
    data = {k: v for k, v in t.data.items() if k not in ("kind", "template")}
    data.setdefault("image", "template")
    job_spec.parse_job(
        Doc({**data, "name": "template"}, doc.file, doc.lines, doc.written, doc.not_plain)
    )
    return t


# ---------- merging ----------


def merge(layers: list[Layer]) -> Doc:
    """One document: each field from the layers (the job first) by the rules above."""
    job = layers[0].doc
    if len(layers) == 1:
        return job
    out = Doc({}, job.file, lines={(): job.line(()) or 1})
    index = [_paths_by_head(layer.doc) for layer in layers]
    keys = dict.fromkeys(k for layer in layers for k in layer.doc.data)
    for key in keys:
        having = [
            i
            for i, layer in enumerate(layers)
            if layer.doc.data.get(key) is not None and (i == 0 or key not in JOB_ONLY)
        ]
        if not having or _overridden(key, having[0], layers):
            continue
        values = [layers[i].doc.data[key] for i in having]
        if key in BY_KEY and all(isinstance(v, dict) for v in values):
            merged_map: dict[str, Any] = {}
            for i in reversed(having):  # lowest layer first: higher ones overwrite
                for k, v in layers[i].doc.data[key].items():
                    merged_map[k] = v
                    _graft(out, (key, k), layers[i].doc, (key, k), index[i])
            out.data[key] = merged_map
            out.lines[(key,)] = layers[having[0]].doc.lines[(key,)]
            out.files[(key,)] = layers[having[0]].doc.file
        elif key in BY_NAME and all(isinstance(v, list) for v in values):
            out.data[key] = _merge_by_name(out, key, layers, having, index)
        else:
            _graft(out, (key,), layers[having[0]].doc, (key,), index[having[0]])
            out.data[key] = layers[having[0]].doc.data[key]
    return out


def _overridden(key: str, first: int, layers: list[Layer]) -> bool:
    """Whether a layer above FIRST sets an alternative to KEY (the job's mig over a
    template's gpus)."""
    return any(
        layers[i].doc.data.get(alt) is not None
        for alt in ALTERNATIVES.get(key, ())
        for i in range(first)
    )


def _merge_by_name(
    out: Doc, key: str, layers: list[Layer], having: list[int], index: list[dict[Path, list[Path]]]
) -> list[Any]:
    identity = BY_NAME[key]
    kept: list[tuple[int, int, Any]] = []  # (layer, position in its list, entry)
    for i in reversed(having):  # lowest layer first
        entries = layers[i].doc.data[key]
        names = {identity(e) for e in entries} - {None}
        kept = [k for k in kept if identity(k[2]) not in names]
        kept += [(i, j, e) for j, e in enumerate(entries)]
    for n, (i, j, _) in enumerate(kept):
        _graft(out, (key, n), layers[i].doc, (key, j), index[i])
    out.lines[(key,)] = layers[having[0]].doc.lines[(key,)]
    out.files[(key,)] = layers[having[0]].doc.file
    return [e for _, _, e in kept]


def _paths_by_head(doc: Doc) -> dict[Path, list[Path]]:
    """Every path of DOC under its first one and first two parts, to copy subtrees fast."""
    out: dict[Path, list[Path]] = {}
    for path in doc.lines.keys() | doc.written.keys():
        for n in (1, 2):
            if len(path) >= n:
                out.setdefault(path[:n], []).append(path)
    return out


def _graft(out: Doc, dst: Path, src: Doc, at: Path, index: dict[Path, list[Path]]) -> None:
    """Copy the lines and as-written values of SRC's part AT to OUT's part DST."""
    n = len(at)
    for path in index.get(at, ()):
        if path[:n] != at:
            continue
        moved = dst + path[n:]
        if path in src.lines:
            out.lines[moved] = src.lines[path]
        if path in src.written:
            out.written[moved] = src.written[path]
        if path in src.not_plain:
            out.not_plain[moved] = src.not_plain[path]
    out.files[dst] = src.file


# ---------- explaining ----------


def explain(merged: Merged, spec: job_spec.JobSpec) -> list[dict[str, str]]:
    """Per field of the job (per key or entry of merged ones): its value and whether it came
    from the job, a template (which one, file and line) or a default."""
    data = merged.doc.data
    rows: list[dict[str, str]] = []

    def row(name: str, value: Any, path: Path | None) -> None:
        source, at = merged.source_of(path) if path is not None else ("default", "")
        rows.append(
            {"field": name, "value": _text(merged.doc, path, value), "from": source, "at": at}
        )

    for key in job_spec.FIELDS:
        if key == "template":
            continue  # the layers say which templates were applied (--template may replace it)
        value = data.get(key)
        if value is None:
            default = getattr(spec, key, None)
            if not (default is None or default is False or default == ()):
                row(key, default, None)
        elif key in BY_KEY and isinstance(value, dict):
            for k, v in value.items():
                row(f"{key}.{k}", v, (key, k))
        elif key in BY_NAME and isinstance(value, list):
            for i, entry in enumerate(value):
                name = BY_NAME[key](entry) if key in ("volumes", "secrets") else None
                row(f"{key}[{i if name is None else name}]", entry, (key, i))
        else:
            row(key, value, (key,))
    return rows


def _text(doc: Doc, path: Path | None, value: Any) -> str:
    if path is not None and path in doc.written:
        return doc.written[path]
    return _flow(value)


def _flow(value: Any) -> str:
    """VALUE as short YAML flow text: {name: data, pvc: imagenet, read_only: true}."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str):
        return value
    return json.dumps(value)
