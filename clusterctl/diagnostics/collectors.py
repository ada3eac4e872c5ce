"""The collector table and its script, pure: what `check topology` reads on a node and how its output
is cut back into a bundle (no host contacted here; ``collect`` runs the script over SSH).

The collector table names each output (key), the command that prints it (argv), its kind (the parser
`inspect` also uses, so every file of a bundle can be inspected) and what the node must have for the
output to matter (GPUs, an RDMA fabric, or nothing). ``collection_script`` turns the table into a POSIX
shell script that runs every command in turn and frames its stdout, exit status and stderr tail between
marker lines; ``split_sections`` cuts the output back into one section per key and ``node_bundle`` into
a node's bundle. A command that is not installed is reported as exit status 127 by the script's own
``command -v`` test, so "missing" and "failed" stay distinct.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from clusterctl.diagnostics import parse
from clusterctl.diagnostics.bundle import NodeBundle, NodeMeta, SectionMeta, SectionStatus
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.parsers.peermem import PEERMEM_PATHS
from clusterctl.diagnostics.parsers.port_counters import IB_COUNTER_GLOBS

if TYPE_CHECKING:
    from clusterctl.hosts.command import CommandResult

Need = Literal["gpu", "rdma", "any"]

COMMAND_TIMEOUT_S = 30  # each command, when the node has coreutils' `timeout`
_STDERR_TAIL = 2000
_MARK = "@@clusterctl-collect@@"


@dataclass(frozen=True)
class Collector:
    """One output to collect: its key (file name in the bundle), command, kind (parser) and relevance."""

    key: str
    argv: tuple[str, ...]
    kind: str
    needs: Need
    ok_exits: frozenset[int] = frozenset({0})
    timeout_s: int = COMMAND_TIMEOUT_S

    def parse(self, text: str) -> Parsed:
        """Parse this collector's output with its kind's parser."""
        return parse(self.kind, text)


COLLECTORS: tuple[Collector, ...] = (
    Collector("nvidia-smi-topo", ("nvidia-smi", "topo", "-m"), "nvidia-smi-topo", "gpu"),
    Collector(
        "nvidia-smi-csv",
        ("nvidia-smi", "--query-gpu=index,name,driver_version,pci.bus_id,vbios_version", "--format=csv"),
        "nvidia-smi-csv",
        "gpu",
    ),
    Collector("ibstat", ("ibstat",), "ibstat", "rdma"),
    Collector("ibv-devinfo", ("ibv_devinfo", "-v"), "ibv-devinfo", "rdma"),
    Collector("ofed-info", ("ofed_info", "-s"), "ofed-info", "rdma"),
    Collector("ip-addr", ("ip", "-j", "addr"), "ip-addr", "any"),
    # The key predates the kind's name; bundles already on disk hold modules.txt.
    Collector("modules", ("cat", "/proc/modules"), "proc-modules", "rdma"),
    # ls exits 2 when some of the paths do not exist; that is the answer, not a failure.
    Collector("peermem", ("ls", "-d", *PEERMEM_PATHS), "peermem", "any", frozenset({0, 1, 2})),
    # ACS and link state of the bridges above GPUs and HCAs (ACSCtl needs root; without it lspci
    # prints "<access denied>" for the capabilities).
    Collector("lspci-vvv", ("lspci", "-vvv"), "lspci-vvv", "any"),
    Collector("nvidia-smi-q", ("nvidia-smi", "-q"), "nvidia-smi-q", "gpu"),
    Collector("proc-cmdline", ("cat", "/proc/cmdline"), "proc-cmdline", "gpu"),
    # The NVIDIA module's flavor (license) and kernel (vermagic): GPUDirect RDMA through DMA-BUF.
    Collector("modinfo-nvidia", ("modinfo", "nvidia"), "modinfo", "gpu"),
    # The HCA ports' data counters (4-byte words); grep exits 2 when a glob matched no file.
    Collector(
        "ib-counters",
        ("sh", "-c", f"grep -H . {IB_COUNTER_GLOBS}"),
        "sysfs-counters",
        "rdma",
        frozenset({0, 2}),
    ),
)
COLLECTOR_BY_KEY = {c.key: c for c in COLLECTORS}


def collection_script(collectors: Sequence[Collector] = COLLECTORS) -> str:
    """A POSIX sh script that runs every collector and frames each one's output.

    Each section is ``MARK begin KEY`` / stdout / ``MARK exit N`` / stderr tail / ``MARK end``; a
    newline is printed before each marker so output without a final newline cannot hide it.
    """
    lines = [
        'e=$(mktemp 2>/dev/null || echo "/tmp/clusterctl-collect.$$")',
        # t SECONDS ARGV...: the command under coreutils' `timeout` where the node has it.
        't() { s=$1; shift; if command -v timeout >/dev/null 2>&1; then timeout "$s" "$@"; else "$@"; fi; }',
    ]
    for c in collectors:
        lines += [
            f"printf '\\n%s\\n' {shlex.quote(f'{_MARK} begin {c.key}')}",
            f'if command -v {shlex.quote(c.argv[0])} >/dev/null 2>&1; then t {c.timeout_s} {shlex.join(c.argv)} </dev/null 2>"$e"; '
            "r=$?; else r=127; printf '%s: not installed\\n' " + shlex.quote(c.argv[0]) + ' >"$e"; fi',
            f"printf '\\n%s %s\\n' {shlex.quote(f'{_MARK} exit')} \"$r\"",
            f'tail -c {_STDERR_TAIL} "$e"',
            f"printf '\\n%s\\n' {shlex.quote(f'{_MARK} end')}",
        ]
    lines.append('rm -f "$e"')
    return "\n".join(lines) + "\n"


_SECTION = re.compile(
    rf"^{_MARK} begin (?P<key>\S+)\n(?P<out>.*?)\n{_MARK} exit (?P<rc>\d+)\n(?P<err>.*?)\n{_MARK} end$",
    re.M | re.S,
)


@dataclass(frozen=True)
class Section:
    """One collector's raw result as the script framed it."""

    stdout: str
    exit_status: int
    stderr_tail: str


