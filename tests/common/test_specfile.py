"""The safe spec loader: plain YAML only, every error with file and line."""

import pytest

from gpuctl.common.errors import SpecError
from gpuctl.common.spec_fields import RESOURCES, STRING_MAP, STRINGS, TEXT, Field, Refusal, Rule
from gpuctl.common.specfile import MAX_BYTES, load_yaml, load_yaml_file, parse_duration


def test_lines_are_recorded_for_nested_fields():
    doc = load_yaml("a: 1\nb:\n  c: [x, y]\n  d:\n    - e: 2\n", "f.yaml")
    assert doc.data == {"a": 1, "b": {"c": ["x", "y"], "d": [{"e": 2}]}}
    assert doc.line(("a",)) == 1
    assert doc.line(("b", "c")) == 3
    assert doc.line(("b", "d", 0, "e")) == 5


@pytest.mark.parametrize(
    "text, needle, line",
    [
        ("a: !!python/object/apply:os.system [echo hi]\n", "tag", 1),
        ("x: 1\na: !!python/name:os.system\n", "tag", 2),
        ("a: &x [1, 2]\nb: *x\n", "aliases", 2),
        ("a: 1\na: 2\n", "duplicate key 'a'", 2),
        ("a: [1, 2\n", "not valid YAML", None),
        ("a: 1\n---\nb: 2\n", "one YAML document", None),
        ("? [a, b]\n: 1\n", "plain keys", 1),
        ("base: &b {x: 1}\nd:\n  <<: *b\n", "aliases", 3),
    ],
)
def test_hostile_yaml_is_refused_with_its_line(text, needle, line):
    with pytest.raises(SpecError) as e:
        load_yaml(text, "job.yaml")
    assert needle in str(e.value)
    assert e.value.file == "job.yaml"
    if line:
        assert e.value.line == line


def test_alias_bomb_is_refused_fast():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    with pytest.raises(SpecError, match="aliases"):
        load_yaml("\n".join(lines), "bomb.yaml")


def test_oversized_and_binary_files(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * (MAX_BYTES + 10))
    with pytest.raises(SpecError, match="larger than"):
        load_yaml_file(str(big))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(SpecError, match="UTF-8"):
        load_yaml_file(str(binary))
    with pytest.raises(SpecError, match="cannot read"):
        load_yaml_file(str(tmp_path / "missing.yaml"))
    with pytest.raises(SpecError, match="NUL character"):  # open() raises ValueError
        load_yaml_file("job\x00.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 200 + "]" * 200,
        "a: " + "[" * 100_000 + "]" * 100_000,  # past Python's recursion limit in PyYAML's composer
        "".join("  " * i + "b:\n" for i in range(1000)),
    ],
)
def test_deep_nesting_is_refused(text):
    with pytest.raises(SpecError, match="nesting deeper than 64"):
        load_yaml(text, "deep.yaml")


def test_duplicate_anchor_is_named():
    with pytest.raises(SpecError, match="not valid YAML: found duplicate anchor 'x'"):
        load_yaml("a: &x 1\nb: &x 2\n", "job.yaml")


@pytest.mark.parametrize(
    "value, seconds",
    [
        ("90s", 90),
        ("30m", 1800),
        ("24h", 86400),
        ("1h30m", 5400),
        ("2d", 172800),
        (60, 60),
        ("600", 600),
        ("1x", None),
        ("h", None),
        ("-5s", None),
        (0, None),
        (True, None),
        ("", None),
        ("1h 30m", None),
        (1.5, None),
    ],
)
def test_durations(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    "text, line", [("a: 1\nb: x\x01y\n", 2), ("a: \x00\n", 1), ("a: 1\n\nc: \ufffe\n", 3)]
)
def test_control_characters_are_refused_with_their_line(text, line):
    with pytest.raises(SpecError) as e:
        load_yaml(text, "job.yaml")
    assert "not allowed" in str(e.value) and e.value.line == line


@pytest.mark.parametrize(
    "text, written",
    [
        ("250u", "250u"),
        ("5n", "5n"),
        ("1e3", "1e3"),
        ("010", "010"),
        ("0.50", "0.50"),
        ("-0", "-0"),
    ],
)
def test_quantities_are_kept_as_written(text, written):
    assert load_yaml(f"cpu: {text}\n", "job.yaml").root().quantity("cpu") == written


