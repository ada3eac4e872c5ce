"""`ofed_info -s` / `ofed_info -n` / `ofed_info | head -1`: which MLNX_OFED or DOCA-OFED is installed, if any.

MLNX_OFED prints ``MLNX_OFED_LINUX-4.7-1.0.0.1:``; DOCA-OFED (the successor, 24.x on) prints
``OFED-internal-24.10-1.1.4.0.200:``, whose flavor is ``OFED-internal``.
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed

# Possessive and bracket-bounded: a lazy version before "(.*)" was quadratic on a long line.
_FULL = re.compile(r"^((?:[A-Z][A-Z_]*)?OFED[A-Z_]*+(?:-internal)?)-(\d[\w.-]*+)(?:\s*+\([^)]*+\))?:?\s*+$")
_NUMBER = re.compile(r"^(\d+\.\d+-[\d.]+)\s*$")
_MISSING = re.compile(r"ofed_info: (?:command )?not found|No such file")


class OfedInfo(Parsed):
    """The OFED stack on a host."""

    installed: bool | None = Field(None, description="True: a version was printed; False: command missing.")
    version: str | None = Field(None, description='e.g. "4.7-3.2.9.0".')
    flavor: str | None = Field(
        None, description='e.g. "MLNX_OFED_LINUX", "OFED-internal" (DOCA-OFED); None for `ofed_info -n`.'
    )
    error: str | None = None


def parse_ofed_info(text: str) -> OfedInfo:
    """Parse ofed_info's first line in any of its forms.

    Args:
        text: The output, as printed.

    Returns:
        installed/version/flavor; installed is False when the shell said the command is missing
        (an inbox rdma-core host), None when the text says neither.
    """
    result = OfedInfo()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if result.version is None and (m := _FULL.match(line)):
            result.flavor, result.version, result.installed = m.group(1), m.group(2), True
        elif result.version is None and (m := _NUMBER.match(line)):
            result.version, result.installed = m.group(1), True
        elif _MISSING.search(line):
            result.installed, result.error = False, line
        else:
            result.unparsed_lines.append(raw)
    return result
