"""`ibstatus` output, read into the same model as ibstat so the same rules apply to both."""

from __future__ import annotations

import re

from clusterctl.diagnostics.model import to_float, to_int
from clusterctl.diagnostics.parsers.ibstat import IbCa, IbPort, IbStat

_HEADER = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:\s*$")
_FIELD = re.compile(r"^\s*([a-z_ ]+?):\s*(.*?)\s*$")
_NUMBERED = re.compile(r"^\d+:\s*(\S+)")  # "4: ACTIVE" -> "ACTIVE"
_STATES = {"ACTIVE": "Active", "DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed"}


def parse_ibstatus(text: str) -> IbStat:
    """Parse `ibstatus` output; states are normalised to ibstat's words (ACTIVE -> Active).

    Args:
        text: The output, as printed.

    Returns:
        An :class:`IbStat` (no firmware or CA type: ibstatus does not print them).
    """
    result = IbStat()
    cas: dict[str, IbCa] = {}
    port: IbPort | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if m := _HEADER.match(raw.strip()):
            ca = cas.setdefault(m.group(1), IbCa(name=m.group(1)))
            if ca not in result.cas:
                result.cas.append(ca)
            port = IbPort(port=to_int(m.group(2)) or 0)
            ca.ports.append(port)
        elif (m := _FIELD.match(raw)) and port is not None:
            _set_field(port, m.group(1), m.group(2))
        else:
            result.unparsed_lines.append(raw)
    if not result.cas:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    return result


def _set_field(port: IbPort, key: str, value: str) -> None:
    word = m.group(1) if (m := _NUMBERED.match(value)) else value
    if key == "state":
        port.state = _STATES.get(word.upper(), word)
    elif key == "phys state":
        port.physical_state = word
    elif key == "rate":
        port.rate = to_float(value.split()[0]) if value else None
    elif key == "link_layer":
        port.link_layer = value
    elif key == "base lid":
        port.lid = value
