"""`lspci -vvv`: PCI devices with their link capability and status, ACS control flags and, for bridges,
the bus range behind them (so the bridges above a GPU or an HCA can be found).

Each device block starts with ``[domain:]bus:dev.fn class: description`` at column 0; the lines the
rules need inside it are::

    Bus: primary=16, secondary=17, subordinate=1c, sec-latency=0      (bridges)
    Capabilities: [60] Express (v2) Root Port (Slot+), MSI 00           (port type)
    LnkCap: Port #0, Speed 32GT/s, Width x16, ...
    LnkSta: Speed 16GT/s (downgraded), Width x16 (ok)
    ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-

`lspci -vvv | grep ACSCtl` (a common way to post it) has the ACSCtl lines without any device: they go
to ``orphan_acs``; an excerpt copied from the middle of a device block (no header) keeps the LnkSta
lines lspci marked ``(downgraded)`` in ``orphan_downgraded``. Lines a poster put in place of what they
left out (``....``, ``...``, ``[...]``) are counted in ``elided``: with them, or with orphan lines,
the device tree is known to be incomplete. Shape::

    Lspci(devices=[PciDevice(bdf="0000:19:00.0", class_name="3D controller", ...)], orphan_acs=[...])
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, PrivateAttr

from clusterctl.diagnostics.model import Parsed

_HEADER = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])\s+"
    r"(?P<cls>[^:]+?):\s+(?P<desc>.*)$"
)
_BUS = re.compile(
    r"\bBus:\s*primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)"
)
_EXPRESS = re.compile(
    r"^Capabilities:\s*\[[0-9a-fA-F]+\]\s*Express\s*(?:\(v\d\)\s*)?(.+?)(?:\s*\(Slot[+-]\))?,"
)
_LINK = re.compile(r"^(LnkCap|LnkSta):\s*(.*)$")
_SPEED = re.compile(r"Speed\s+([\d.]+)GT/s(\s*\(downgraded\))?")
_WIDTH = re.compile(r"Width\s+x(\d{1,3})(?!\d)(\s*\(downgraded\))?")  # PCIe widths are x1..x32
_ACS = re.compile(r"^ACSCtl:\s*(.*)$")
_FLAG = re.compile(r"(\w+)([+-])")
_DRIVER = re.compile(r"^Kernel driver in use:\s*(\S+)")
# A line standing for lines left out of an excerpt: dots or an ellipsis, bracketed or not.
_ELIDED = re.compile(r"^\[?(?:\.{3,}|\u2026)\]?$")

GPU_CLASSES = ("3D controller", "VGA compatible controller", "Display controller")
HCA_CLASSES = ("Infiniband controller", "Ethernet controller", "Network controller")
# The ACS controls that make a switch send peer-to-peer requests and completions up to the root
# complex instead of straight across (NCCL troubleshooting, "PCI Access Control Services").
ACS_REDIRECT = ("ReqRedir", "CmpltRedir")
# The ACSCtl flags NCCL's troubleshooting guide reads as "ACS may be enabled" (SrcValid+ first of all),
# with the redirect ones: a line with any of them on is worth a look when it cannot be placed.
ACS_ENABLED = ("SrcValid", *ACS_REDIRECT)


class PciLink(BaseModel):
    """A link's speed and width as LnkCap or LnkSta prints it."""

    speed_gts: float | None = Field(None, description="Transfer rate in GT/s (2.5, 5, 8, 16, 32, 64).")
    width: int | None = Field(None, description="Lanes, e.g. 16 for x16.")


class PciDevice(BaseModel):
    """One device block."""

    bdf: str = Field(description='Domain, bus, device and function, e.g. "0000:19:00.0" (domain 0000 when lspci '
                     "printed none).")  # fmt: skip
    class_name: str = Field(description='e.g. "3D controller", "PCI bridge", "Infiniband controller".')
    description: str = Field(description="Vendor and device as printed.")
    port_type: str | None = Field(
        None, description='PCIe port type, e.g. "Root Port", "Downstream Port", "Endpoint".'
    )
    secondary_bus: int | None = Field(None, description="Bridges: first bus behind the bridge.")
    subordinate_bus: int | None = Field(None, description="Bridges: last bus behind the bridge.")
    link_cap: PciLink | None = None
    link_sta: PciLink | None = None
    speed_downgraded: bool = Field(False, description="LnkSta said '(downgraded)' after the speed.")
    width_downgraded: bool = Field(False, description="LnkSta said '(downgraded)' after the width.")
    acs_ctl: dict[str, bool] | None = Field(None, description="ACSCtl flags: name -> enabled.")
    driver: str | None = Field(None, description="Kernel driver in use.")
    capabilities_hidden: bool = Field(
        False,
        description="lspci printed 'Capabilities: <access denied>' (not run as root): no link or ACS facts.",
    )

    @property
    def domain(self) -> str:
        """The PCI domain, e.g. "0000"."""
        return self.bdf.split(":")[0]

    @property
    def bus(self) -> int:
        """The bus number."""
        return int(self.bdf.split(":")[1], 16)

    @property
    def is_gpu(self) -> bool:
        """An NVIDIA display or 3D controller."""
        return self.class_name.split(" [")[0] in GPU_CLASSES and (
            "NVIDIA" in self.description or "10de:" in self.description
        )

    @property
    def is_hca(self) -> bool:
        """A Mellanox/NVIDIA network function that has a link of its own (not a virtual function)."""
        return (
            self.class_name.split(" [")[0] in HCA_CLASSES
            and ("Mellanox" in self.description or "15b3:" in self.description)
            and "Virtual Function" not in self.description
        )

    @property
    def acs_redirect(self) -> list[str]:
        """The peer-to-peer redirect controls that are on."""
        return [name for name in ACS_REDIRECT if (self.acs_ctl or {}).get(name)]

    @property
    def acs_enabled(self) -> list[str]:
        """The ACS controls on that NCCL's guide reads as "ACS may be enabled" (``ACS_ENABLED``)."""
        return [name for name in ACS_ENABLED if (self.acs_ctl or {}).get(name)]


