"""NCCL debug log (NCCL_DEBUG=INFO/WARN): which network transport was used, whether GPUDirect RDMA
was, which HCAs, and the warnings and failures.

``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ...`` lists the HCAs NCCL may use on that host (after
NCCL_IB_HCA), ``NET/Socket : Using`` the TCP fallback NCCL takes silently when the verbs libraries or
/dev/infiniband are missing (horovod#288). Which HCAs carry traffic is on the channel lines:
``Channel 03/0 : 8[0] -> 3[3] [send] via NET/IB/4/GDRDMA`` (``Ring`` before NCCL 2.6, ``NET/IBext_v8/4``
with a net plugin) goes through device 4 of that host's list, with GPUDirect RDMA when ``/GDRDMA``
follows. The host is the ``host:pid:tid`` prefix NCCL puts on every line.
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed, split_tag

_NCCL_LINE = re.compile(r"\bNCCL (INFO|WARN)\b\s?(.*)$")
_IB_USING = re.compile(r"NET/IB\s*:\s*Using\s+(.*?)(?:\s*;\s*OOB.*)?$")
_SOCKET_USING = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)$")
_HCA = re.compile(r"\[(\d+)\]([\w.-]+:\d+)")
# `host:pid:tid [cudaDev] NCCL ...`: the host whose devices a line speaks of.
_HOST = re.compile(r"^\s*(?:\[\d+\]\s*)?([^\s:\[\]]+):\d+:\d+\s+\[\d+\]\s*$")
# A channel (ring) that crosses the network: the net's name, the device index, whether GDRDMA.
_NET_CHANNEL = re.compile(
    r"\b(?:Channel|Ring)\s+\d+(?:/\d+)?\s*:.*\bvia NET/(\w+)/(\d+)(?:\(\d+\))?(/GDRDMA)?"
)
_GDR = re.compile(r"via NET/\w+/\d+/GDRDMA|GPU Direct RDMA Enabled|GDRDMA")
_VERSION = re.compile(r"NCCL version\s+v?([\d.]+(?:\+\S+)?)")
_FAILURE = re.compile(r"NCCL (?:failure|error)\b|RuntimeError: NCCL|ncclSystemError|unhandled \w+ error")


class NcclLog(Parsed):
    """Facts read from an NCCL log."""

    transport: str | None = Field(None, description='"IB", "Socket", or None when neither was reported.')
    gdr: bool = Field(False, description="A channel used GPUDirect RDMA (GDRDMA).")
    hcas: list[str] = Field(
        default_factory=list,
        description='HCA ports NCCL listed as usable (NET/IB : Using), e.g. ["mlx5_0:1"].',
    )
    hcas_used: dict[str, list[str]] = Field(
        default_factory=dict,
        description='Per host ("" when the lines carry none): the HCA ports its network channels went '
        "through, named from that host's NET/IB : Using list, else 'NET/<net>/<index>'.",
    )
    net_channels: int = Field(0, description="Channel lines over an IB-type net (NET/IB, NET/IBext...).")
    gdr_channels: int = Field(0, description="Of those, the ones that say /GDRDMA.")
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
    devices: dict[str, dict[str, str]] = {}  # host -> device index -> HCA port, from its Using line
    channel_devices: dict[str, list[tuple[str, str]]] = {}  # host -> (net, device index) its channels used
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
        host = _HOST.match(line[: match.start()])
        _read_message(result, level, message.strip(), host.group(1) if host else "", devices)
        if level == "INFO" and (channel := _NET_CHANNEL.search(message)) and channel.group(1) != "Socket":
            net, index, gdr = channel.groups()
            used = channel_devices.setdefault(host.group(1) if host else "", [])
            if (net, index) not in used:
                used.append((net, index))
            result.net_channels += 1
            result.gdr_channels += bool(gdr)
    for host, used in channel_devices.items():
        names = devices.get(host) or (next(iter(devices.values())) if len(devices) == 1 else {})
        result.hcas_used[host] = [names.get(index, f"NET/{net}/{index}") for net, index in used]
    if result.hcas or result.net_channels:
        result.transport = "IB"
    elif result.socket_interfaces:
        result.transport = "Socket"
    return result


def _read_message(
    result: NcclLog, level: str, message: str, host: str, devices: dict[str, dict[str, str]]
) -> None:
    if level == "WARN":
        result.warnings.append(message)
        result.errors.append(message)
        return
    if m := _IB_USING.search(message):
        listed = _HCA.findall(m.group(1))
        result.hcas.extend(h for _, h in listed if h not in result.hcas)
        # A net plugin (NET/IBext...) numbers the devices of this list the same way.
        devices.setdefault(host, {}).update({index: port for index, port in listed})
    elif m := _SOCKET_USING.search(message):
        names = re.findall(r"\[\d+\]([\w.-]+):", m.group(1))
        result.socket_interfaces.extend(n for n in names if n not in result.socket_interfaces)
    elif "NET/IB" in message and "No device found" in message:
        result.ib_no_device = True
    if _GDR.search(message):
        result.gdr = True
