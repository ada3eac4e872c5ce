"""The kernel log's GPU error events: NVIDIA Xid (GPU) and SXid (NVSwitch) lines of `dmesg`.

The driver writes one line per event::

    [6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
    [Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout ...
    [6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up

with a monotonic (``dmesg``) or wall-clock (``dmesg --ctime``/``-T``) stamp, or none (journalctl
without stamps). Each of these prefixes may come first, in this order, and is read too:

- ``<3>``: the raw level of ``dmesg -r`` and /dev/kmsg;
- ``kern  :err   : ``: ``dmesg -x`` (``--decode``), facility and level;
- the stamp above, then ``[  T123]`` or ``[    C0]``: the printk caller (``CONFIG_PRINTK_CALLER``),
  the task or CPU that printed;
- ``Feb 23 16:24:18 host kernel: `` or ``2025-02-23T16:24:18+0000 host kernel: ``: journalctl -k
  (``-o short``, ``short-precise``, ``short-iso``; ``short-monotonic`` puts the stamp above first) and
  syslog, whose time becomes the stamp.

Every other line is context (the driver's own dumps, other drivers) and is only counted, never reported
as unparsed: a kernel log is mostly lines no rule reads. A line that names an Xid or SXid but cannot be
read as one (an unknown prefix, a NUL or other control byte in it, a code that is not a number) goes to
``unparsed_lines``: an event nobody read must not pass for none. Shape::

    KernelLog(events=[GpuEvent(kind="xid", code=79, device="0000:91:00", detail="GPU has fallen ...")],
              lines=5)
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed

# The code is at most 5 digits (SXids run to 2xxxx); the device is the PCI address as printed.
_EVENT = re.compile(
    r"^(?:<\d{1,3}>)?"  # dmesg -r: the raw level
    r"(?:[a-z]{2,8} *:[a-z]{3,7} *: ?)?"  # dmesg -x: facility and level
    r"(?:\[(?P<stamp>[^\]]{1,40})\]\s*)?"
    r"(?:\[ *[TC]\d{1,10}\]\s*)?"  # the printk caller: task or CPU
    r"(?:(?:(?P<journal>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"
    r"|\d{4}-\d\d-\d\dT[\d:.,]{8,16}(?:Z|[+-]\d\d:?\d\d)?) )?[\w.-]{1,64} kernel: )?"  # journalctl -k, syslog
    r"(?:(?P<source>[\w-]{1,40}):\s*)?"
    r"(?P<kind>S?Xid)\s*\(PCI:(?P<device>[0-9A-Fa-f:.]{7,16})\):\s*(?P<code>\d{1,5})(?=[,\s]|$),?\s*(?P<detail>.*)$"
)
# What makes a line an Xid or SXid line to read (the collector greps the same words).
_NAMES_EVENT = re.compile(r"Xid\s*\(PCI")
# A control byte but tab: the line is damaged (a NUL from a torn ring buffer read), not an event to trust.
_DAMAGED = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# `pid=..., name=...,` of an Xid line: who ran on the GPU, not what happened.
_XID_PROCESS = re.compile(r"^pid=[^,]*,\s*name=[^,]*,\s*")
_PERMISSION = re.compile(r"Operation not permitted|Permission denied|read kernel buffer failed", re.I)


class GpuEvent(BaseModel):
    """One Xid or SXid line."""

    kind: Literal["xid", "sxid"]
    code: int = Field(description="The Xid or SXid number, e.g. 79 or 20034.")
    device: str = Field(description='The PCI address as printed, e.g. "0000:91:00" or "0000:06:00.0".')
    detail: str = Field(
        description="The rest of the line: the driver's words (and, for SXids, Fatal/Non-fatal)."
    )
    stamp: str | None = Field(None, description="The line's time stamp as printed, if any.")
    source: str | None = Field(None, description='Who printed it, e.g. "NVRM" or "nvidia-nvswitch1".')

    @property
    def fatal(self) -> bool:
        """An SXid the driver calls fatal (Xids carry no such word)."""
        return self.kind == "sxid" and self.detail.lower().startswith("fatal")


class KernelLog(Parsed):
    """The GPU events of a kernel log, and how many lines it had."""

    events: list[GpuEvent] = Field(default_factory=list)
    lines: int = Field(0, description="Non-blank lines read.")
    error: str | None = Field(None, description="What was printed instead of the log (e.g. no permission).")


def parse_kernel_log(text: str) -> KernelLog:
    """Parse `dmesg` (any time-stamp style) or `journalctl -k` output for Xid and SXid events.

    Args:
        text: The log, as printed.

    Returns:
        The events in log order; ``error`` when the only thing printed was a refusal to read the log.
    """
    result = KernelLog()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        result.lines += 1
        if (match := _EVENT.match(line)) and not _DAMAGED.search(line):
            detail = match["detail"].strip()
            if match["kind"] == "Xid":
                detail = _XID_PROCESS.sub("", detail)
            result.events.append(
                GpuEvent(
                    kind="xid" if match["kind"] == "Xid" else "sxid",
                    code=int(match["code"]),
                    device=match["device"].lower(),
                    detail=detail,
                    stamp=match["stamp"] or match["journal"],
                    source=match["source"],
                )
            )
        elif result.lines == 1 and _PERMISSION.search(line):
            result.error = line
        elif _NAMES_EVENT.search(line):
            result.unparsed_lines.append(raw)
    return result
