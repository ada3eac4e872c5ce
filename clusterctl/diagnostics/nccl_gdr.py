"""When NCCL uses GPUDirect RDMA between a GPU and a NIC, as NCCL's own code decides it, by version,
and which HCAs an NCCL_IB_HCA-style setting lets it use.

Checked against NCCL's source (github.com/NVIDIA/nccl):

- **NCCL < 2.6** (v2.5.6-2 ``src/transport/net.cc`` ``netGetGdrSupport``, ``src/graph/topo.cc``
  ``pathDistance``, ``src/include/param.h``): the GPU-NIC distance is PIX=0, PXB=1, PHB=2 (a path
  through one CPU, which is also what nvidia-smi calls NODE), SYS=4 (through two CPUs); GDR is
  disabled when ``distance >= NCCL_NET_GDR_LEVEL``; the level defaults to PATH_PHB=2 and is read with
  ``strtoll``, so only integers work: a name such as ``PHB`` reads as 0 and turns GDR off everywhere.
  Enabling GDR across SYS needs level 5.
- **NCCL >= 2.6** (v2.6.4-1 onwards, ``src/graph/paths.cc`` ``ncclTopoCheckGdr``/``ncclGetLevel``):
  path types LOC < PIX < PXB < PHB < SYS (NODE is PHB); GDR is disabled when ``distance > level``;
  the level defaults to PXB; it accepts a name (``PHB``) or an old-style integer mapped through
  ``levelsOldToNew = {LOC, PIX, PXB, PHB, SYS, SYS}`` (so 4 and 5 both mean SYS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.versions import version_tuple

# nvidia-smi topo -m path -> NCCL path type (NCCL has no NODE: it is a path through one CPU, PHB;
# SOC is the pre-2017 name of SYS).
_NCCL_PATH = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS", "SOC": "SYS"}
_ORDER = ("LOC", "PIX", "PXB", "PHB", "SYS")  # NCCL >= 2.6: nearest first
_OLD_TO_NEW = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")  # levelsOldToNew
_LEGACY_DISTANCE = {"PIX": 0, "PXB": 1, "PHB": 2, "SYS": 4}  # NCCL < 2.6 enum ncclPathDist
_LEGACY_DEFAULT = 2  # NCCL_PARAM(NetGdrLevel, "NET_GDR_LEVEL", PATH_PHB) with PATH_PHB = 2
_CURRENT_DEFAULT = "PXB"  # ncclTopoCheckGdr: int netGdrLevel = PATH_PXB
FIRST_CURRENT = (2, 6)  # the first release with `distance > level` and names


def nccl_path(topo_path: str) -> str | None:
    """NCCL's path type for an nvidia-smi topology cell between a GPU and a NIC (None: not a PCIe path)."""
    return _NCCL_PATH.get(topo_path)


def hca_names(hca: str | list[str] | None) -> list[str]:
    """The device names of an HCA setting: one name or a list, each optionally ``name:port``."""
    names = [hca] if isinstance(hca, str) else hca or []
    return list(dict.fromkeys(name.split(":")[0] for name in names))


