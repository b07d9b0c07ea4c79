"""How `gpuctl nodes` shows the inventory: a table (one row per kind of accelerator, the wide
one with memory, partition, sharing, unhealthy devices and product), or the JSON/YAML
document of docs/nodes.md; each node's problems on stderr. CLI side (rich)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuctl.cli.output import dump, echo, inform, new_table, out_console
from gpuctl.gpus.accelerators import Accelerator, NodeInventory
from gpuctl.nodes.core.domains import domains, levels

COLUMNS = ("NODE", "VENDOR", "MODEL", "COUNT", "ALLOCATED", "FREE", "SOURCE", "RESOURCE")
WIDE = ("MEMORY", "PARTITION", "SHARING", "UNHEALTHY", "PRODUCT")
GIB = 1 << 30


def document(found: Sequence[NodeInventory], topology: bool = False) -> dict:
    """The document `-o json|yaml` prints (docs/nodes.md); with TOPOLOGY, the domains too."""
    out: dict = {"nodes": [n.to_dict() for n in found]}
    if topology:
        out["topology"] = {
            "levels": levels(found),
            "domains": [d.to_dict() for d in domains(found)],
        }
    return out


def show(found: Sequence[NodeInventory], output: str, everything: bool, topology: bool) -> None:
    if output in ("json", "yaml"):
        echo(dump(document(found, topology), output))
        return
    if topology:
        _domain_table(found)
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


_NUMBERS = {"COUNT", "ALLOCATED", "FREE", "MEMORY", "UNHEALTHY", "NODES", "FREE NODES"}
DOMAIN_COLUMNS = ("LEVEL", "DOMAIN", "NODES", "FREE NODES", "VENDOR", "MODEL", "RESOURCE")


def _domain_table(found: Sequence[NodeInventory]) -> None:
    """Per domain of each topology label: its nodes, the whole free ones, and its
    accelerators allocated and free."""
    table = new_table()
    for column in (*DOMAIN_COLUMNS, "COUNT", "ALLOCATED", "FREE"):
        table.add_column(column, justify="right" if column in _NUMBERS else "left")
    rows = domains(found)
    for d in rows:
        level = f"{d.name} ({d.key})" if d.name else d.key
        for p in d.pools or (None,):
            kind = [p.vendor, p.model or "-", p.resource or "-"] if p else ["-"] * 3
            numbers = [str(p.count), str(p.allocated), str(p.free)] if p else ["0"] * 3
            table.add_row(
                level, d.value, str(len(d.nodes)), str(len(d.free_nodes)), *kind, *numbers
            )
    if rows:
        out_console().print(table, markup=False, highlight=False)
    else:
        inform("no topology labels on these nodes (docs/topology.md names those gpuctl reads)")


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