class Lspci(Parsed):
    """Every device of `lspci -vvv`, and ACSCtl lines seen outside a device block."""

    devices: list[PciDevice] = Field(default_factory=list)
    orphan_acs: list[dict[str, bool]] = Field(
        default_factory=list, description="ACSCtl flags of lines without a device header (grep'd output)."
    )
    orphan_downgraded: list[str] = Field(
        default_factory=list,
        description="LnkSta lines that lspci marked '(downgraded)', seen without a device header (an excerpt).",
    )
    elided: int = Field(0, description="Lines standing for parts a poster left out (`....`, `[...]`).")
    error: str | None = Field(None, description="What was printed instead of devices.")
    # (domain, bus) -> the bridges in front of that bus, nearest first; built once, on first use.
    _by_bus: dict[tuple[str, int], list[PciDevice]] | None = PrivateAttr(None)

    def bridges_above(self, device: PciDevice) -> list[PciDevice]:
        """The bridges ``device`` sits behind, nearest (narrowest bus range) first.

        One lookup in an index of the bus ranges built on the first call (a bridge covers at most the 256 buses of its domain),
        so asking for every device is linear in the devices, not quadratic.
        """
        if self._by_bus is None:
            index: dict[tuple[str, int], list[PciDevice]] = {}
            for bridge in self.devices:
                if bridge.secondary_bus is not None and bridge.subordinate_bus is not None:
                    for bus in range(bridge.secondary_bus, min(bridge.subordinate_bus, 0xFF) + 1):
                        index.setdefault((bridge.domain, bus), []).append(bridge)
            for bridges in index.values():
                bridges.sort(key=lambda b: (b.subordinate_bus or 0) - (b.secondary_bus or 0))
            self._by_bus = index
        return [b for b in self._by_bus.get((device.domain, device.bus), []) if b is not device]


def parse_lspci(text: str) -> Lspci:
    """Parse `lspci -vvv` (or -vv; with or without -nn and -D), or its ACSCtl lines alone.

    Args:
        text: The output, as printed.

    Returns:
        Devices with link, ACS and bus-range facts; lines outside any device block that are not
        ACSCtl lines go to ``unparsed_lines``.
    """
    result = Lspci()
    device: PciDevice | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if _ELIDED.match(line):
            result.elided += 1
            continue
        if not raw[:1].isspace() and (m := _HEADER.match(line)):
            domain = m["domain"] or "0000"
            device = PciDevice(
                bdf=f"{domain.lower()}:{m['bus'].lower()}:{m['dev'].lower()}.{m['fn']}",
                class_name=m["cls"].strip(),
                description=m["desc"].strip(),
            )
            result.devices.append(device)
        elif m := _ACS.match(line):
            flags = {name: sign == "+" for name, sign in _FLAG.findall(m.group(1))}
            if device is None:
                result.orphan_acs.append(flags)
            else:
                device.acs_ctl = flags
        elif device is None:
            if (m := _LINK.match(line)) and m.group(1) == "LnkSta" and "(downgraded)" in m.group(2):
                result.orphan_downgraded.append(m.group(2).strip())
            else:
                result.unparsed_lines.append(raw)
        else:
            _read_device_line(device, line)
    if not result.devices and not result.orphan_acs and not result.orphan_downgraded:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    return result


def _read_device_line(device: PciDevice, line: str) -> None:
    """Take the facts the rules use from one line of a device block; other detail is skipped."""
    if m := _BUS.search(line):
        device.secondary_bus, device.subordinate_bus = int(m.group(2), 16), int(m.group(3), 16)
    elif m := _EXPRESS.match(line):
        device.port_type = m.group(1).strip()
    elif m := _LINK.match(line):
        speed, width = _SPEED.search(m.group(2)), _WIDTH.search(m.group(2))
        link = PciLink(
            speed_gts=float(speed.group(1)) if speed else None, width=int(width.group(1)) if width else None
        )
        if m.group(1) == "LnkCap":
            device.link_cap = link
        else:
            device.link_sta = link
            device.speed_downgraded = bool(speed and speed.group(2))
            device.width_downgraded = bool(width and width.group(2))
    elif m := _DRIVER.match(line):
        device.driver = m.group(1)
    elif line == "Capabilities: <access denied>":
        device.capabilities_hidden = True