@dataclass(frozen=True)
class GdrPolicy:
    """NCCL's GDR decision for one NCCL version and one NCCL_NET_GDR_LEVEL (None: unset)."""

    version: str | None
    level: int | str | None

    @property
    def legacy(self) -> bool | None:
        """True for NCCL < 2.6, False for newer, None when the version is unknown."""
        parsed = version_tuple(self.version)
        return None if parsed is None else parsed < FIRST_CURRENT

    def _legacy_level(self) -> int:
        if self.level is None:
            return _LEGACY_DEFAULT
        text = str(self.level).strip()
        match = re.match(r"[+-]?(?:0[xX][0-9a-fA-F]+|\d+)", text)  # strtoll(str, NULL, 0) reads a prefix
        return int(match.group(0), 0) if match else 0

    def _current_level(self) -> str:
        """The level as a path type; a value NCCL would ignore leaves its default."""
        if self.level is None:
            return _CURRENT_DEFAULT
        text = str(self.level).strip()
        if text.upper() in _ORDER:
            return text.upper()
        if text[:1].isdigit():
            digits = re.match(r"\d+", text)
            assert digits is not None  # the text starts with a digit
            return _OLD_TO_NEW[min(int(digits.group(0)), len(_OLD_TO_NEW) - 1)]
        return _CURRENT_DEFAULT

    def enabled(self, topo_path: str, legacy: bool) -> bool:
        """Whether NCCL (old rules when ``legacy``) uses GDR over ``topo_path``."""
        path = nccl_path(topo_path)
        if path is None:
            return False
        if legacy:
            return _LEGACY_DISTANCE[path] < self._legacy_level()
        return _ORDER.index(path) <= _ORDER.index(self._current_level())

    def describe(self) -> str:
        """The level as a reader should see it, e.g. ``2 (NCCL default)`` or ``PHB``."""
        if self.level is None:
            return f"{_LEGACY_DEFAULT if self.legacy else _CURRENT_DEFAULT} (NCCL default)"
        return str(self.level)

    def enabling_advice(self, topo_path: str) -> str:
        """The NCCL_NET_GDR_LEVEL that would enable GDR over ``topo_path``, for this NCCL version."""
        path = nccl_path(topo_path) or topo_path
        current = f"NCCL_NET_GDR_LEVEL={path} (or {_OLD_TO_NEW.index(path)})"
        legacy = (
            f"NCCL_NET_GDR_LEVEL={_LEGACY_DISTANCE.get(path, 4) + 1} (NCCL before 2.6 takes integers only and "
            "disables GDR at distance >= level; a name such as PHB reads as 0 and turns GDR off)"
        )
        if self.legacy is None:
            return f"{current} on NCCL 2.6 or newer; {legacy} on older NCCL"
        return legacy if self.legacy else current


# GPUDirect RDMA without a peer-memory module: NCCL 2.13 added DMA-BUF (src/init.cc "DMA-BUF is
# available"); the kernel's RDMA core registers DMA-BUF memory from Linux 5.12 (ib_umem_dmabuf); the
# NVIDIA driver exports GPU memory as DMA-BUF only from its open kernel modules.
FIRST_DMABUF_NCCL = (2, 13)
FIRST_DMABUF_KERNEL = (5, 12)


@dataclass(frozen=True)
class DmabufPath:
    """Whether a node can do GPUDirect RDMA through DMA-BUF: ``usable`` True/False, None when a fact is
    unknown; ``missing`` says what stands in the way, in words."""

    usable: bool | None
    missing: tuple[str, ...]

    def words(self) -> str:
        """What is missing, one sentence part; '' when nothing is known to be."""
        return "; ".join(self.missing)


def dmabuf_path(*, open_modules: bool | None, kernel: str | None, nccl: str | None) -> DmabufPath:
    """Whether GPUDirect RDMA can go through DMA-BUF on a node, the one rule ``check topology`` and
    ``provision``'s gpudirect-rdma step both apply.

    Args:
        open_modules: The NVIDIA kernel module is the open flavor (modinfo's license "Dual MIT/GPL").
        kernel: The running kernel's release (or the one the module was built for, its vermagic).
        nccl: The image's NCCL version; None: unknown (a PyTorch image's own), taken as new enough.
    """
    missing = []
    nccl_version = version_tuple(nccl)
    if nccl_version is not None and nccl_version < FIRST_DMABUF_NCCL:
        missing.append(f"NCCL {nccl} predates DMA-BUF (2.13)")
    if open_modules is False:
        missing.append(
            "the NVIDIA driver's proprietary kernel modules (license NVIDIA) export no DMA-BUF; "
            "the open ones (license Dual MIT/GPL) do"
        )
    kernel_version = version_tuple(kernel)
    if kernel_version is not None and kernel_version < FIRST_DMABUF_KERNEL:
        missing.append(f"kernel {kernel} predates RDMA on DMA-BUF memory (5.12)")
    if missing:
        return DmabufPath(usable=False, missing=tuple(missing))
    known = open_modules is not None and kernel_version is not None
    return DmabufPath(usable=True if known else None, missing=())
