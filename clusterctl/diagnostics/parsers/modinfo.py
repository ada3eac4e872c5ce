"""`modinfo nvidia`: which flavor of the NVIDIA kernel module a node
has and which kernel it was built for.

The open GPU kernel modules say ``license: Dual MIT/GPL`` (and, from R5xx on, ``import_ns: DMA_BUF``);
the proprietary ones ``license: NVIDIA`` (NVIDIA's README, "kernel_open"). ``vermagic`` starts with the
kernel release the module was built for, which is the running kernel's when the module loads. GPUDirect
RDMA through DMA-BUF needs the open flavor (``clusterctl.diagnostics.nccl_gdr.dmabuf_path``). Shape::

    Modinfo(fields={"license": ["Dual MIT/GPL"], "vermagic": ["6.8.0-90-generic SMP ..."], ...})
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed

OPEN_LICENSE = "Dual MIT/GPL"
_FIELD = re.compile(r"^([a-z_]+):\s*(.*?)\s*$")
_ERROR = re.compile(r"^modinfo: ERROR: .*|modinfo: (?:command )?not found")


class Modinfo(Parsed):
    """The module's fields, each with every value modinfo printed for it (alias, parm repeat)."""

    fields: dict[str, list[str]] = Field(default_factory=dict)
    error: str | None = Field(None, description="modinfo's error (module not found), when it printed one.")

    def first(self, name: str) -> str | None:
        """The first value of field ``name``; None when modinfo printed none."""
        values = self.fields.get(name)
        return values[0] if values else None

    @property
    def license(self) -> str | None:
        """e.g. "Dual MIT/GPL" (open modules) or "NVIDIA" (proprietary)."""
        return self.first("license")

    @property
    def open_modules(self) -> bool | None:
        """True: NVIDIA's open GPU kernel modules; False: the proprietary ones; None: no license seen."""
        return None if self.license is None else self.license == OPEN_LICENSE

    @property
    def kernel(self) -> str | None:
        """The kernel release the module was built for (vermagic's first word), e.g. "6.8.0-90-generic"."""
        vermagic = self.first("vermagic")
        return vermagic.split()[0] if vermagic else None


def parse_modinfo(text: str) -> Modinfo:
    """Parse `modinfo MODULE` (``name: value`` lines; a `| grep` excerpt of them too).

    Args:
        text: The output, as printed.

    Returns:
        Every field's values; ``error`` when modinfo said the module does not exist.
    """
    result = Modinfo()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if _ERROR.search(line):
            result.error = line
        elif m := _FIELD.match(line):
            result.fields.setdefault(m.group(1), []).append(m.group(2))
        else:
            result.unparsed_lines.append(raw)
    return result
