"""What `clusterctl check health` does: the passive checks of every node, one read-only SSH call each,
judged into one verdict per node with a suggested action per finding.

What is read (collectors, in the one script per node that `check topology` also uses):

- ``kernel-log``: the Xid and SXid lines of `dmesg` since boot (dmesg itself failing is a failure,
  not an empty log);
- ``nvidia-smi-q``, ``lspci-vvv``, ``ibstat``: the topology collectors, judged by the topology rules
  (fabric registration, PCIe links below capability, IB ports down or below the inventory's rate) and
  by the health rules (memory errors, remapped rows, clock slowdowns, persistence);
- ``ib-port-errors`` and, ``window_s`` seconds later, ``ib-port-errors-2``: every HCA port's sysfs
  counters, so an error counter that rises (or a link that went down and came back) while we watch
  is seen. A node without HCAs skips the wait.

``--level standard|burn-in`` adds the active checks of ``clusterctl.diagnostics.active``: two more
collectors in the same script (nvbandwidth, dcgmi diag) and a single-node collective per node, whose
results ``HealthReport.add_collectives`` joins.

The verdict: ``unknown`` when the node could not be reached or a check it needs could not look,
``fail`` on an error, ``warn`` on a warning, ``ok`` otherwise. A check that could not look never
passes for healthy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clusterctl.diagnostics.active import (
    DCGM_KEY,
    H2D_KEY,
    OPTIONAL_KEYS,
    TIERS,
    Level,
    NodeCollective,
    collective_findings,
    dcgm_findings,
    h2d_findings,
    h2d_unknown,
    missing_dcgm_table,
)
from clusterctl.diagnostics.bundle import NodeBundle, NodeMeta, answered
from clusterctl.diagnostics.collect import bundle_of_every_node
from clusterctl.diagnostics.collectors import COLLECTOR_BY_KEY, COMMAND_TIMEOUT_S, Collector
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.parsers.dcgmi_diag import DcgmDiag
from clusterctl.diagnostics.parsers.kernel_log import KernelLog
from clusterctl.diagnostics.parsers.nvbandwidth import NvBandwidth
from clusterctl.diagnostics.parsers.nvidia_smi_q import NvidiaSmiQ
from clusterctl.diagnostics.parsers.port_counters import PortCounters
from clusterctl.diagnostics.rules_health import (
    gpu_count_rule,
    kernel_log_unknown,
    port_counter_gaps,
    port_error_rules,
    smi_health_rules,
    xid_rules,
)
from clusterctl.diagnostics.rules_node import judge_node, needs, section_findings
from clusterctl.findings import Finding
from clusterctl.inventory import Inventory, Node

SCHEMA = "clusterctl.check-health/2"
Verdict = Literal["ok", "warn", "fail", "unknown"]
DEFAULT_WINDOW_S = 5.0
# The second counter read waits inside one collector command, which gets COMMAND_TIMEOUT_S.
MAX_WINDOW_S = COMMAND_TIMEOUT_S - 10
_PORT_COUNTERS = "/sys/class/infiniband/*/ports/*/counters/*"
# dmesg's whole ring buffer stays on the node: only its Xid/SXid lines come back. A dmesg that fails
# (dmesg_restrict without root) fails the collector, with its message on stderr. grep -a: in a UTF-8
# locale GNU grep calls a line with an invalid byte binary and prints "binary file matches" on stderr
# instead of it, which hid the Xid lines; the parser counts such a line unreadable instead.
_KERNEL_LOG = (
    'out=$(dmesg 2>&1) || { printf "%s\\n" "$out" >&2; exit 1; }; '
    'printf "%s\\n" "$out" | grep -a -E "S?Xid \\(PCI:"; exit 0'
)
# The topology collectors whose outputs the health check also judges.
_SHARED = ("nvidia-smi-q", "lspci-vvv", "ibstat")
_HEALTH_KEYS = ("kernel-log", "ib-port-errors", "ib-port-errors-2", H2D_KEY, DCGM_KEY)
_ACTIVE_CODES = {
    H2D_KEY: ("h2d-bandwidth-low", "h2d-bandwidth-unknown"),
    DCGM_KEY: ("dcgm-diag-fail", "dcgm-diag-unknown"),
}


def health_collectors(window_s: float = DEFAULT_WINDOW_S, level: Level = "quick") -> tuple[Collector, ...]:
    """The collectors of `check health` at ``level``, the second IB counter read ``window_s`` seconds
    after the first.

    grep exits 2 when no counter file exists (no HCA): an answer, not a failure.
    """
    first = f"grep -H . {_PORT_COUNTERS}"
    second = f"ls {_PORT_COUNTERS} >/dev/null 2>&1 || exit 2; sleep {window_s:g}; {first}"
    return (
        Collector("kernel-log", ("sh", "-c", _KERNEL_LOG), "kernel-log", "gpu"),
        *(COLLECTOR_BY_KEY[key] for key in _SHARED),
        Collector("ib-port-errors", ("sh", "-c", first), "sysfs-counters", "rdma", frozenset({0, 2})),
        Collector("ib-port-errors-2", ("sh", "-c", second), "sysfs-counters", "rdma", frozenset({0, 2})),
        *TIERS[level].collectors(),
    )


@dataclass(frozen=True)
class ActiveStatus:
    """How one active check went on a node: ok, warn, fail or unknown, and why when not ok."""

    status: Verdict
    detail: str = ""


@dataclass
class NodeHealth:
    """One node's verdict, the checks it could not make, its findings and its active checks."""

    node: str
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    meta: NodeMeta | None = None
    active: dict[str, ActiveStatus] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: the verdict's reason (the worst finding, or what could not be checked)."""
        if self.verdict == "ok":
            return "healthy" + (f" ({len(self.findings)} notes)" if self.findings else "")
        order = {"error": 0, "warning": 1, "info": 2}
        worst = sorted(self.findings, key=lambda f: order[f.severity])
        if self.verdict == "unknown" and (not worst or worst[0].severity != "error"):
            return f"could not check: {', '.join(self.unknown)}"
        head = worst[0]
        more = len([f for f in worst if f.severity == head.severity]) - 1
        return f"{head.code}: {head.message}" + (f" (+{more} more)" if more > 0 else "")


