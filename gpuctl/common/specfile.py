"""Safe loading of spec files (YAML) with the line of every field, and typed field access.

Every gpuctl spec (job, cluster, MIG config) goes through here, so that every error names
the file, the line and the field. Only plain YAML is accepted: no tags that construct
objects, no aliases (alias bombs), no duplicate keys, bounded size and depth.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuctl.common import k8s_names, spec_fields
from gpuctl.common.errors import SpecError, location
from gpuctl.common.numbers import whole_number
from gpuctl.common.quantity import parse as parse_quantity

if TYPE_CHECKING:
    import yaml

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_SECONDS = spec_fields.MAX_SECONDS

_STD = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_STD + t for t in ("str", "int", "float", "bool", "null")}
_TEXT_TAGS = {_STD + t for t in ("timestamp", "binary")}  # kept as the text written
# A number as a person writes it in decimal: YAML 1.1 also reads octal (010 is 8), hex
# (0x10), underscores (1_6), base 60 (1:04 is 64) and .inf/.nan.
_PLAIN_NUMBER = re.compile(r"[-+]?(0|[1-9][0-9]*)(\.[0-9]*)?([eE][-+]?[0-9]+)?|[-+]?\.[0-9]+")
# Text may hold tabs and line breaks (a script in `args: |`), no other control character:
# NUL ends a C string, escapes drive terminals, a carriage return hides what precedes it,
# bidirectional overrides show text in another order than it is read.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

Path = tuple[str | int, ...]  # keys (str) and list indexes (int) from the document root


@dataclass
class Doc:
    """One loaded YAML document: plain data plus the line of each path."""

    data: Any
    file: str
    lines: dict[Path, int] = field(default_factory=dict)
    # as written, for numbers and booleans: `010`, `1:30`, `12.10`, `yes` are text to a user
    written: dict[Path, str] = field(default_factory=dict)
    # numbers not written as plain decimals (`010`, `0x10`, `1_6`, `1:04`, `.inf`), kept as
    # their text, with what YAML 1.1 would have read: a number field refuses them
    not_plain: dict[Path, int | float] = field(default_factory=dict)
    # the file of each part that came from another file (a job merged with its templates)
    files: dict[Path, str] = field(default_factory=dict)

    def line(self, path: Path) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())

    def file_of(self, path: Path) -> str:
        while path:
            if path in self.files:
                return self.files[path]
            path = path[:-1]
        return self.files.get((), self.file)

    def where(self, path: Path) -> str:
        """Where PATH is, as messages name it: job.yaml:8: volumes[0].pvc."""
        return location(self.file_of(path), self.line(path), dotted(path) or None)

    def error(self, path: Path, message: str, hint: str | None = None) -> SpecError:
        return SpecError(
            message,
            file=self.file_of(path),
            line=self.line(path),
            field=dotted(path) or None,
            hint=hint,
        )

    def root(self) -> Fields:
        if not isinstance(self.data, dict):
            kind = "empty" if self.data is None else type(self.data).__name__
            raise SpecError(
                f"expected a mapping of fields, got {kind}", file=self.file, line=self.line(())
            )
        return Fields(self, ())


def dotted(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def load_yaml_file(path: str) -> Doc:
    return load_yaml(read_text(path, MAX_BYTES), path)


def read_text(path: str, max_bytes: int) -> str:
    """A UTF-8 text file of at most `max_bytes`, or a SpecError naming the file (and the
    line of a byte that is not UTF-8)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise SpecError(f"cannot read file: {e.strerror}", file=path) from None
    except ValueError:  # open() refuses a name with a NUL in it
        raise SpecError("cannot read file: its name holds a NUL character", file=path) from None
    if len(raw) > max_bytes:
        raise SpecError(f"file is larger than {max_bytes // 1024:,} KiB", file=path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise SpecError(f"not UTF-8 text (byte {e.start})", file=path, line=line) from None


def load_yaml(text: str, file: str = "<input>") -> Doc:
    import yaml

    if len(text) > MAX_BYTES:
        raise SpecError(f"document is larger than {MAX_BYTES // 1024} KiB", file=file)

    class _Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            # types-PyYAML leaves peek_event unannotated
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            if self.check_event(yaml.AliasEvent):
                raise SpecError(
                    "YAML aliases (*name) are not allowed in spec files",
                    file=file,
                    line=mark.line + 1,
                )
            # PyYAML composes recursively: stop before Python's recursion limit does
            if self.depth >= MAX_DEPTH:
                raise SpecError(
                    f"nesting deeper than {MAX_DEPTH} levels", file=file, line=mark.line + 1
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as e:  # a control character: YAML refuses the whole text
        raise SpecError(
            f"not valid YAML: character U+{e.character:04X} is not allowed",
            file=file,
            line=text.count("\n", 0, e.position) + 1,
        ) from None
    try:
        node = loader.get_single_node()
    except yaml.composer.ComposerError as e:
        mark = e.problem_mark
        several = "single document" in (e.context or "")
        raise SpecError(
            "expected one YAML document, found several"
            if several
            else f"not valid YAML: {(e.context or e.problem or '').split(';')[0]}",
            file=file,
            line=mark.line + 1 if mark else None,
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(
            f"not valid YAML: {problem}", file=file, line=mark.line + 1 if mark else None
        ) from None
    finally:
        loader.dispose()
    doc = Doc(None, file)
    if node is not None:
        doc.data = _convert(node, (), doc, loader)
    return doc


def _convert(node: yaml.Node, path: Path, doc: Doc, loader: yaml.SafeLoader) -> Any:
    import yaml

    line = node.start_mark.line + 1
    doc.lines.setdefault(path, line)
    if isinstance(node, yaml.ScalarNode):
        if node.tag in _TEXT_TAGS:
            return node.value
        if node.tag not in _SCALAR_TAGS:
            raise SpecError(
                f"YAML tag {node.tag!r} is not allowed (plain values only)",
                file=doc.file,
                line=line,
                field=dotted(path) or None,
            )
        try:
            value = loader.construct_object(node)
        except ValueError:  # Python reads at most 4300 digits of a decimal int
            raise SpecError(
                f"number too long ({len(node.value)} characters)",
                file=doc.file,
                line=line,
                field=dotted(path) or None,
            ) from None
        if isinstance(value, str):
            _check_text(value, doc, path, line)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if not _PLAIN_NUMBER.fullmatch(node.value):
                doc.not_plain[path] = value
                return node.value
        if isinstance(value, (bool, int, float)):
            doc.written[path] = node.value
        return value
    if isinstance(node, yaml.SequenceNode):
        if node.tag != _STD + "seq":
            raise SpecError(
                f"YAML tag {node.tag!r} is not allowed",
                file=doc.file,
                line=line,
                field=dotted(path) or None,
            )
        return [_convert(n, path + (i,), doc, loader) for i, n in enumerate(node.value)]
    if node.tag != _STD + "map":
        raise SpecError(
            f"YAML tag {node.tag!r} is not allowed",
            file=doc.file,
            line=line,
            field=dotted(path) or None,
        )
    out: dict[str, Any] = {}
    for knode, vnode in node.value:
        kline = knode.start_mark.line + 1
        if not isinstance(knode, yaml.ScalarNode) or knode.tag == _STD + "merge":
            raise SpecError(
                "only plain keys are allowed (no complex or merge keys)",
                file=doc.file,
                line=kline,
                field=dotted(path) or None,
            )
        key = knode.value
        _check_text(key, doc, path + (key,), kline)
        if key in out:
            raise SpecError(
                f"duplicate key {key!r}", file=doc.file, line=kline, field=dotted(path + (key,))
            )
        doc.lines[path + (key,)] = kline
        out[key] = _convert(vnode, path + (key,), doc, loader)
    return out


def _check_text(text: str, doc: Doc, path: Path, line: int) -> None:
    bad = _CONTROL.search(text)
    if bad:
        raise SpecError(
            f"control character U+{ord(bad.group()):04X} in text (of the control characters "
            "only tabs and line breaks are allowed)",
            file=doc.file,
            line=line,
            field=dotted(path) or None,
        )


# ---------- typed access to the fields of one mapping ----------

_DURATION_PART = re.compile(spec_fields.DURATION_PART)
_DURATION_TEXT = re.compile(spec_fields.DURATION_TEXT)
_DURATION_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_MISSING = object()


class Fields:
    """Typed, line-aware access to one mapping inside a Doc."""

    def __init__(self, doc: Doc, path: Path):
        self.doc, self.path = doc, path
        self.data: dict[str, Any] = _at(doc.data, path)

    def error(self, key: str | int | None, message: str, hint: str | None = None) -> SpecError:
        path = self.path if key is None else self.path + (key,)
        return self.doc.error(path, message, hint)

    def read(self, row: spec_fields.Field, default: Any = _MISSING) -> Any:
        """The field ROW describes, checked as the row says (its type, required, allowed
        values, bounds, its pattern and key rules); DEFAULT replaces the row's where it
        depends on other fields."""
        value = self._typed(row, row.default if default is _MISSING else default)
        if self.has(row.name):
            self._keep_rules(row, value)
        return value

    def _typed(self, row: spec_fields.Field, default: Any) -> Any:
        t, key, required = row.type, row.name, row.required
        if t == spec_fields.NAME:
            return self.name(key, default, required=required)
        if t in (spec_fields.TEXT, spec_fields.TEXT_OR_MAPPING):  # the latter: its text form
            return self.text(key, default, required=required, choices=row.choices or None)
        if t == spec_fields.INTEGER:
            return self.integer(
                key, default, required=required, minimum=row.minimum, maximum=row.maximum
            )
        if t == spec_fields.STRINGS:
            return self.str_list(key, default, allow_scalar=row.single, non_empty=row.non_empty)
        if t == spec_fields.RESOURCES:
            return self.resources(key, default, maximum=row.maximum, keys=row.keys)
        simple = (
            spec_fields.FLAG,
            spec_fields.STRING_MAP,
            spec_fields.QUANTITY,
            spec_fields.DURATION,
        )
        if t not in simple:
            raise ValueError(f"{key}: a {t} field is read by its parser, part by part")
        method = getattr(self, t)  # the Fields method of the type's name
        return method(key, default)

    def _keep_rules(self, row: spec_fields.Field, value: Any) -> None:
        """Refuse a text that breaks the row's pattern or key rule: at the field, or at the
        item or entry itself where the row says so (at_entry)."""
        key = row.name
        if row.type == spec_fields.STRINGS:
            for i, item in enumerate(value):
                self._keep(row.pattern, item, (key, i) if row.at_entry else (key,))
        elif row.type == spec_fields.STRING_MAP:
            for name, text in value.items():
                at = (key, name) if row.at_entry else (key,)
                self._keep(row.keys, name, at)
                # at the field, a value's message names its key
                self._keep(row.pattern, text, at, "" if row.at_entry else f"{name}: ")
        elif row.type != spec_fields.RESOURCES:  # resources() keeps its key rule
            self._keep(row.pattern, value, (key,))

    def _keep(self, rule: spec_fields.Rule | None, text: str, at: Path, about: str = "") -> None:
        refusal = rule.refusal(text) if rule is not None else None
        if refusal is not None:
            raise self.doc.error(self.path + at, about + refusal.message, refusal.hint)

    def reject_unknown(self, known: Iterable[str] | spec_fields.Table) -> None:
        known = known.names() if isinstance(known, spec_fields.Table) else known
        known = list(known)
        for key in self.data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                if close:
                    raise self.error(key, f"unknown field; did you mean {close[0]!r}?")
                raise self.error(
                    key, "unknown field", hint="known fields: " + ", ".join(sorted(known))
                )

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def _get(self, key: str, default: Any, required: bool) -> Any:
        if key not in self.data or self.data[key] is None:
            if required:
                raise self.error(None, f"missing required field {key!r}")
            return _MISSING if default is _MISSING else default
        return self.data[key]

    def text(
        self,
        key: str,
        default: Any = None,
        *,
        required: bool = False,
        choices: Iterable[str] | None = None,
    ) -> Any:
        value = self._get(key, default, required)
        if value is default:
            return value
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_kind(value)} {value!r}")
        if not value.strip():
            raise self.error(key, "must not be empty")
        if choices is not None and value not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)} (got {value!r})")
        return value

    def number_text(self, key: str, default: Any = None) -> Any:
        """Text, or a plain decimal number as written (`30`, `2.5`): for values the
        environment gives as text too."""
        value = self._get(key, default, False)
        if value is default or isinstance(value, str):
            return self.text(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {_kind(value)} {value!r}")
        self._plain(key)
        return self._as_written((key,), value)

    def name(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        value = self.text(key, default, required=required)
        if value is not default and not k8s_names.dns1123_label(value):
            raise self.error(
                key,
                f"{value!r} is not a valid name: lower-case letters, digits and "
                "'-', starting and ending with a letter or digit, at most 63",
            )
        return value

    def integer(
        self,
        key: str,
        default: Any = None,
        *,
        required: bool = False,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> Any:
        value = self._get(key, default, required)
        if value is default:
            return value
        self._plain(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected a whole number, got {_kind(value)} {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum} (got {value})")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum} (got {value})")
        return value

    def flag(self, key: str, default: Any = None) -> Any:
        value = self._get(key, default, False)
        if value is not default and not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_kind(value)} {value!r}")
        return value

    def str_list(
        self, key: str, default: Any = None, *, allow_scalar: bool = False, non_empty: bool = False
    ) -> Any:
        value = self._get(key, default, False)
        if value is default:
            return value
        if allow_scalar and isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of strings, got {_kind(value)}")
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise self.doc.error(self.path + (key, i), f"expected a string, got {_kind(item)}")
        value = [self._as_written((key, i), v) for i, v in enumerate(value)]
        if non_empty and (not value or any(not v.strip() for v in value)):
            raise self.error(key, "must not be empty")
        return value

    def str_map(self, key: str, default: Any = None) -> Any:
        value = self._get(key, default, False)
        if value is default:
            return value
        if not isinstance(value, dict):
            raise self.error(key, f"expected a mapping of names to strings, got {_kind(value)}")
        out = {}
        for k, v in value.items():
            if isinstance(v, (dict, list)) or v is None:
                raise self.error(key, f"{k}: expected a string value, got {_kind(v)}")
            out[str(k)] = self._as_written((key, k), v)
        return out

    def quantity(self, key: str, default: Any = None) -> Any:
        value = self._get(key, default, False)
        if value is default:
            return value
        text = value if isinstance(value, bool) else self._as_written((key,), value)
        amount = parse_quantity(text) if isinstance(text, str) else None
        if amount is None:
            raise self.error(key, f"{value!r} is not a Kubernetes quantity (e.g. 8, 500m, 64Gi)")
        if amount < 0:
            raise self.error(key, f"must not be negative (got {value!r})")
        return text

    def resources(
        self,
        key: str,
        default: Any = None,
        *,
        maximum: int | None = None,
        keys: spec_fields.Rule | None = None,
    ) -> Any:
        """Extended resource name (kept to KEYS) -> a whole number (0..MAXIMUM), and
        hugepages-SIZE -> a quantity; each amount as text, an empty one "0"."""
        r = self.child(key)
        if r is None:
            return default
        out = {}
        for name in r.data:
            r._keep(keys, name, (name,))
            if name.startswith("hugepages-"):
                out[name] = r.quantity(name, "0")
            else:
                out[name] = str(r.integer(name, 0, minimum=0, maximum=maximum))
        return out

    def duration(self, key: str, default: Any = None) -> Any:
        """'1h30m', '90s', '2d' or a number of seconds → whole seconds (> 0)."""
        value = self._get(key, default, False)
        if value is default:
            return value
        self._plain(key)
        seconds = parse_duration(value)
        if seconds is None:
            raise self.error(key, f"{value!r} is not a duration (e.g. 90s, 30m, 24h, 1h30m, 2d)")
        if seconds > MAX_SECONDS:
            raise self.error(key, f"{value!r} is longer than {MAX_SECONDS} seconds (68 years)")
        return seconds

    def _plain(self, key: str) -> None:
        """Refuse a number written in a form YAML 1.1 reads other than as decimal."""
        path = self.path + (key,)
        if path in self.doc.not_plain:
            text, read = self.data[key], self.doc.not_plain[path]
            raise self.error(
                key,
                f"{text!r} is not a plain decimal number (YAML 1.1 would read it as {read!r}); "
                "write digits only, without leading zeros, underscores or colons",
            )

    def _as_written(self, rel: Path, value: Any) -> Any:
        """A scalar as the user wrote it (YAML reads `010` as 8 and `12.10` as 12.1)."""
        if isinstance(value, str):
            return value
        return self.doc.written.get(self.path + rel, str(value))

    def list_of_maps(self, key: str) -> list[Fields]:
        value = self._get(key, [], False)
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {_kind(value)}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.doc.error(self.path + (key, i), f"expected a mapping, got {_kind(item)}")
            out.append(Fields(self.doc, self.path + (key, i)))
        return out

    def child(self, key: str) -> Fields | None:
        value = self._get(key, None, False)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"expected a mapping, got {_kind(value)}")
        return Fields(self.doc, self.path + (key,))


def parse_duration(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str) or not _DURATION_TEXT.fullmatch(value):
        return None  # the pattern the job spec's JSON Schema states too: not zero
    text = value.strip(" \t\n\r")
    if text.isdigit():
        return whole_number(text)
    total = 0
    for m in _DURATION_PART.finditer(text):
        n = whole_number(m.group(1))
        if n is None:
            return None
        total += n * _DURATION_SECONDS[m.group(2)]
    return total


def _at(data: Any, path: Path) -> Any:
    for p in path:
        data = data[p]
    return data


def _kind(value: Any) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "nothing",
    }.get(type(value), type(value).__name__)
