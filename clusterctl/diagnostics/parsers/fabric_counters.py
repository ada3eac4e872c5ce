"""A node's fabric counters in one command: the fabric interface's byte counters and every HCA port's.

``counter_command(fabric)`` is the POSIX shell text that prints them and ``parse_counter_output``
its parser, a public pair: `clusterctl run` runs the command over SSH before and after each run
(``clusterctl.diagnostics.counter_reading``), and a batch script can print the same counters inside an
allocation. What it prints:

- ``grep -H .`` of ``/sys/class/net/<if>/statistics/tx_bytes`` and ``rx_bytes`` (bytes);
- on InfiniBand/RoCE, ``grep -H .`` of every HCA port's ``port_xmit_data``/``port_rcv_data`` (4-byte
  words), or, where sysfs has none, ``perfquery -x`` of each HCA the inventory lists, each block
  after a ``# clusterctl perfquery <hca>`` line (``-`` when it lists none: the local port);
- on InfiniBand/RoCE, every port's ``link_layer`` and, for every netdev that sits on an HCA (its
  ``device/infiniband_verbs/*/ibdev`` names the HCA, ``dev_port``/``dev_id`` the port, counted from
  0), that file, the two and its byte counters: the IPoIB netdevs of a port, whose bytes the port's
  data counters include (an IB port carries IPoIB as IB packets), so the proof can take them out.

Shape::

    NodeCounters(ports={"eth0": PortBytes(tx=..., rx=...), "mlx5_0:1": PortBytes(...)},
                 netdev_ports={"ib0": "mlx5_0:1"}, link_layers={"mlx5_0:1": "InfiniBand"}, error=None)
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
_IBDEV = re.compile(r"^/sys/class/net/([^/\s]+)/device/infiniband_verbs/[^/\s]+/ibdev:\s*([\w.-]+)\s*$")
_NETDEV_PORT = re.compile(r"^/sys/class/net/([^/\s]+)/(dev_port|dev_id):\s*(0x[0-9a-fA-F]{1,4}|\d{1,5})\s*$")
_LINK_LAYER = re.compile(r"^/sys/class/infiniband/([^/\s]+)/ports/(\d{1,5})/link_layer:\s*(\w+)\s*$")
# Every netdev on an HCA: its HCA, port (dev_port, or dev_id on kernels before 3.15) and byte counters.
_NETDEV_LOOP = (
    'for f in /sys/class/net/*/device/infiniband_verbs/*/ibdev; do [ -r "$f" ] || continue; '
    'n=${f%%/device/*}; grep -H . "$f" "$n/dev_port" "$n/dev_id" "$n/statistics/tx_bytes" '
    '"$n/statistics/rx_bytes" 2>/dev/null; done'
)
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
    netdev_ports: dict[str, str] = Field(
        default_factory=dict, description="Netdevs that sit on an HCA port, e.g. {'ib0': 'mlx5_0:1'}."
    )
    link_layers: dict[str, str] = Field(
        default_factory=dict, description="Per HCA port: its link layer, 'InfiniBand' or 'Ethernet'."
    )
    error: str | None = Field(None, description="Why (part of) the reading is missing, when it is.")

    def ipoib(self, port: str) -> list[str]:
        """The IPoIB netdevs on HCA port ``port``: the netdevs on it when its link layer is InfiniBand.

        A RoCE port's netdev is Ethernet, and mlx5 counts only RoCE in a RoCE port's data counters
        (its vport ``ib_unicast``/``ib_multicast`` octets), so there is nothing to take out there.
        """
        if self.link_layers.get(port) != "InfiniBand":
            return []
        return sorted(n for n, p in self.netdev_ports.items() if p == port)


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
        links = "/sys/class/infiniband/*/ports/*/link_layer"
        parts.append(f"if ls {links} >/dev/null 2>&1; then grep -H . {links} 2>&1; fi")
        parts.append(_NETDEV_LOOP)
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
    netdev: dict[str, dict[str, str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if m := _NET.match(line):
            net.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3))
        elif (m := _IBDEV.match(line)) or (m := _NETDEV_PORT.match(line)):
            found = netdev.setdefault(m.group(1), {})
            if m.re is _IBDEV:
                found["ibdev"] = m.group(2)
            else:
                found[m.group(2)] = m.group(3)
        elif m := _LINK_LAYER.match(line):
            result.link_layers[f"{m.group(1)}:{m.group(2)}"] = m.group(3)
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
    for name, attrs in netdev.items():
        if "ibdev" in attrs:
            index = max(int(attrs.get(key, "0"), 0) for key in ("dev_port", "dev_id"))
            result.netdev_ports[name] = f"{attrs['ibdev']}:{index + 1}"
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
