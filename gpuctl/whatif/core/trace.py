"""Nodes and pods to replay, and the openb CSV format they come in. Pure: parses text it is
given; every error names the file, the line and the field.

The format is that of Alibaba's openb GPU trace (alibaba/clusterdata,
cluster-trace-gpu-v2023, used by the FGD paper's artifact):
- nodes: `sn, cpu_milli, memory_mib, gpu, model`
- pods:  `name, cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec]`; `gpu_milli` is the
  share of each GPU (1000 = a whole GPU), `gpu_spec` an optional `|`-separated list of the
  GPU models the pod may run on. Other columns (qos, times…) are read past.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gpuctl.common.errors import SpecError
from gpuctl.common.numbers import whole_number

MILLI = 1000  # a whole GPU, in thousandths
MAX_GPUS = 64  # per node and per pod: far above any server, small enough to hold as a table
MAX_CPU_MILLI = 10**12
MAX_MEMORY_MIB = 2**40  # an exbibyte; more would overflow the replay's 64-bit arithmetic

# The most rows a trace may hold: far above any cluster (and Alibaba's openb trace, 1,523
# nodes and 8,152 pods), low enough that a wrong or hostile file is refused while it is
# read, in bounded memory, instead of filling it.
MAX_NODES = 100_000
MAX_PODS = 200_000

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


@dataclass(frozen=True)
class Node:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # "" when unknown: only pods that accept any model run there


@dataclass(frozen=True)
class Pod:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_milli: int  # the share of each GPU: 1..1000, and 1000 when gpus > 1; 0 without GPUs
    gpu_models: tuple[str, ...] = ()  # the models it may run on; () = any

    @property
    def gpu_request(self) -> int:
        """The GPU it asks for in all, in thousandths of a GPU."""
        return self.gpus * self.gpu_milli


def parse_nodes(text: str | Iterable[str], file: str) -> list[Node]:
    """The nodes of a CSV given whole or as lines (a file read while it is parsed)."""
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for line, row in rows(text, file, NODE_COLUMNS, MAX_NODES):
        name = row["sn"].strip()
        if not name:
            raise SpecError("empty node name", file=file, line=line, field="sn")
        if name in seen:
            raise SpecError(
                f"node {name!r} is listed twice (first on line {seen[name]})",
                file=file,
                line=line,
                field="sn",
            )
        seen[name] = line
        nodes.append(
            Node(
                name,
                whole(row, "cpu_milli", MAX_CPU_MILLI, file, line),
                whole(row, "memory_mib", MAX_MEMORY_MIB, file, line),
                whole(row, "gpu", MAX_GPUS, file, line),
                row["model"].strip(),
            )
        )
    if not nodes:
        raise SpecError("no nodes in the file", file=file)
    return nodes


def parse_pods(text: str | Iterable[str], file: str) -> list[Pod]:
    """The pods of a CSV given whole or as lines (a file read while it is parsed)."""
    pods = []
    for line, row in rows(text, file, POD_COLUMNS, MAX_PODS):
        gpus = whole(row, "num_gpu", MAX_GPUS, file, line)
        milli = whole(row, "gpu_milli", MILLI, file, line)
        if gpus == 0 and milli:
            raise SpecError(
                f"{milli} with num_gpu 0: a pod without GPUs has no share of one",
                file=file,
                line=line,
                field="gpu_milli",
            )
        if gpus and not milli:
            raise SpecError(
                "0: a pod with GPUs needs a share of each, 1 to 1000 (1000 = a whole GPU)",
                file=file,
                line=line,
                field="gpu_milli",
            )
        if gpus > 1 and milli != MILLI:
            raise SpecError(
                f"{milli} with num_gpu {gpus}: a pod with several GPUs takes them whole (1000)",
                file=file,
                line=line,
                field="gpu_milli",
            )
        models = tuple(m.strip() for m in (row.get("gpu_spec") or "").split("|") if m.strip())
        pods.append(
            Pod(
                row["name"].strip(),
                whole(row, "cpu_milli", MAX_CPU_MILLI, file, line),
                whole(row, "memory_mib", MAX_MEMORY_MIB, file, line),
                gpus,
                milli,
                models,
            )
        )
    if not pods:
        raise SpecError("no pods in the file", file=file)
    return pods


def rows(
    text: str | Iterable[str], file: str, required: tuple[str, ...], most: int
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, {column: value}) for each data row, as it is read; the header must name the
    required columns; at most MOST rows; a NUL byte is refused (no CSV holds one)."""
    lines = text.splitlines(keepends=True) if isinstance(text, str) else text
    reader = csv.reader(_checked(lines, file), strict=True)
    header: list[str] | None = None
    rows = 0
    try:
        for fields in reader:
            line = reader.line_num
            if not any(f.strip() for f in fields):
                continue  # a blank line
            if header is None:
                header = [f.strip() for f in fields]
                twice = sorted({h for h in header if header.count(h) > 1})
                if twice:
                    raise SpecError("column named twice", file=file, line=line, field=twice[0])
                for name in required:
                    if name not in header:
                        raise SpecError(
                            f"missing column (the header has: {', '.join(header)})",
                            file=file,
                            line=line,
                            field=name,
                        )
                continue
            if len(fields) != len(header):
                raise SpecError(
                    f"{len(fields)} fields where the header has {len(header)}",
                    file=file,
                    line=line,
                )
            rows += 1
            if rows > most:
                raise SpecError(f"more than {most:,} rows: more than gpuctl replays", file=file)
            yield line, dict(zip(header, fields))
    except csv.Error as e:
        raise SpecError(f"not CSV: {e}", file=file, line=reader.line_num) from None
    if header is None:
        raise SpecError(f"empty: expected a header ({', '.join(required)})", file=file)


def _checked(lines: Iterable[str], file: str) -> Iterator[str]:
    for number, line in enumerate(lines, 1):
        if number == 1:
            line = line.removeprefix("\ufeff")
        if "\0" in line:
            raise SpecError("a NUL byte: not a CSV text file", file=file, line=number)
        yield line


def whole(row: dict[str, str], column: str, most: int, file: str, line: int) -> int:
    value = whole_number(row[column].strip())
    if value is None or value > most:
        raise SpecError(
            f"{row[column]!r} is not a whole number from 0 to {most}",
            file=file,
            line=line,
            field=column,
        )
    return value