@dataclass
class HealthReport:
    """Every inventory node's health, in inventory order, and where the bundle is."""

    bundle: Path
    window_s: float
    nodes: dict[str, NodeHealth]
    level: Level = "quick"
    collectives: list[NodeCollective] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        """Every finding of every node."""
        return [f for health in self.nodes.values() for f in health.findings]

    def add_collectives(self, results: list[NodeCollective], reference: float | None, basis: str) -> None:
        """Join the single-node collectives: each node's finding, its ``collective`` check and verdict."""
        self.collectives = [r for r in results if r.node in self.nodes]  # a saved file may name others
        measured = {r.node: r.measured for r in self.collectives}
        for finding in collective_findings(self.collectives, reference, basis):
            health = self.nodes[finding.node or ""]
            health.findings.append(finding)
            status = _verdict([finding], [])
            if not measured[health.node]:  # not started, or a figure that is no number
                status = "unknown"
                health.unknown.append("collective")
            health.active["collective"] = ActiveStatus(status, "" if status == "ok" else finding.message)
            health.verdict = _verdict(health.findings, health.unknown)

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (``schema`` names its version; bandwidths in GB/s)."""
        return {
            "schema": SCHEMA,
            "level": self.level,
            "bundle": str(self.bundle),
            "window_s": self.window_s,
            "nodes": {
                name: {
                    "verdict": health.verdict,
                    "unknown": health.unknown,
                    "active": {k: {"status": a.status, "detail": a.detail} for k, a in health.active.items()},
                    "findings": [f.model_dump() for f in health.findings],
                }
                for name, health in self.nodes.items()
            },
            "collectives": [
                {
                    "node": r.node,
                    "busbw_gb_s": r.busbw,
                    "samples_gb_s": list(r.samples),
                    "failures": list(r.failures),
                    "run_dirs": list(r.run_dirs),
                }
                for r in self.collectives
            ],
        }


def _parsed(collector: Collector, bundle: NodeBundle) -> Parsed | None:
    section = bundle.meta.sections.get(collector.key)
    text = bundle.outputs.get(collector.key)
    if section is None or section.status != "ok" or text is None:
        return None
    return collector.parse(text)


def _absent(node: Node, bundle: NodeBundle, collectors: Mapping[str, Collector]) -> list[tuple[str, Finding]]:
    """A warning (code ``health-input-missing``) per check this node needs whose input the bundle lacks:
    a passive collector it never ran (a topology bundle given to `check health`), or an active one
    beside another that ran. (A section its meta.json calls ok whose file is not there is a no-answer:
    ``bundle.answered``.)"""
    sections = bundle.meta.sections
    wanted = [c.key for c in health_collectors(level="quick")]
    if any(key in sections for key in _ACTIVE_CODES):  # collected at an active level: both its checks
        wanted += list(_ACTIVE_CODES)
    found = []
    for key in wanted:
        if not needs(node, collectors[key].needs):
            continue
        if key in sections:
            continue
        missing = Finding(
            severity="warning",
            code="health-input-missing",
            message=f"the bundle has no {key} section (a topology bundle, or one collected by another "
            "version), so its checks are unknown",
            advice="Judge a bundle `clusterctl check health` wrote, whole (`--from DIR`), or collect one "
            "again with `clusterctl check health`.",
            node=node.name,
        )
        found.append((key, missing))
    return found


def judge_health_node(
    inventory: Inventory, node: Node, bundle: NodeBundle | None, window_s: float = DEFAULT_WINDOW_S
) -> NodeHealth:
    """The verdict and findings of ``node`` from its part of a health bundle (None: not in it). Pure.

    Every input a check needs and could not read (missing, unreadable, partial, measured nothing) is
    named in ``unknown``, with a finding saying why: the node is then never ``ok``.
    """
    bundle = answered(bundle) if bundle is not None else None  # an ok section without its output: no-answer
    topology = judge_node(inventory, node, bundle)  # unreachable node, shared collectors, their rules
    findings = list(topology.findings)
    if bundle is None or bundle.meta.unreachable or not bundle.meta.sections:
        return NodeHealth(node=node.name, verdict="unknown", findings=findings, unknown=["everything"],
                          meta=bundle.meta if bundle else None)  # fmt: skip
    collectors = {c.key: c for c in health_collectors(window_s, "standard")}  # every key a bundle may hold
    unknown = [
        key
        for key, collector in collectors.items()
        if key in bundle.meta.sections
        and bundle.meta.sections[key].status != "ok"
        and needs(node, collector.needs)
        and not (key in OPTIONAL_KEYS and bundle.meta.sections[key].status == "missing")
    ]

    def unsure(key: str, found: list[Finding]) -> None:
        """``found`` joins the findings; when there are any, ``key``'s checks are unknown."""
        findings.extend(found)
        if found and key not in unknown:
            unknown.append(key)

    for key, missing in _absent(node, bundle, collectors):
        unsure(key, [missing])
    for key in _HEALTH_KEYS:
        if key in bundle.meta.sections:
            findings += section_findings(node, collectors[key], bundle.meta.sections[key])
    if isinstance(log := _parsed(collectors["kernel-log"], bundle), KernelLog):
        findings += xid_rules(log, node.name)
        unsure("kernel-log", kernel_log_unknown(log, node.name))
    if isinstance(smi := topology.facts.get("nvidia-smi-q"), NvidiaSmiQ) and needs(node, "gpu"):
        findings += smi_health_rules(smi, node.name)
        if bundle.meta.sections["nvidia-smi-q"].status == "ok":
            counted = gpu_count_rule(smi, node.gpus.count, node.name)
            findings += [f for f in counted if f.code != "gpu-count-unknown"]
            unsure("nvidia-smi-q", [f for f in counted if f.code == "gpu-count-unknown"])
    if isinstance(bandwidth := _parsed(collectors[H2D_KEY], bundle), NvBandwidth) and needs(node, "gpu"):
        findings += h2d_findings(bandwidth, node.name)
        unsure(H2D_KEY, h2d_unknown(bandwidth, node.name, node.gpus.count))
    if isinstance(diag := _parsed(collectors[DCGM_KEY], bundle), DcgmDiag) and needs(node, "gpu"):
        findings += dcgm_findings(diag, node.name)
        unsure(DCGM_KEY, missing_dcgm_table(diag, node.name))
    first = _parsed(collectors["ib-port-errors"], bundle)
    second = _parsed(collectors["ib-port-errors-2"], bundle)
    if isinstance(first, PortCounters):
        later = second if isinstance(second, PortCounters) else None
        findings += port_error_rules(first, later, window_s, node.name)
        if needs(node, "rdma") and "ib-port-errors-2" not in unknown:  # a failed second read says why already
            unsure("ib-port-errors", port_counter_gaps(first, later, node.name))
        if node.rdma and not first.ports and "ib-port-errors" not in unknown:
            unsure("ib-port-errors", [
                Finding(
                    severity="warning",
                    code="ib-port-counters-unknown",
                    message="no HCA port counters under /sys/class/infiniband, so port errors and flaps are "
                    "unknown",
                    advice="Check that the HCA driver (mlx5_ib) is loaded; `perfquery -x` reads the same "
                    "counters through the subnet manager's interface.",
                    node=node.name,
                )
            ])  # fmt: skip
    return NodeHealth(node=node.name, verdict=_verdict(findings, unknown), findings=findings,
                      unknown=unknown, meta=bundle.meta, active=_active(node, bundle, findings, unknown))  # fmt: skip


