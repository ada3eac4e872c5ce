"""A node's fabric counters in one command: the fabric interface's byte counters and every HCA port's.

``counter_command(fabric)`` is the POSIX shell text that prints them and ``parse_counter_output``
its parser, a public pair: `clusterctl run` runs the command over SSH before and after each run
(``clusterctl.results.counter_reading``), and a batch script can print the same counters inside an
allocation. What it prints:

- ``grep -H .`` of ``/sys/class/net/<if>/statistics/tx_bytes`` and ``rx_bytes`` (bytes);
- on InfiniBand/RoCE, ``grep -H .`` of every HCA port's ``port_xmit_data``/``port_rcv_data`` (4-byte
  words), or, where sysfs has none, ``perfquery -x`` of each HCA the inventory lists, each block
  after a ``# clusterctl perfquery <hca>`` line (``-`` when it lists none: the local port).

Shape::

    NodeCounters(ports={"eth0": PortBytes(tx=..., rx=...), "mlx5_0:1": PortBytes(...)}, error=None)
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.parsers.port_counters import (
    IB_COUNTER_GLOBS,
    WORD_BYTES,
    PortCount,
    parse_perfquery,
    parse_sysfs_counters,
)
from clusterctl.inventory import FabricSpec

# 32-bit IB data counters stop at this many words (about 17 GB): a delta is then unknown.
SATURATED_WORDS = 2**32 - 1
_PERFQUERY_MARK = "# clusterctl perfquery"
_NET = re.compile(r"^/sys/class/net/([^/\s]+)/statistics/(tx_bytes|rx_bytes):\s*(\d{1,20})\s*$")
_MISSING = re.compile(r"No such file or directory|not installed|Permission denied", re.I)


class PortBytes(BaseModel):
    """Bytes sent and received by one port or interface (a counter reading, or the difference of two)."""

    tx: int = Field(description="Bytes sent.")
    rx: int = Field(description="Bytes received.")


class NodeCounters(Parsed):
    """One node's reading: bytes by port (``mlx5_0:1`` for an HCA port, ``eth0`` for an interface)."""

    ports: dict[str, PortBytes] = Field(default_factory=dict)
    saturated: list[str] = Field(
        default_factory=list, description="Ports whose 32-bit data counters are stuck at their maximum."
    )
    error: str | None = Field(None, description="Why (part of) the reading is missing, when it is.")


def counter_command(fabric: FabricSpec) -> str:
    """The POSIX shell command that prints a node's fabric counters (stderr merged into stdout).

    Ethernet: the interface's two byte counters. InfiniBand/RoCE: also every HCA port's data counters
    from sysfs, or, where sysfs has none, ``perfquery -x`` of each HCA the inventory lists (each
    block after a ``# clusterctl perfquery <hca>`` line), or of the local port when it lists none.
    """
    interface = shlex.quote(fabric.interface)
    net = " ".join(f"/sys/class/net/{interface}/statistics/{name}" for name in ("tx_bytes", "rx_bytes"))
    parts = [f"grep -H . {net} 2>&1"]
    if fabric.kind != "ethernet":
        perfquery = []
        for hca in fabric.hca or [""]:
            device, _, port = hca.partition(":")
            where = (
                f" -C {shlex.quote(device)}" + (f" -P {shlex.quote(port)}" if port else "") if device else ""
            )
            mark = shlex.quote(f"{_PERFQUERY_MARK} {hca or '-'}")
            perfquery.append(f"echo {mark}; perfquery -x{where} 2>&1")
        parts.append(
            f"if ls {IB_COUNTER_GLOBS} >/dev/null 2>&1; then grep -H . {IB_COUNTER_GLOBS} 2>&1; "
            "elif command -v perfquery >/dev/null 2>&1; then " + "; ".join(perfquery) + "; "
            "else echo 'perfquery: not installed, and no HCA counters in sysfs'; fi"
        )
    return "; ".join(parts)


def parse_counter_output(text: str) -> NodeCounters:
    """Parse what ``counter_command`` printed on one node. Never raises.

    Args:
        text: the command's output (stdout with stderr merged).

    Returns:
        Bytes by port; the first line saying a file or tool is missing in ``error``; other lines in
        ``unparsed_lines``.
    """
    result = NodeCounters()
    net: dict[str, dict[str, int]] = {}
    sysfs: list[str] = []
    perfquery: dict[str, list[str]] = {}
    block: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if m := _NET.match(line):
            net.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3))
        elif line.startswith(_PERFQUERY_MARK):
            block = perfquery.setdefault(line.removeprefix(_PERFQUERY_MARK).strip(), [])
        elif block is not None:
            block.append(raw)
        elif line.startswith("/sys/class/infiniband/"):
            sysfs.append(raw)
        elif line:
            _other_line(result, raw)
    for name, values in net.items():
        if {"tx_bytes", "rx_bytes"} <= values.keys():
            result.ports[name] = PortBytes(tx=values["tx_bytes"], rx=values["rx_bytes"])
    _add_ports(result, parse_sysfs_counters("\n".join(sysfs)).ports)
    for hca, lines in perfquery.items():
        parsed = parse_perfquery("\n".join(lines))
        device = None if hca == "-" else hca.partition(":")[0]
        _add_ports(result, [p.model_copy(update={"device": device}) for p in parsed.ports])
        if parsed.error and result.error is None:
            result.error = parsed.error
        result.unparsed_lines += parsed.unparsed_lines
    return result


def _add_ports(result: NodeCounters, ports: Sequence[PortCount]) -> None:
    for port in ports:
        name = f"{port.device or 'port'}:{port.port}"
        if port.xmit_bytes is None or port.rcv_bytes is None:
            result.unparsed_lines.append(f"{name}: only one of the two data counters was read")
            continue
        result.ports[name] = PortBytes(tx=port.xmit_bytes, rx=port.rcv_bytes)
        if SATURATED_WORDS in (port.xmit_bytes // WORD_BYTES, port.rcv_bytes // WORD_BYTES):
            result.saturated.append(name)


def _other_line(result: NodeCounters, raw: str) -> None:
    if result.error is None and _MISSING.search(raw):
        result.error = raw.strip()
    else:
        result.unparsed_lines.append(raw)
