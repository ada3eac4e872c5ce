"""`ibstat` (and `ibstatus`, which reports the same port facts): HCAs, ports, state, rate, link layer."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed, to_float, to_int

_CA = re.compile(r"^CA '([^']+)'\s*$")
_PORT = re.compile(r"^Port (\d+):\s*$")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z ]*?):\s*(.*?)\s*$")
_CA_FIELDS = {"CA type": "type", "Firmware version": "firmware", "Hardware version": "hardware",
              "Number of ports": "num_ports"}  # fmt: skip
_PORT_FIELDS = {"State": "state", "Physical state": "physical_state", "Rate": "rate",
                "Link layer": "link_layer", "Base lid": "lid"}  # fmt: skip


class IbPort(BaseModel):
    """One HCA port as ibstat/ibstatus reports it."""

    port: int
    state: str | None = Field(None, description="Active, Down, Initializing, ...")
    physical_state: str | None = Field(None, description="LinkUp, Polling, Disabled, ...")
    rate: float | None = Field(None, description="Link rate in Gb/s.")
    link_layer: str | None = Field(None, description="InfiniBand or Ethernet.")
    lid: str | None = None


class IbCa(BaseModel):
    """One channel adapter (HCA)."""

    name: str
    type: str | None = Field(None, description="Part, e.g. MT4123 (ConnectX-6).")
    firmware: str | None = None
    hardware: str | None = None
    num_ports: int | None = None
    ports: list[IbPort] = Field(default_factory=list)


class IbStat(Parsed):
    """Every CA and port found."""

    cas: list[IbCa] = Field(default_factory=list)
    error: str | None = Field(None, description="What was printed instead of CAs (command missing, ...).")


def parse_ibstat(text: str) -> IbStat:
    """Parse `ibstat` output (any indentation, partial blocks allowed).

    Args:
        text: The output, as printed.

    Returns:
        CAs with their ports; lines not understood in ``unparsed_lines``.
    """
    result = IbStat()
    ca: IbCa | None = None
    port: IbPort | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _CA.match(line):
            ca, port = IbCa(name=m.group(1)), None
            result.cas.append(ca)
        elif (m := _PORT.match(line)) and ca is not None and (number := to_int(m.group(1))) is not None:
            port = IbPort(port=number)
            ca.ports.append(port)
        elif (m := _FIELD.match(line)) and ca is not None:
            _set_field(ca, port, m.group(1), m.group(2))
        else:
            result.unparsed_lines.append(raw)
    if not result.cas:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    return result


def _set_field(ca: IbCa, port: IbPort | None, key: str, value: str) -> None:
    if port is not None and key in _PORT_FIELDS:
        name = _PORT_FIELDS[key]
        setattr(port, name, to_float(value.split()[0]) if name == "rate" and value else value)
    elif key in _CA_FIELDS:
        name = _CA_FIELDS[key]
        setattr(ca, name, to_int(value) if name == "num_ports" else value or None)