def split_sections(output: str) -> dict[str, Section]:
    """Cut the script's output into sections by key; a key the output lacks is simply absent."""
    return {
        m["key"]: Section(stdout=m["out"], exit_status=int(m["rc"]), stderr_tail=m["err"])
        for m in _SECTION.finditer(output)
    }


def section_status(collector: Collector, section: Section | None) -> SectionStatus:
    """What a section's exit status means for ``collector``."""
    if section is None:
        return "no-answer"
    if section.exit_status in collector.ok_exits:
        return "ok"
    by_exit: dict[int, SectionStatus] = {127: "missing", 124: "timed-out"}
    return by_exit.get(section.exit_status, "failed")


def node_bundle(
    result: CommandResult, collected_at: str, collectors: Sequence[Collector] = COLLECTORS
) -> NodeBundle:
    """A node's bundle from the result of running :func:`collection_script` there (pure)."""
    sections = split_sections(result.stdout)
    meta = NodeMeta(
        node=result.node,
        collected_at=collected_at,
        duration_s=round(result.duration_s, 3),
        unreachable=result.unreachable,
        error=result.error
        or (None if result.exit_code in (0, None) else f"collection script exited {result.exit_code}"),
    )
    outputs: dict[str, str] = {}
    for c in collectors:
        section = sections.get(c.key)
        meta.sections[c.key] = SectionMeta(
            argv=list(c.argv),
            status=section_status(c, section),
            exit_status=section.exit_status if section else None,
            stderr_tail=section.stderr_tail if section else "",
        )
        if section is not None and meta.sections[c.key].status != "missing":
            outputs[c.key] = section.stdout
    return NodeBundle(meta=meta, outputs=outputs)
