"""Every option's value is checked as the command line is parsed: a bad one is a usage
error (exit 2) naming the option, before anything is read or sent. Walks the command tree
gpuctl runs and feeds each number, duration and list option what people and scripts get
wrong. No cluster, Prometheus or driver is configured (tests/conftest.py), and these are
fast tests, which may start no process and open no server port: an error about any of those
instead of the option means the value went unchecked towards one."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpuctl import app
from gpuctl.cli import options

BAD_NUMBERS = ["nan", "inf", "-inf", "-1", "1e400", ""]
BAD_DURATIONS = ["nan", "inf", "-1", "1e400", "", "0", "5x", "99999999999d"]
BAD_LISTS = ["a,,b", "a,", ",", ""]
NUMBER_TYPES = {"integer", "float", "integer range", "float range"}
# Names an option that takes an amount of time has; its value is a DURATION (a Prometheus
# duration, or a spec file's) or a number of SECONDS.
TIME_LIKE = re.compile(r"(window|step|[a-z]-for|every|interval|period|timeout|delay)$")


def _tree() -> dict[str, Any]:
    """Every command by its path, groups too (`reclaim` runs and takes options itself)."""
    out: dict[str, Any] = {}

    def walk(cmd, path: list[str]) -> None:
        out[" ".join(path)] = cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(app.command(built=True), [])
    return out


COMMANDS = _tree()


def _options(kind) -> list[tuple[str, str]]:
    """(command, option) of every visible option of that kind, in the tree's order."""
    return [
        (name, next(o for o in [*p.opts, ""] if o.startswith("--")) or p.opts[0])
        for name, cmd in COMMANDS.items()
        for p in cmd.params
        if p.param_type_name == "option" and not p.is_flag and kind(p)
    ]


def _number(p) -> bool:
    return p.type.name in NUMBER_TYPES


def _duration(p) -> bool:
    return p.metavar == "DURATION"


def _list(p) -> bool:
    return getattr(p.callback, "__qualname__", "").startswith("listed.")


def _rejected(cli, command: str, flag: str, value: str) -> None:
    r = cli(*command.split(), flag, value)  # the option first: it is what is checked first
    assert r.code == 2, (command, flag, value, r)
    first = r.err.splitlines()[0]
    assert flag in first and "Traceback" not in r.err, (command, flag, value, r)
    assert not re.search(r"kube|cluster|Prometheus URL|driver|cannot reach", first), r


@pytest.mark.parametrize("command, flag", _options(_number))
def test_a_number_that_is_none_or_out_of_range_exits_2(cli, command, flag):
    for value in BAD_NUMBERS:
        _rejected(cli, command, flag, value)


@pytest.mark.parametrize("command, flag", _options(_duration))
def test_a_duration_that_is_none_or_out_of_range_exits_2(cli, command, flag):
    for value in BAD_DURATIONS:
        if value == "0" and command == "alerts render" and flag.endswith("-for"):
            continue  # a rule's `for: 0` fires at once, as Prometheus reads it
        _rejected(cli, command, flag, value)


@pytest.mark.parametrize("command, flag", _options(_list))
def test_a_list_with_an_empty_element_exits_2(cli, command, flag):
    for value in BAD_LISTS:
        if value.strip(",") == "" and flag.startswith("--exporter-"):
            # an empty value says "no names" (none of the defaults); "," is one empty element
            if value == "":
                continue
        _rejected(cli, command, flag, value)


def test_each_kind_is_found_where_expected():
    """The walk sees the options it is meant to (so the tests above cannot pass on none)."""
    assert {("submit", "--timeout"), ("top", "--delay"), ("whatif", "--demand")} <= set(
        _options(_number)
    )
    assert {("top", "--window"), ("advise", "--window"), ("reclaim", "--idle-for")} <= set(
        _options(_duration)
    )
    assert {("doctor", "--node"), ("whatif", "--seeds"), ("mig configure", "--gpus")} <= set(
        _options(_list)
    )


def test_every_option_for_an_amount_of_time_is_a_duration_or_seconds():
    loose = [
        (command, flag)
        for command, flag in _options(lambda p: TIME_LIKE.search(p.name.replace("_", "-")))
        if (command, flag) not in _options(_duration) + _options(_number)
    ]
    assert loose == []


def test_a_list_keeps_its_values_and_names_the_bad_one():
    assert options.comma_list(" a, b ", "--x") == ["a", "b"]
    with pytest.raises(Exception, match=r"--x 'a,1': '1' is not a letter"):
        options.comma_list("a,1", "--x", lambda v: None if v.isalpha() else "is not a letter")
