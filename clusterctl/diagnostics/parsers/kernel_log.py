"""The kernel log's GPU error events: NVIDIA Xid (GPU) and SXid (NVSwitch) lines of `dmesg`.

The driver writes one line per event::

    [6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
    [Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout ...
    [6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up

with a monotonic (``dmesg``) or wall-clock (``dmesg --ctime``/``-T``) stamp, or none (journalctl
without stamps). Every other line is context (the driver's own dumps, other drivers) and is only
counted, never reported as unparsed: a kernel log is mostly lines no rule reads. Shape::

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
    r"^(?:\[(?P<stamp>[^\]]{1,40})\]\s*)?(?:(?P<source>[\w-]{1,40}):\s*)?"
    r"(?P<kind>S?Xid)\s*\(PCI:(?P<device>[0-9A-Fa-f:.]{7,16})\):\s*(?P<code>\d{1,5})\b,?\s*(?P<detail>.*)$"
)
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
        if match := _EVENT.match(line):
            detail = match["detail"].strip()
            if match["kind"] == "Xid":
                detail = _XID_PROCESS.sub("", detail)
            result.events.append(
                GpuEvent(
                    kind="xid" if match["kind"] == "Xid" else "sxid",
                    code=int(match["code"]),
                    device=match["device"].lower(),
                    detail=detail,
                    stamp=match["stamp"],
                    source=match["source"],
                )
            )
        elif result.lines == 1 and _PERMISSION.search(line):
            result.error = line
    return result
