"""`/proc/cmdline`: the kernel's boot parameters, and the IOMMU mode they ask for.

Also reads the ``Command line:`` line a `dmesg` excerpt carries. Shape::

    ProcCmdline(args={"BOOT_IMAGE": "/vmlinuz-5.15.0-101-generic", "ro": "", "iommu": "pt"})
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from clusterctl.diagnostics.model import Parsed

_DMESG = re.compile(r"^\[\s*[\d.]+\]\s+(?:Kernel )?[Cc]ommand line:\s*(.*)$")
IommuMode = Literal["passthrough", "off", "translated", "default"]


class ProcCmdline(Parsed):
    """Every ``key=value`` (or bare ``key``, value "") of the command line, last one winning."""

    args: dict[str, str] = Field(default_factory=dict)
    error: str | None = Field(None, description="The text when it holds no command line.")

    @property
    def iommu_mode(self) -> IommuMode:
        """What the parameters ask of the IOMMU.

        passthrough: ``iommu=pt`` (DMA of host devices untranslated); off: ``iommu=off`` or
        ``intel_iommu=off``/``amd_iommu=off``; translated: ``intel_iommu=on``/``amd_iommu=on`` or
        ``iommu=nopt``/``force`` without ``iommu=pt``; default: none of these (the kernel's build
        default and the CPU decide: AMD IOMMUs are on when present).
        """
        iommu = self.args.get("iommu", "")
        vendor = {self.args.get("intel_iommu", ""), self.args.get("amd_iommu", "")}
        if iommu == "pt":
            return "passthrough"
        if iommu == "off" or "off" in vendor:
            return "off"
        if iommu in ("nopt", "force") or "on" in vendor:
            return "translated"
        return "default"


def parse_proc_cmdline(text: str) -> ProcCmdline:
    """Parse the text of /proc/cmdline (or a dmesg ``Command line:`` line).

    Args:
        text: The file's content.

    Returns:
        The parameters of the first command line found; other lines in ``unparsed_lines``.
    """
    result = ProcCmdline()
    found = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        dmesg = _DMESG.match(line)
        if found or (dmesg is None and (line.startswith("[") or "=" not in line)):
            result.unparsed_lines.append(raw)
            continue
        for token in (dmesg.group(1) if dmesg else line).split():
            key, _, value = token.partition("=")
            result.args[key] = value
        found = True
    if not found:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), "empty output")
    return result
