"""`ip -j addr`: the node's network interfaces, their state and addresses.

Shape::

    IpAddr(interfaces=[Interface(name="ib0", state="UP", link_type="infiniband", mtu=2044,
                                 addresses=["192.168.11.1/24", "fe80::.../64"])])
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed


class Interface(BaseModel):
    """One interface as `ip -j addr` lists it."""

    name: str
    state: str | None = Field(None, description="operstate: UP, DOWN, UNKNOWN, ...")
    link_type: str | None = Field(None, description="ether, infiniband, loopback, ...")
    mtu: int | None = None
    addresses: list[str] = Field(
        default_factory=list, description="Addresses in CIDR form, e.g. 10.0.0.1/24."
    )


class IpAddr(Parsed):
    """Every interface of the node. Keys: ``interfaces`` (each with ``name``, ``state``, ``link_type``,
    ``mtu`` and ``addresses`` in CIDR form) and ``error`` (set, with no interfaces, when the text is not
    `ip -j addr` JSON)."""

    interfaces: list[Interface] = Field(default_factory=list)
    error: str | None = None

    def interface(self, name: str) -> Interface | None:
        """The interface called ``name``, or None when the node has none."""
        return next((i for i in self.interfaces if i.name == name), None)


def parse_ip_addr(text: str) -> IpAddr:
    """Parse `ip -j addr` output (a JSON array of interface objects).

    Args:
        text: The output, as printed.

    Returns:
        The interfaces; ``error`` set (and nothing else) when the text is not that JSON.
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than json can follow
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "empty output")
        reason = getattr(exc, "msg", None) or str(exc).split(";")[0]
        return IpAddr(error=f"not ip -j JSON ({reason}): {first[:200]}")
    if not isinstance(data, list):
        return IpAddr(error="not ip -j JSON: expected a list of interfaces")
    result = IpAddr()
    for entry in data:
        if not isinstance(entry, dict) or "ifname" not in entry:
            result.unparsed_lines.append(json.dumps(entry)[:200])
            continue
        result.interfaces.append(
            Interface(
                name=str(entry["ifname"]),
                state=entry.get("operstate"),
                link_type=entry.get("link_type"),
                mtu=entry.get("mtu") if isinstance(entry.get("mtu"), int) else None,
                addresses=[
                    f"{a['local']}/{a['prefixlen']}"
                    for a in entry.get("addr_info", [])
                    if isinstance(a, dict) and "local" in a and "prefixlen" in a
                ],
            )
        )
    return result
