"""The default `nvidia-smi` table: driver and CUDA versions, and one entry per GPU.

Reads the old 79-column and the new 89-column layouts, truncated names, N/A and ERR! cells.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed, to_int

_VERSIONS = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>[\d.]+)\s+Driver Version:\s*(?P<driver>[\d.]+)(?:\s+CUDA Version:\s*(?P<cuda>[\d.]+|N/A))?"
)
_GPU = re.compile(
    r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s+\|\s+([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+)\s+(\S+)\s+\|"
)
# (?<!\d): a search starts only where a number does (a line of digits was quadratic).
_MEMORY = re.compile(r"(?<!\d)(\d+)MiB\s*/\s*(\d+)MiB")


class SmiGpu(BaseModel):
    """One GPU block of the table."""

    index: int
    name: str = Field(description="Name as printed (may be truncated with '...').")
    persistence_mode: str | None = None
    bus_id: str | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None


class NvidiaSmi(Parsed):
    """What the default nvidia-smi table says."""

    smi_version: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[SmiGpu] = Field(default_factory=list)
    error: str | None = Field(None, description="What was printed instead of a table.")


def parse_nvidia_smi(text: str) -> NvidiaSmi:
    """Parse the default `nvidia-smi` output.

    Args:
        text: The output, as printed.

    Returns:
        Versions and GPUs. Table frames, headers and process rows are recognised and skipped.
    """
    result = NvidiaSmi()
    current: SmiGpu | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _VERSIONS.search(line):
            result.smi_version, result.driver_version, result.cuda_version = m.group("smi", "driver", "cuda")
        elif (m := _GPU.match(line)) and (index := to_int(m.group(1))) is not None:
            current = SmiGpu(index=index, name=m.group(2), persistence_mode=m.group(3), bus_id=m.group(4))
            result.gpus.append(current)
        elif (m := _MEMORY.search(line)) and current is not None and current.memory_total_mib is None:
            current.memory_used_mib, current.memory_total_mib = to_int(m.group(1)), to_int(m.group(2))
        elif line.startswith(("|", "+")) or re.match(r"^\w{3} \w{3} +\d+ [\d:]+ \d{4}$", line):
            continue  # frames, column headers, second GPU lines, process rows, the timestamp
        else:
            result.unparsed_lines.append(raw)
    if result.driver_version is None and not result.gpus:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    return result
