"""How `gpuctl nodes` shows the inventory: a table (one row per kind of accelerator, the wide
one with memory, partition, sharing, unhealthy devices and product), or the JSON/YAML
document of docs/nodes.md; each node's problems on stderr. CLI side (rich)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuctl.cli.output import dump, echo, inform, new_table, out_console
from gpuctl.gpus.accelerators import Accelerator, NodeInventory

COLUMNS = ("NODE", "VENDOR", "MODEL", "COUNT", "ALLOCATED", "FREE", "SOURCE", "RESOURCE")
WIDE = ("MEMORY", "PARTITION", "SHARING", "UNHEALTHY", "PRODUCT")
GIB = 1 << 30


def document(found: Sequence[NodeInventory]) -> dict:
    """The document `-o json|yaml` prints (docs/nodes.md)."""
    return {"nodes": [n.to_dict() for n in found]}


def show(found: Sequence[NodeInventory], output: str, everything: bool) -> None:
    if output in ("json", "yaml"):
        echo(dump(document(found), output))
        return
    wide = output == "wide"
    table = new_table()
    for column in COLUMNS + (WIDE if wide else ()):
        table.add_column(column, justify="right" if column in _NUMBERS else "left")
    for node in found:
        for a in node.accelerators or (None,):
            table.add_row(node.name, *_cells(a, wide))
    if found:
        out_console().print(table, markup=False, highlight=False)
    else:
        inform("no nodes" if everything else "no accelerator nodes (--all lists every node)")
    for node in found:
        for problem in node.problems:
            inform(f"{node.name}: {problem}")


_NUMBERS = {"COUNT", "ALLOCATED", "FREE", "MEMORY", "UNHEALTHY"}


def _cells(a: Accelerator | None, wide: bool) -> list[str]:
    if a is None:  # a node without accelerators (--all)
        return ["-"] * (len(COLUMNS) - 1 + (len(WIDE) if wide else 0))
    cells = [
        a.vendor,
        a.model or "-",
        str(a.count),
        str(a.allocated),
        str(a.free),
        a.source,
        a.resource or a.device_class or "-",
    ]
    if wide:
        sharing = f"{a.sharing} ×{a.replicas}" if a.sharing else "-"
        cells += [
            _gib(a.memory_bytes),
            a.partition or "-",
            sharing,
            str(a.unhealthy),
            a.product or "-",
        ]
    return cells


def _gib(size: int | None) -> str:
    """Bytes as GiB, one decimal where it is not whole: 80Gi, 4.8Gi."""
    if not size:
        return "-"
    return f"{round(size / GIB, 1):g}Gi"
