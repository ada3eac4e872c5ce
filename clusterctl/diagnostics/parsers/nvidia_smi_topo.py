"""`nvidia-smi topo -m` (and `topo -p2p`): the GPU/NIC connection matrix, affinities and legends.

Handles tab- or space-separated tables, trailing padding, NIC columns named directly (mlx5_0) or as
NIC0 with a `NIC Legend`, the legacy SOC legend, missing NUMA columns, N/A, and rows cut short.
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed, strip_ansi

_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+|bond\w*|ib\w+)$")
_EXTRA_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND = re.compile(r"^\s*(\S+)\s*=\s*(.+?)\s*$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")

# How far a path is, nearest first. SOC is the pre-2017 name of SYS.
PATH_RANK: dict[str, int] = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6, "SOC": 6}


def path_rank(path: str) -> int:
    """Distance rank of a matrix cell (NV12 ranks as NV); unknown cells rank farthest."""
    key = "NV" if re.fullmatch(r"NV\d+", path) else path
    return PATH_RANK.get(key, 99)


class NvidiaSmiTopo(Parsed):
    """The topology matrix with NIC names resolved through the NIC legend."""

    gpus: list[str] = Field(default_factory=list, description='GPU column names, e.g. ["GPU0", "GPU1"].')
    nics: list[str] = Field(default_factory=list, description='NIC names, legend-resolved, e.g. ["mlx5_0"].')
    matrix: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="row -> column -> path (X, NV2, PIX, PXB, PHB, NODE, SYS, SOC)."
    )
    cpu_affinity: dict[str, str] = Field(default_factory=dict, description="GPU -> CPU Affinity text.")
    numa_affinity: dict[str, str] = Field(default_factory=dict, description="GPU -> NUMA Affinity text.")
    gpu_numa_id: dict[str, str] = Field(default_factory=dict, description="GPU -> GPU NUMA ID text.")
    legend: dict[str, str] = Field(default_factory=dict, description="Legend code -> meaning, as printed.")
    nic_legend: dict[str, str] = Field(default_factory=dict, description="NIC0 -> mlx5_0.")
    error: str | None = Field(None, description="What nvidia-smi printed instead of a matrix.")

    def nearest_nic(self, gpu: str) -> tuple[str, str] | None:
        """The NIC nearest to ``gpu`` and the path to it, or None when the matrix has no NIC for it."""
        paths = [(nic, self.matrix.get(gpu, {}).get(nic)) for nic in self.nics]
        known = [(nic, path) for nic, path in paths if path]
        return min(known, key=lambda item: path_rank(item[1])) if known else None


def parse_nvidia_smi_topo(text: str) -> NvidiaSmiTopo:
    """Parse `nvidia-smi topo -m` output.

    Args:
        text: The output, as printed.

    Returns:
        GPUs, NICs, the matrix and affinities; an error line in ``error`` when there was no table.
    """
    result = NvidiaSmiTopo()
    devices: list[str] = []
    extras: list[str] = []
    rows: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = strip_ansi(raw).strip()
        tokens = line.split()
        if not tokens:
            continue
        if not devices and tokens[0] == "GPU0":
            devices, extras = _header(line)
        elif devices and tokens[0] in devices and len(tokens) > 1:
            rows[tokens[0]] = tokens[1:]
            if len(tokens) - 1 < len(devices) and tokens[0].startswith("GPU"):
                result.unparsed_lines.append(raw)  # a row cut short: keep the cells we have
        elif m := _NIC_LEGEND.match(line):
            result.nic_legend[m.group(1)] = m.group(2)
        elif line in ("Legend:", "NIC Legend:"):
            continue
        elif m := _LEGEND.match(line):
            result.legend[m.group(1)] = m.group(2)
        else:
            result.unparsed_lines.append(raw)
    if not devices:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    _fill(result, devices, extras, rows)
    return result


def _header(line: str) -> tuple[list[str], list[str]]:
    """Device columns and the named extra columns (in printed order) of the header line."""
    extras = sorted((name for name in _EXTRA_COLUMNS if name in line), key=line.index)
    devices_part = line
    for name in extras:
        devices_part = devices_part.replace(name, " ")
    devices = [token for token in devices_part.split() if _DEVICE.match(token)]
    return devices, extras


def _fill(result: NvidiaSmiTopo, devices: list[str], extras: list[str], rows: dict[str, list[str]]) -> None:
    def name(device: str) -> str:
        return result.nic_legend.get(device, device)

    result.gpus = [d for d in devices if d.startswith("GPU")]
    result.nics = [name(d) for d in devices if not d.startswith("GPU")]
    targets = {"CPU Affinity": result.cpu_affinity, "NUMA Affinity": result.numa_affinity,
               "GPU NUMA ID": result.gpu_numa_id}  # fmt: skip
    for row, cells in rows.items():
        result.matrix[name(row)] = {name(col): cell for col, cell in zip(devices, cells, strict=False)}
        if row.startswith("GPU"):
            for column, value in zip(extras, cells[len(devices) :], strict=False):
                targets[column][row] = value