@pytest.mark.parametrize(
    "text, needle",
    [
        ("-1", "must not be negative"),
        ("-500m", "must not be negative"),
        ("1e99999999999", "not a Kubernetes quantity"),  # the API server reads an int32 exponent
        ("'٣'", "not a Kubernetes quantity"),
        ("true", "not a Kubernetes quantity"),
    ],
)
def test_bad_quantities_are_refused_with_their_line(text, needle):
    with pytest.raises(SpecError) as e:
        load_yaml(f"name: x\ncpu: {text}\n", "job.yaml").root().quantity("cpu")
    assert needle in str(e.value) and e.value.line == 2 and e.value.field == "cpu"


# ---------- the reader keeps each row's rules ----------

WORD = Rule("[a-z]+", "a lower-case word")
KEYS = Rule("[A-Z]+", "an upper-case name", why=lambda k: Refusal(f"{k} shouts not", "a hint")
            if k.islower() else None)  # fmt: skip


def read_error(text: str, row: Field) -> SpecError:
    with pytest.raises(SpecError) as e:
        load_yaml(text, "f.yaml").root().read(row)
    return e.value


@pytest.mark.parametrize(
    "row, text, line, field, message",
    [
        (Field("t", TEXT, "", pattern=WORD), "t: Ab\n", 1, "t", "'Ab' is not a lower-case word"),
        # list items: at the field, or at the item where the row says so
        (Field("l", STRINGS, "", pattern=WORD), "l:\n- a\n- B\n", 1, "l", "'B' is not a"),
        (
            Field("l", STRINGS, "", pattern=WORD, at_entry=True),
            "l:\n- a\n- B\n",
            3,
            "l[1]",
            "'B' is not a lower-case word",
        ),
        # keys and values of a mapping: a value named by its key where the field is blamed
        (Field("m", STRING_MAP, "", keys=KEYS), "m:\n  A: x\n  9: y\n", 1, "m", "'9' is not an"),
        (Field("m", STRING_MAP, "", pattern=WORD), "m:\n  A: x\n  B: Y\n", 1, "m", "B: 'Y' is not"),
        (
            Field("m", STRING_MAP, "", pattern=WORD, at_entry=True),
            "m:\n  A: x\n  B: Y\n",
            3,
            "m.B",
            "'Y' is not a lower-case word",
        ),
        # a rule's why names the part broken; the noun says the rest
        (Field("m", STRING_MAP, "", keys=KEYS), "m: {ab: x}\n", 1, "m", "ab shouts not"),
        (
            Field("r", RESOURCES, "", keys=Rule("[a-z]+/[a-z]+", "a resource name")),
            "r:\n  a/b: 1\n  ab: 2\n",
            3,
            "r.ab",
            "'ab' is not a resource name",
        ),
    ],
)
def test_read_refuses_what_breaks_a_rows_rule_in_its_words(row, text, line, field, message):
    e = read_error(text, row)
    assert (e.file, e.line, e.field) == ("f.yaml", line, field)
    assert message in str(e)


def test_a_why_gives_its_hint_and_a_kept_rule_reads_as_before():
    assert read_error("m: {ab: x}\n", Field("m", STRING_MAP, "", keys=KEYS)).hint == "a hint"
    doc = load_yaml("m: {AB: x}\nr: {a/b: 2, hugepages-2Mi: 1Gi, c/d: }\n", "f.yaml")
    assert doc.root().read(Field("m", STRING_MAP, "", keys=KEYS, pattern=WORD)) == {"AB": "x"}
    resources = Field("r", RESOURCES, "", keys=Rule("[a-z]+/[a-z]+|hugepages-.*", "a name"))
    assert doc.root().read(resources) == {"a/b": "2", "hugepages-2Mi": "1Gi", "c/d": "0"}


def test_a_default_is_not_held_to_the_rule():
    """A default the parser supplies (the cluster's region for the state's) is its own."""
    row = Field("t", TEXT, "", pattern=WORD)
    assert load_yaml("x: 1\n", "f.yaml").root().read(row, "NOT A WORD") == "NOT A WORD"
