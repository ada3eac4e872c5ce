"""`ibv_devinfo` (plain, -v or -vv; old 'Device ports:' and newer formats): devices and port states."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed, to_int

_HCA = re.compile(r"^hca_id:\s*(\S+)")
_PORT = re.compile(r"^port:\s*(\d+)")
_FIELD = re.compile(r"^([A-Za-z_][\w ()]*?):\s*(.*?)\s*$")
_DEVICE_FIELDS = ("fw_ver", "vendor_part_id", "board_id", "transport", "phys_port_cnt", "node_guid")
_PORT_FIELDS = ("state", "phys_state", "link_layer", "active_mtu", "active_speed", "active_width", "port_lid")


class DevinfoPort(BaseModel):
    """One port: ``state`` as printed without its number (PORT_ACTIVE)."""

    port: int
    state: str | None = None
    phys_state: str | None = None
    link_layer: str | None = None
    active_mtu: str | None = None
    active_speed: str | None = None
    active_width: str | None = None
    port_lid: str | None = None


class DevinfoDevice(BaseModel):
    """One RDMA device."""

    name: str
    fw_ver: str | None = None
    vendor_part_id: str | None = None
    board_id: str | None = None
    transport: str | None = None
    phys_port_cnt: str | None = None
    node_guid: str | None = None
    ports: list[DevinfoPort] = Field(default_factory=list)
    attributes: dict[str, str] = Field(default_factory=dict, description="Other key: value lines (-v).")


class IbvDevinfo(Parsed):
    """Every device found."""

    devices: list[DevinfoDevice] = Field(default_factory=list)
    error: str | None = Field(None, description="What was printed instead of devices.")


def parse_ibv_devinfo(text: str) -> IbvDevinfo:
    """Parse `ibv_devinfo` output; flag lists and GID tables of -v/-vv are skipped, not reported.

    Args:
        text: The output, as printed.

    Returns:
        Devices with firmware and ports; ``unparsed_lines`` holds lines outside any device.
    """
    result = IbvDevinfo()
    device: DevinfoDevice | None = None
    port: DevinfoPort | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _HCA.match(line):
            device, port = DevinfoDevice(name=m.group(1)), None
            result.devices.append(device)
        elif device is None:
            result.unparsed_lines.append(raw)
        elif (m := _PORT.match(line)) and (number := to_int(m.group(1))) is not None:
            port = DevinfoPort(port=number)
            device.ports.append(port)
        elif m := _FIELD.match(line):
            _set_field(device, port, m.group(1).strip(), m.group(2))
        # Anything else inside a device block is a -v flag list or GID row: detail we do not use.
    if not result.devices:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    return result


def _set_field(device: DevinfoDevice, port: DevinfoPort | None, key: str, value: str) -> None:
    if port is not None and key in _PORT_FIELDS:
        setattr(port, key, re.sub(r"\s*\(\d+\)$", "", value) if key in ("state", "phys_state") else value)
    elif port is None and key in _DEVICE_FIELDS:
        setattr(device, key, value)
    else:
        device.attributes.setdefault(key, value)
