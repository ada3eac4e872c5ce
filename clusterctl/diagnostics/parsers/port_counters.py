"""InfiniBand port data counters, from `perfquery -x` or from sysfs, as bytes per HCA port.

Both sources count data in 4-byte words (IBA PortCounters/PortCountersExtended; the kernel's
``port_xmit_data``/``port_rcv_data`` follow it), so bytes are the value times 4.

- `perfquery -x` prints one block per port: ``# Port extended counters: Lid 1719 port 1 (CapMask: ...)``
  then ``PortXmitData:....................36298026860928`` lines. It names no device (it asks the
  local HCA, or a LID), so ``device`` is None unless the caller knows it.
- sysfs is read with ``grep -H . /sys/class/infiniband/*/ports/*/counters/port_xmit_data ...``: one
  ``PATH:VALUE`` line per file, the path naming device and port.

Shape::

    PortCounters(ports=[PortCount(device="mlx5_0", port=1, xmit_words=..., rcv_words=...)])
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed

WORD_BYTES = 4  # data counters count 4-byte words
# The sysfs files of every HCA port's two data counters, as a shell glob list.
IB_COUNTER_GLOBS = " ".join(
    f"/sys/class/infiniband/*/ports/*/counters/{name}" for name in ("port_xmit_data", "port_rcv_data")
)

# Digit counts are bounded (port and LID numbers are 16-bit, counters 64-bit): a longer run of digits
# is not a number these tools print, and int() of it could exceed Python's digit limit.
_PQ_HEADER = re.compile(r"^#\s*Port (extended )?counters:.*?\bport\s+(\d{1,5})\b", re.I)
_PQ_LID = re.compile(r"\bLid\s+(\d{1,5})\b")
_PQ_FIELD = re.compile(r"^(\w+):\.*\s*(\S+)\s*$")
_SYSFS = re.compile(
    r"^/sys/class/infiniband/([^/\s]+)/ports/(\d{1,5})/(?:hw_)?counters/(\w+):\s*(\d{1,20})\s*$"
)
_ERROR = re.compile(r"\b(?:ibwarn|iberror|No such file|Permission denied|can't open|failed)\b", re.I)
# The names each source gives the two data counters.
_XMIT = ("PortXmitData", "port_xmit_data")
_RCV = ("PortRcvData", "port_rcv_data")


class PortCount(BaseModel):
    """One HCA port's counters."""

    device: str | None = Field(None, description="HCA, e.g. mlx5_0; None from perfquery.")
    port: int
    lid: int | None = Field(None, description="perfquery: the port's LID.")
    extended: bool = Field(
        True, description="64-bit counters (perfquery -x, sysfs); False: 32-bit, saturate."
    )
    counters: dict[str, int] = Field(default_factory=dict, description="Every counter read, by its name.")

    def _words(self, names: tuple[str, ...]) -> int | None:
        return next((self.counters[n] for n in names if n in self.counters), None)

    @property
    def xmit_bytes(self) -> int | None:
        """Bytes sent (data counter x 4), or None when not read."""
        words = self._words(_XMIT)
        return None if words is None else words * WORD_BYTES

    @property
    def rcv_bytes(self) -> int | None:
        """Bytes received (data counter x 4), or None when not read."""
        words = self._words(_RCV)
        return None if words is None else words * WORD_BYTES


class PortCounters(Parsed):
    """Counters per port, and the first error line when the tool could not read them."""

    ports: list[PortCount] = Field(default_factory=list)
    error: str | None = None


def parse_perfquery(text: str) -> PortCounters:
    """Parse `perfquery -x` (or plain `perfquery`), one or several ports.

    Args:
        text: The output, as printed.

    Returns:
        One entry per ``# Port ... counters`` block; other lines in ``unparsed_lines``.
    """
    result = PortCounters()
    port: PortCount | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _PQ_HEADER.match(line):
            lid = _PQ_LID.search(line)
            port = PortCount(
                port=int(m.group(2)), lid=int(lid.group(1)) if lid else None, extended=bool(m.group(1))
            )
            result.ports.append(port)
        elif port is not None and (m := _PQ_FIELD.match(line)):
            value = m.group(2)
            try:
                port.counters[m.group(1)] = int(value, 16) if value.lower().startswith("0x") else int(value)
            except ValueError:
                result.unparsed_lines.append(raw)
        else:
            _other_line(result, raw)
    return result


def parse_sysfs_counters(text: str) -> PortCounters:
    """Parse ``PATH:VALUE`` lines of /sys/class/infiniband/<dev>/ports/<n>/counters/<name> files.

    Args:
        text: What `grep -H . <counter files>` printed (stdout, or with stderr).

    Returns:
        One entry per device and port; other lines in ``unparsed_lines``.
    """
    result = PortCounters()
    by_port: dict[tuple[str, int], PortCount] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _SYSFS.match(line):
            key = (m.group(1), int(m.group(2)))
            if key not in by_port:
                by_port[key] = PortCount(device=key[0], port=key[1])
                result.ports.append(by_port[key])
            by_port[key].counters[m.group(3)] = int(m.group(4))
        else:
            _other_line(result, raw)
    return result


def _other_line(result: PortCounters, raw: str) -> None:
    """An error line sets ``error`` (the first one); anything else is unparsed."""
    if result.error is None and _ERROR.search(raw):
        result.error = raw.strip()
    else:
        result.unparsed_lines.append(raw)
