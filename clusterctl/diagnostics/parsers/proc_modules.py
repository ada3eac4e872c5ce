"""`/proc/modules` (or `lsmod`'s table): the kernel modules loaded on a node.

Each line of /proc/modules is ``name size refcount deps state address`` (proc(5)); `lsmod` prints the
same modules as ``name size refcount [users]`` under a ``Module Size Used by`` header, which is what
users paste (often through grep). Shape::

    ProcModules(modules=["nvidia_peermem", "nvidia", "mlx5_ib", ...])
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed

_LINE = re.compile(r"^(\w+)\s+\d+\s+\S+\s+\S+\s+(?:Live|Loading|Unloading)\b")
# lsmod (kmod): "%-19s %8lu  %d" then the users, comma-separated.
_LSMOD_LINE = re.compile(r"^(\w+) +\d+  ?\d+(?: [\w,-]+)?$")
_LSMOD_HEADER = re.compile(r"^Module +Size +Used by$")


class ProcModules(Parsed):
    """The loaded modules. Keys: ``modules`` (names in file order) and ``error`` (the first line of the
    text when it names no module: the file is missing on a kernel without loadable modules, ...)."""

    modules: list[str] = Field(default_factory=list)
    error: str | None = None


def parse_proc_modules(text: str) -> ProcModules:
    """Parse the text of `/proc/modules`, or what `lsmod` printed.

    Args:
        text: The file's content or lsmod's output (whole or grepped).

    Returns:
        The module names; lines of another shape in ``unparsed_lines``.
    """
    result = ProcModules()
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if m := _LINE.match(raw.strip()) or _LSMOD_LINE.match(raw.strip()):
            result.modules.append(m.group(1))
        elif _LSMOD_HEADER.match(raw.strip()):
            continue
        else:
            result.unparsed_lines.append(raw)
    if not result.modules:
        result.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), "empty output")
    return result
