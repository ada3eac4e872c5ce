"""`ls -d PEERMEM_PATHS`: which GPUDirect RDMA peer-memory paths exist on a node.

`ls -d` prints each path that exists on stdout and complains about each missing one on stderr, so a
bundle's ``peermem.txt`` (stdout only) lists the present paths and is empty when no peer-memory module
is loaded; a capture taken with ``2>&1`` also has the complaints. A user's paste of `cat PATH` reads
the same way (a missing path is a ``cat:`` complaint). Shape::

    PeerMem(present=["/sys/module/nvidia_peermem/version"], absent=["/sys/kernel/mm/memory_peers/nv_mem/version", ...])
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed

# The files NCCL itself tests to decide that a peer-memory client is loaded (src/transport/net_ib/gdr.cc,
# ibGdrSupportInitOnce): the legacy Mellanox nv_peer_mem module's two memory_peers clients, and the
# in-driver nvidia_peermem module (R470+). /sys/module/nv_peer_mem is not among them.
PEERMEM_PATHS = (
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
)
# GNU: ls: cannot access 'PATH': No such file or directory; busybox: ls: PATH: No such file or directory
# and what users paste from `cat PATH`: cat: PATH: No such file or directory
_MISSING = re.compile(r"^(?:ls: (?:cannot access )?|cat: )'?(/[^']+?)'?: No such file or directory$")


class PeerMem(Parsed):
    """The peer-memory probe. Keys: ``present`` (paths that exist: a module is loaded when any does) and
    ``absent`` (paths ls said do not exist; only in captures that kept stderr)."""

    present: list[str] = Field(default_factory=list, description="Paths that exist on the node.")
    absent: list[str] = Field(default_factory=list, description="Paths ls reported missing (stderr).")

    @property
    def loaded(self) -> bool:
        """Whether NCCL would find a peer-memory client: one of :data:`PEERMEM_PATHS` exists."""
        return any(path in PEERMEM_PATHS for path in self.present)

    @property
    def registered(self) -> bool:
        """Whether a client is registered with MOFED's ib_core (a memory_peers path), not only a module loaded."""
        return any(path in PEERMEM_PATHS and "/memory_peers/" in path for path in self.present)


def parse_peermem(text: str) -> PeerMem:
    """Parse what `ls -d PEERMEM_PATHS` printed.

    Args:
        text: Its stdout (a bundle's peermem.txt), or stdout and stderr together.

    Returns:
        The present and absent paths; other lines in ``unparsed_lines``.
    """
    result = PeerMem()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _MISSING.match(line):
            result.absent.append(m.group(1))
        elif line.startswith("/"):
            result.present.append(line)
        else:
            result.unparsed_lines.append(raw)
    return result
