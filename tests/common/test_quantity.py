"""Kubernetes quantities: the grammar, exact values, the API server's rounding and cap, the
bounds against hostile input, and the helpers callers use (pure)."""

import math
import time
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuctl.common.quantity import MAX, count, from_api, parse, rounded_down

NANO = Fraction(1, 10**9)
SUFFIXES = {
    "n": NANO,
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


@pytest.mark.parametrize(
    "text, value",
    [
        ("0", 0),
        ("4", 4),
        ("007", 7),
        ("1500m", Fraction(3, 2)),
        ("250u", Fraction(1, 4000)),
        ("5n", 5 * NANO),
        ("64Gi", 64 * 2**30),
        ("1.5Ki", 1536),
        ("0.5Gi", 2**29),
        ("1k", 1000),
        ("1E", 10**18),  # E alone is exa; followed by digits it is an exponent
        ("1E3", 1000),
        ("1e3", 1000),
        ("1e+3", 1000),
        ("1.5e-3", Fraction(3, 2000)),
        ("1e0000000000000000003", 1000),  # leading zeros of an exponent do not count
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("1.G", 10**9),
        ("+3", 3),
        ("-3", -3),
        ("-0", 0),
        ("0e99999", 0),
        ("0" * 10_000 + "1", 1),  # leading zeros do not count towards MAX_DIGITS
        ("1." + "0" * 10_000, 1),  # nor do trailing zeros of the fraction
        # the API server rounds away from zero to a whole nano...
        ("0.5n", NANO),
        ("-0.5n", -NANO),
        ("1.0000000001", 1 + NANO),
        ("1e-2147483648", NANO),
        # ...and caps at the largest int64
        ("8Ei", MAX),
        ("10E", MAX),
        ("-10E", -MAX),
        ("1e2147483647", MAX),
        ("9223372036854775807", MAX),
    ],
)
def test_values(text, value):
    assert parse(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 7",
        "7\n",
        "x",
        "4 GPUs",
        "1.2.3",
        "--1",
        "+-1",
        "1Kb",
        "1K",  # kilo is k; K only starts Ki
        "1ki",
        "1e",
        "1e3.5",
        "1ee3",
        "1e3k",
        "1Ki1",
        "1 k",
        "1_000",
        "0x10",
        "inf",
        "nan",
        # no digit: apimachinery's scanner reads these as 0, its grammar has no such number
        "+",
        "-",
        ".",
        "Ki",
        "e3",
        "-.e3",
        # not ASCII digits: int() and Decimal() read them, the API server does not
        "٣",
        "１",
        "1٣",
        "1e٣",
        # the exponent is an int32
        "1e2147483648",
        "1e-2147483649",
        "0e99999999999",
        # bounded: more than MAX_DIGITS significant digits
        "1" * 101,
        "1" * 1_000_000,
        "0." + "1" * 101,
    ],
)
def test_not_a_quantity(text):
    assert parse(text) is None


def test_hostile_input_is_read_fast():
    start = time.perf_counter()
    for text in (
        "9" * 1_000_000,
        "1e" + "9" * 1_000_000,
        "1e-2147483648",
        "9" * 100 + "e2147483647",
    ):
        parse(text)
    assert time.perf_counter() - start < 1


@pytest.mark.parametrize(
    "value, whole",
    [
        ("4", 4),
        ("0", 0),
        ("1k", 1000),
        ("2Ki", 2048),
        ("1500m", 1),
        ("999m", 0),
        ("1e3", 1000),
        ("2.5", 2),
        ("+3", 3),
        (" 7 ", 7),
        ("1M", 10**6),
        ("5n", 0),  # no n or u before
        ("-1500m", -2),
        (8, 8),
    ],
)
def test_rounded_down(value, whole):
    assert rounded_down(value) == whole


@pytest.mark.parametrize("value", ["", "x", "4 GPUs", "1.2.3", "1Kb", "--1", "٣", None, True])
def test_rounded_down_of_no_quantity(value):
    assert rounded_down(value) is None


@pytest.mark.parametrize(
    "value, n",
    [
        ("4", 4),
        (" 4\n", 4),
        (2, 2),
        (0, 0),
        ("007", 7),
        ("1k", 1000),
        ("+3", 3),
        ("2e0", 2),
        ("1500m", 0),  # not whole: the API server stores none for an extended resource
        ("-1", 0),
        ("x", 0),
        ("", 0),
        ("٣", 0),  # `\d` and int() read it as 3
        ("1" * 5000, 0),  # int() raised past 4300 digits
        (True, 0),
    ],
)
def test_count(value, n):
    assert count(value) == n


# ---------- properties ----------

UNSIGNED = st.from_regex(r"\A([0-9]{1,25}(\.[0-9]{0,12})?|\.[0-9]{1,12})\Z")
QUANTITY_TEXT = st.builds(
    lambda sign, number, suffix: sign + number + suffix,
    st.sampled_from(["", "+", "-"]),
    UNSIGNED,
    st.sampled_from(list(SUFFIXES)) | st.from_regex(r"\A[eE][+-]?[0-9]{1,4}\Z"),
)


def exact(number: str) -> Fraction:
    whole, _, fraction = number.partition(".")
    return Fraction(
        int(whole or "0") * 10 ** len(fraction) + int(fraction or "0"), 10 ** len(fraction)
    )


def as_api_server(value: Fraction) -> Fraction:
    """Rounded away from zero to a nano, capped at MAX."""
    nanos = min(math.ceil(abs(value) / NANO), MAX * 10**9)
    return (-1 if value < 0 else 1) * nanos * NANO


@given(st.text() | st.text(alphabet="0123456789.+-eEinumkKMGTP٣ \n", max_size=30))
def test_any_text_is_a_quantity_or_none(text):
    value = parse(text)
    assert value is None or (
        isinstance(value, Fraction) and value % NANO == 0 and abs(value) <= MAX
    )


@given(UNSIGNED, st.sampled_from(list(SUFFIXES)))
def test_value_is_the_number_times_its_suffix(number, suffix):
    assert parse(number + suffix) == as_api_server(exact(number) * SUFFIXES[suffix])


@given(UNSIGNED, st.integers(-40, 40), st.sampled_from("eE"))
def test_exponent_moves_the_decimal_point(number, power, e):
    assert parse(f"{number}{e}{power}") == as_api_server(exact(number) * Fraction(10) ** power)


@given(QUANTITY_TEXT.filter(lambda t: t[0] not in "+-"))
def test_signs(text):
    assert parse("+" + text) == parse(text)
    assert parse("-" + text) == -parse(text)


@given(st.integers(-MAX * 10**9, MAX * 10**9))
def test_every_nano_value_reads_back_from_its_decimal_text(nanos):
    value = nanos * NANO
    whole, fraction = divmod(abs(nanos), 10**9)
    text = f"{'-' if nanos < 0 else ''}{whole}.{fraction:09d}"
    assert parse(text) == parse(f"{nanos}n") == parse(f"{nanos}e-9") == value


@given(QUANTITY_TEXT, st.sampled_from(["", " ", "\n", "\t "]), st.sampled_from(["", " ", "\n"]))
def test_from_api_ignores_surrounding_space(text, before, after):
    assert from_api(before + text + after) == parse(text)


@given(QUANTITY_TEXT, st.integers(0, 30), st.characters(min_codepoint=128))
def test_a_character_outside_ascii_is_never_read(text, at, char):
    at = min(at, len(text))
    assert parse(text[:at] + char + text[at:]) is None
