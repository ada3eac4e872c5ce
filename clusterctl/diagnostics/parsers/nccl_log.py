"""NCCL debug log (NCCL_DEBUG=INFO/WARN): which network transport was used, whether GPUDirect RDMA
was, which HCAs, and the warnings and failures.

``NET/IB : Using [0]mlx5_0:1/IB`` means InfiniBand verbs, ``NET/Socket : Using`` the TCP fallback
NCCL takes silently when the verbs libraries or /dev/infiniband are missing (horovod#288);
``via NET/IB/0/GDRDMA`` on a channel line means GPUDirect RDMA.
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed, split_tag

_NCCL_LINE = re.compile(r"\bNCCL (INFO|WARN)\b\s?(.*)$")
_IB_USING = re.compile(r"NET/IB\s*:\s*Using\s+(.*?)(?:\s*;\s*OOB.*)?$")
_SOCKET_USING = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)$")
_HCA = re.compile(r"\[\d+\]([\w.-]+:\d+)")
_GDR = re.compile(r"via NET/\w+/\d+/GDRDMA|GPU Direct RDMA Enabled|GDRDMA")
_VERSION = re.compile(r"NCCL version\s+v?([\d.]+(?:\+\S+)?)")
_FAILURE = re.compile(r"NCCL (?:failure|error)\b|RuntimeError: NCCL|ncclSystemError|unhandled \w+ error")


class NcclLog(Parsed):
    """Facts read from an NCCL log."""

    transport: str | None = Field(None, description='"IB", "Socket", or None when neither was reported.')
    gdr: bool = Field(False, description="A channel used GPUDirect RDMA (GDRDMA).")
    hcas: list[str] = Field(default_factory=list, description='HCA ports NCCL used, e.g. ["mlx5_0:1"].')
    socket_interfaces: list[str] = Field(default_factory=list, description="Interfaces of NET/Socket.")
    ib_no_device: bool = Field(False, description="`NET/IB : No device found.` was printed.")
    nccl_version: str | None = None
    warnings: list[str] = Field(default_factory=list, description="NCCL WARN messages.")
    errors: list[str] = Field(default_factory=list, description="WARN messages and NCCL failures.")


def parse_nccl_log(text: str) -> NcclLog:
    """Parse an NCCL debug log, alone or mixed into a benchmark's output (rank tags allowed).

    Args:
        text: The log, as printed.

    Returns:
        Transport, GDR, HCAs, version and errors; non-NCCL lines go to ``unparsed_lines``.
    """
    result = NcclLog()
    for raw in text.splitlines():
        _, line = split_tag(raw)
        if not line.strip():
            continue
        if m := _VERSION.search(line):
            result.nccl_version = m.group(1)
        match = _NCCL_LINE.search(line)
        if match is None:
            if _FAILURE.search(line):
                result.errors.append(line.strip())
            elif not _VERSION.search(line):
                result.unparsed_lines.append(raw)
            continue
        level, message = match.groups()
        _read_message(result, level, message.strip())
    if result.hcas:
        result.transport = "IB"
    elif result.socket_interfaces:
        result.transport = "Socket"
    return result


def _read_message(result: NcclLog, level: str, message: str) -> None:
    if level == "WARN":
        result.warnings.append(message)
        result.errors.append(message)
        return
    if m := _IB_USING.search(message):
        result.hcas.extend(h for h in _HCA.findall(m.group(1)) if h not in result.hcas)
    elif m := _SOCKET_USING.search(message):
        names = re.findall(r"\[\d+\]([\w.-]+):", m.group(1))
        result.socket_interfaces.extend(n for n in names if n not in result.socket_interfaces)
    elif "NET/IB" in message and "No device found" in message:
        result.ib_no_device = True
    if _GDR.search(message):
        result.gdr = True
