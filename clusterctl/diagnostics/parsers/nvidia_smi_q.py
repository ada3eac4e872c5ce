"""`nvidia-smi -q`: per GPU its PCIe link (generation and width, max and current) and, on NVSwitch
systems, the fabric registration the fabric manager completes (Fabric State / Status).

The output nests ``Key : value`` lines by indentation under section lines (``PCI``, ``GPU Link Info``,
``Fabric``). Every value is kept under its slash-joined path, so nothing is lost; the fields the rules
use are read from those paths. A ``grep -A2 Fabric`` excerpt (a Fabric block with no GPU header) gives
one GPU without a bus id. Shape::

    NvidiaSmiQ(driver_version="535.161.08", gpus=[SmiQGpu(bus_id="00000000:19:00.0",
               fabric_state="Completed", fabric_status="Success", pcie_gen_current=5, ...)])
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed, to_int

_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_FIELD = re.compile(r"^(.+?)\s*:\s*(.*?)\s*$")
_TOP = {"Driver Version": "driver_version", "CUDA Version": "cuda_version", "Attached GPUs": "attached_gpus"}


class SmiQGpu(BaseModel):
    """One GPU block; ``attributes`` holds every value under its path, e.g. "Fabric/State"."""

    bus_id: str | None = Field(None, description='e.g. "00000000:19:00.0"; None for a header-less excerpt.')
    attributes: dict[str, str] = Field(default_factory=dict)

    def _get(self, path: str) -> str | None:
        value = self.attributes.get(path)
        return value if value not in (None, "", "N/A") else None

    @property
    def product_name(self) -> str | None:
        """e.g. "NVIDIA H100 80GB HBM3"."""
        return self._get("Product Name")

    @property
    def performance_state(self) -> str | None:
        """P0 (busy) .. P8/P12 (idle)."""
        return self._get("Performance State")

    @property
    def fabric_state(self) -> str | None:
        """Not Started, In Progress, Completed; None where the GPU has no fabric (N/A, Not Supported)."""
        state = self._get("Fabric/State")
        return None if state == "Not Supported" else state

    @property
    def fabric_status(self) -> str | None:
        """Success once registration completed, else an error name; None when N/A."""
        return self._get("Fabric/Status")

    def _link(self, leaf: str) -> int | None:
        value = self._get(f"PCI/GPU Link Info/{leaf}")
        return to_int(value.rstrip("x")) if value else None

    @property
    def pcie_gen_max(self) -> int | None:
        """PCIe generation the GPU and host can reach."""
        return self._link("PCIe Generation/Max")

    @property
    def pcie_gen_current(self) -> int | None:
        """PCIe generation now (idle GPUs drop to a lower one to save power)."""
        return self._link("PCIe Generation/Current")

    @property
    def pcie_width_max(self) -> int | None:
        """Lanes the link can have."""
        return self._link("Link Width/Max")

    @property
    def pcie_width_current(self) -> int | None:
        """Lanes the link trained at."""
        return self._link("Link Width/Current")


class NvidiaSmiQ(Parsed):
    """The header values and one entry per GPU."""

    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[SmiQGpu] = Field(default_factory=list)
    error: str | None = Field(None, description="What was printed instead of the report.")


def parse_nvidia_smi_q(text: str) -> NvidiaSmiQ:
    """Parse `nvidia-smi -q` (all GPUs, one GPU with -i, or a grep excerpt of it).

    Args:
        text: The output, as printed.

    Returns:
        Header values and GPUs; lines that are neither sections nor ``key : value`` go to
        ``unparsed_lines``.
    """
    result = NvidiaSmiQ()
    gpu: SmiQGpu | None = None
    stack: list[tuple[int, str]] = []  # (indent, section name) of the open sections
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("==="):
            continue
        indent = len(raw.expandtabs(4)) - len(raw.expandtabs(4).lstrip())
        if m := _GPU.match(line):
            gpu, stack = SmiQGpu(bus_id=m.group(1)), []
            result.gpus.append(gpu)
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        field = _FIELD.match(line)
        if field is None:
            stack.append((indent, line))
            if gpu is None and line == "Fabric":  # an excerpt: the block belongs to an unnamed GPU
                gpu = SmiQGpu()
                result.gpus.append(gpu)
            continue
        key, value = field.groups()
        if gpu is None and not stack and key in _TOP:
            setattr(result, _TOP[key], to_int(value) if key == "Attached GPUs" else value)
        elif gpu is not None:
            gpu.attributes["/".join([name for _, name in stack] + [key])] = value
        elif key != "Timestamp":
            result.unparsed_lines.append(raw)
    if not result.gpus and result.driver_version is None:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    return result
