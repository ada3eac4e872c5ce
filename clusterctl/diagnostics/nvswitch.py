"""NVSwitch systems found from the PCI bus, not only from `nvidia-smi -q`'s Fabric block. Pure.

An HGX/DGX baseboard's NVSwitches are PCI functions of NVIDIA (vendor 10de) of class 0680, "Bridge"
(a real 8x H100: four ``Bridge: NVIDIA Corporation Device 22a3``; lspci's name database calls them
``GH100 [H100 NVSwitch]``; an A100 board's six are 10de:1af1). They are there whatever the driver prints,
so a driver whose `nvidia-smi -q` has no Fabric block (or a fabric manager that never ran) cannot hide
them. `lspci -d 10de::0680` lists exactly these; provision's fabric-manager step uses it and
``/proc/driver/nvidia-nvswitch/devices`` (one entry per switch the nvidia driver bound).
"""

from __future__ import annotations

from clusterctl.diagnostics.parsers.lspci import Lspci

NVSWITCH_PCI_CLASS = "0680"  # PCI class "Bridge: other" (lspci -nn prints "Bridge [0680]")


def nvswitches_on_bus(lspci: Lspci) -> list[str]:
    """The bus addresses of the NVSwitches in an `lspci` listing (NVIDIA functions of class Bridge)."""
    return [
        device.bdf
        for device in lspci.devices
        if device.class_name.split(" [")[0] == "Bridge"
        and ("NVIDIA" in device.description or "10de:" in device.description)
    ]