def _active(
    node: Node, bundle: NodeBundle, findings: list[Finding], unknown: list[str]
) -> dict[str, ActiveStatus]:
    """The status of each active check the bundle holds (none at level quick); one that could not
    measure is unknown, with the finding that says why."""
    statuses = {}
    for key, codes in _ACTIVE_CODES.items():
        section = bundle.meta.sections.get(key)
        if section is None:
            continue
        if not needs(node, "gpu"):
            statuses[key] = ActiveStatus("unknown", "no GPU on this node")
        elif section.status != "ok":
            statuses[key] = ActiveStatus("unknown", f"{section.argv[0]} {section.status}")
        else:
            mine = [f for f in findings if f.code in codes]
            status: Verdict = _verdict(mine, [key] if key in unknown else [])
            statuses[key] = ActiveStatus(status, mine[0].message if mine else "")
    return statuses


def _verdict(findings: list[Finding], unknown: list[str]) -> Verdict:
    severities = {f.severity for f in findings}
    if "error" in severities:
        return "fail"
    if unknown:
        return "unknown"
    return "warn" if "warning" in severities else "ok"


def judge_health(
    bundles: Mapping[str, NodeBundle],
    inventory: Inventory,
    directory: Path,
    window_s: float,
    level: Level = "quick",
) -> HealthReport:
    """Judge a health bundle (just collected, or read back) against the inventory's nodes. Pure."""
    nodes = {
        node.name: judge_health_node(inventory, node, bundles.get(node.name), window_s)
        for node in inventory.nodes
    }
    return HealthReport(bundle=directory, window_s=window_s, nodes=nodes, level=level)


def check_health(
    inventory: Inventory,
    directory: Path,
    *,
    saved: bool = False,
    timeout_s: float = 180,
    window_s: float = DEFAULT_WINDOW_S,
    level: Level = "quick",
) -> HealthReport:
    """Collect every node's health outputs (``level``'s collectors) into the bundle ``directory`` and
    judge them; the single-node collectives of the active levels are the run layer's
    (``clusterctl.check.health_collective``).

    With ``saved``, ``directory`` holds a health bundle collected earlier: it is judged (whatever
    level collected it), no host is contacted.

    Raises:
        InputError: a saved bundle that cannot be read or was collected with another inventory, or a
            directory that cannot be written.
    """
    collectors = health_collectors(window_s, level)
    bundles = bundle_of_every_node(
        inventory, directory, saved=saved, timeout_s=timeout_s, collectors=collectors
    )
    return judge_health(bundles, inventory, directory, window_s, level)
