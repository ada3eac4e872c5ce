"""`clusterctl check topology`, `check health` and `clusterctl collect`: gather host facts from every
node into a bundle, judge them against the inventory and show the verdicts and findings. `--from DIR`
judges a bundle saved earlier instead, without contacting any host."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import (
    InventoryOption,
    console,
    err_console,
    finite_seconds,
    load,
    markup_safe,
    print_json,
)
from clusterctl.cli.junit import JunitOption, checked_junit, health_cases, topology_cases, write_junit
from clusterctl.errors import InputError
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from rich.table import Table

    from clusterctl.check.drain import SlurmAction
    from clusterctl.diagnostics.active import Level, NodeCollective
    from clusterctl.diagnostics.bundle import NodeMeta
    from clusterctl.diagnostics.health import HealthReport
    from clusterctl.diagnostics.rules_cluster import TopologyReport
    from clusterctl.findings import Finding
    from clusterctl.inventory import Inventory

app = typer.Typer(help="Check the cluster's hosts against the inventory.", no_args_is_help=True)

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
_STATUS_STYLE = {"ok": "green", "missing": "yellow", "failed": "red", "timed-out": "red", "no-answer": "red"}
DEFAULT_TIMEOUT_S = 180.0
TimeoutOption = typer.Option(
    DEFAULT_TIMEOUT_S,
    "--timeout",
    min=1,
    callback=finite_seconds,
    help="Seconds each node gets for the whole collection.",
)


def default_bundle_dir() -> Path:
    """``runs/topology/<UTC time>/`` under the current directory."""
    return Path("runs") / "topology" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


@app.command("topology")
def topology(
    inventory_path: Path | None = InventoryOption,
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print {schema, bundle, nodes, cluster_findings} as JSON (schema clusterctl.check-topology/1).",
    ),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    bundle: Path | None = typer.Option(
        None, "--bundle", help="Where to write the bundle. Default: runs/topology/<UTC time>/."
    ),
    source: Path | None = typer.Option(
        None,
        "--from",
        help="Judge this saved bundle (from `check topology`, `collect -o` or a run's topology/) instead "
        "of collecting; no host is contacted.",
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        min=1,
        callback=finite_seconds,
        help=f"Seconds each node gets for the whole collection. Default: {DEFAULT_TIMEOUT_S:g}.",
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Also the fact tables (tools, IB ports, GPU to NIC, versions, addressing) and every finding, "
        "info included.",
    ),
    junit: Path | None = JunitOption,
    runs_dir: Path = typer.Option(
        Path("runs"),
        "--runs-dir",
        help="Where recorded runs are read: with run.data, each node's read rate is compared with the best "
        "training rate recorded there for this inventory's device.",
    ),
) -> int:
    """Collect GPU, IB, OFED, address and module facts on every node, judge them: a verdict per node,
    then the errors and warnings."""
    from clusterctl.diagnostics.check import SCHEMA, check_topology
    from clusterctl.findings import exit_code

    if source is not None and (bundle is not None or timeout is not None):
        given = f"--bundle {bundle}" if bundle is not None else f"--timeout {timeout:g}"
        raise InputError(
            f"--from {source} and {given} together: --from judges a saved bundle, collects nothing and "
            "writes none. Fix: drop --bundle/--timeout to re-judge the saved bundle, or drop --from to "
            "collect a new one."
        )
    junit = checked_junit(junit)
    inventory = load(inventory_path)
    directory = source or bundle or default_bundle_dir()
    report = check_topology(
        inventory, directory, saved=source is not None, timeout_s=timeout or DEFAULT_TIMEOUT_S
    )
    if source is None:  # the dataset under run.data is read on the nodes, never from a saved bundle
        from clusterctl.data.storage import storage_findings
        from clusterctl.results.history import load_runs
        from clusterctl.results.input_need import input_need

        need = None if inventory.run.data == "synthetic" else input_need(inventory, load_runs(runs_dir).runs)
        report.cluster.extend(storage_findings(inventory, need))
    write_junit(junit, "check topology", topology_cases(report, strict=strict))
    if as_json:
        print_json(
            {
                "schema": SCHEMA,
                "bundle": str(directory),
                "nodes": {
                    name: {"findings": [f.model_dump() for f in r.findings]}
                    for name, r in report.nodes.items()
                },
                "cluster_findings": [f.model_dump() for f in report.cluster],
            }
        )
    else:
        _show(inventory, report, verbose=verbose)
        done = "judged from" if source is not None else "written to"
        err_console.print(safe_text(f"bundle {done} {directory}"), highlight=False, markup=False)
    return exit_code(report.findings, strict=strict)


def window_seconds(value: float) -> float:
    """``--window``'s callback: the seconds refused unless finite (the range check lets nan through).

    Raises:
        typer.BadParameter: nan (a usage error: exit 2); inf and negatives fail the range check first.
    """
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value!r} is not a number of seconds. Fix: give the seconds between the two "
                                 "counter reads as a plain number from 1 to 20, e.g. 5.")  # fmt: skip
    return value


_VERDICT_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "unknown": "red"}


@app.command("health")
def health(
    inventory_path: Path | None = InventoryOption,
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print the report as JSON (schema clusterctl.check-health/2, see docs/check.md).",
    ),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    bundle: Path | None = typer.Option(
        None, "--bundle", help="Where to write the bundle. Default: runs/health/<UTC time>/."
    ),
    source: Path | None = typer.Option(
        None, "--from", help="Judge this saved health bundle instead of collecting; no host is contacted."
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        min=1,
        callback=finite_seconds,
        help=f"Seconds each node gets for the whole collection (each command 30 s at most, nvbandwidth and "
        f"dcgmi their own bound). Default: {DEFAULT_TIMEOUT_S:g}, plus the level's commands' bounds.",
    ),
    level: str = typer.Option(
        "quick",
        "--level",
        help="quick: the passive checks (at most --timeout per node, all nodes at once). standard: also "
        "nvbandwidth's host-to-GPU copy (120 s) and `dcgmi diag -r 2` (600 s) in the same script (default "
        "--timeout 900 s), then a single-node collective on each node, one after another (at most 120 s each). "
        "burn-in: `dcgmi diag -r 3` (3600 s; default --timeout 3900 s) and the collective sustained: 5 runs "
        "of every size, at most 600 s each, per node. GPU checks say unknown on CPU nodes.",
    ),
    runs_dir: Path = typer.Option(
        Path("runs"),
        "--runs-dir",
        help="Where the collectives' run directories go (--level standard/burn-in).",
    ),
    window: float = typer.Option(
        5.0,
        "--window",
        min=1,
        max=20,
        callback=window_seconds,
        help="Seconds between the two reads of the IB port counters (a link that flaps between them is "
        "found); nodes without HCAs do not wait.",
    ),
    slurm_drain: bool = typer.Option(
        False,
        "--slurm-drain",
        help="Drain every node whose verdict is fail in Slurm (scontrol on the inventory's login node), "
        "with the worst finding as the reason. Nodes are never resumed automatically.",
    ),
    slurm_resume: list[str] = typer.Option(
        [], "--slurm-resume", help="Resume this drained node in Slurm after the check (repeatable)."
    ),
    junit: Path | None = JunitOption,
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="A verdict line and a findings row for every node (none folded)."
    ),
) -> int:
    """Passive health checks of every node: Xid/SXid events, GPU memory errors and remapped rows, clock
    slowdowns, IB port errors and flaps, PCIe links; one verdict per node, an action per finding."""
    from clusterctl.check.drain import SlurmAction, drain_reason
    from clusterctl.check.scontrol import apply_actions
    from clusterctl.diagnostics.active import LEVELS, TIERS
    from clusterctl.diagnostics.health import check_health
    from clusterctl.findings import exit_code

    if level not in LEVELS:
        raise InputError(
            f"--level {level!r}: use {', '.join(LEVELS)} (see --help for what each runs and its bounds)."
        )

    if source is not None and (bundle is not None or timeout is not None):
        given = f"--bundle {bundle}" if bundle is not None else f"--timeout {timeout:g}"
        raise InputError(
            f"--from {source} and {given} together: --from judges a saved bundle, collects nothing and "
            "writes none. Fix: drop --bundle/--timeout, or drop --from to collect a new one."
        )
    if slurm_drain and slurm_resume:
        raise InputError(
            f"--slurm-drain and --slurm-resume {', '.join(slurm_resume)} together: the check may drain "
            f"{'that node' if len(slurm_resume) == 1 else 'those nodes'} for a failure and the same command "
            "would then resume it. Fix: run the check with --slurm-drain alone, then `check health "
            "--slurm-resume NODE` once the node is repaired."
        )
    junit = checked_junit(junit)
    inventory = load(inventory_path)
    names = {n.name for n in inventory.nodes}
    strangers = [n for n in slurm_resume if n not in names]
    if strangers:
        raise InputError(
            f"--slurm-resume {', '.join(strangers)}: not a node of inventory {inventory.cluster.name!r} "
            f"(its nodes: {', '.join(sorted(names))}). Fix: name an inventory node."
        )
    if (slurm_drain or slurm_resume) and inventory.slurm is None:
        raise InputError(
            "--slurm-drain/--slurm-resume need the inventory's slurm block (the login node scontrol runs on). "
            "Fix: add slurm.login to the inventory, or drop the option."
        )
    directory = source or bundle or Path("runs") / "health" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tier = TIERS[tier_level(level)]
    report = check_health(
        inventory,
        directory,
        saved=source is not None,
        timeout_s=timeout or DEFAULT_TIMEOUT_S + tier.script_s(),
        window_s=window,
        level=tier_level(level),
    )
    _join_collectives(report, inventory, source, directory, runs_dir, as_json)
    actions = [
        SlurmAction(name, "drain", drain_reason(h.summary()))
        for name, h in report.nodes.items()
        if slurm_drain and h.verdict == "fail"
    ] + [SlurmAction(name, "resume", "") for name in slurm_resume]
    done = apply_actions(inventory, actions) if actions else []
    write_junit(junit, "check health", health_cases(report))
    if as_json:
        slurm = [
            {"node": a.node, "state": a.state, "reason": a.reason, "ok": a.ok, "detail": a.detail}
            for a in done
        ]
        print_json({**report.to_json(), "slurm": slurm})
    else:
        _show_health(report, done, verbose=verbose)
        done_word = "judged from" if source is not None else "written to"
        err_console.print(safe_text(f"bundle {done_word} {directory}"), highlight=False, markup=False)
    # A node whose checks could not look is not called healthy: it fails the command like an error.
    unsure = any(h.verdict == "unknown" for h in report.nodes.values()) or any(not a.ok for a in done)
    return max(exit_code(report.findings, strict=strict), int(unsure))


def tier_level(text: str) -> Level:
    """``--level``'s text as a level (checked against ``LEVELS`` first)."""
    from clusterctl.diagnostics.active import LEVELS

    return next(level for level in LEVELS if level == text)


def _join_collectives(
    report: HealthReport,
    inventory: Inventory,
    source: Path | None,
    directory: Path,
    runs_dir: Path,
    quiet: bool,
) -> None:
    """The single-node collectives into ``report``: run now (an active level, collecting) and saved
    into the bundle, or read back from a saved bundle that holds them."""
    from clusterctl.check.health_collective import (
        load_collectives,
        reference,
        run_collectives,
        save_collectives,
    )

    if source is not None:
        results = load_collectives(source)
    elif report.level != "quick":

        def progress(result: NodeCollective) -> None:
            if not quiet:
                figures = ", ".join(f"{s:.3g}" for s in result.samples) or "; ".join(result.failures)
                err_console.print(
                    safe_text(f"collective on {result.node}: {figures} GB/s"), markup=False, highlight=False
                )

        results = run_collectives(inventory, report.level, runs_dir, on_node=progress)
        save_collectives(directory, results)
    else:
        results = None
    if results is not None:
        report.add_collectives(results, *reference(inventory))


def _show_health(report: HealthReport, done: list[SlurmAction], *, verbose: bool = False) -> None:
    """The summary line first (nodes per verdict, findings per severity), then a verdict line per set of
    nodes that say the same (folded: ``node[01-63]  OK  healthy``), then the errors and warnings wrapped
    under their codes, the nodes that share one folded, then what was done in Slurm. ``verbose``: a line
    per node and the findings' table."""
    from collections import Counter

    from clusterctl.cli.verdicts import counted, print_findings, print_folded, print_summary, verdict_counts

    words = {v: f"{v.upper():<7}" for v in ("fail", "unknown", "warn", "ok")}
    tally = Counter(h.verdict.upper() for h in report.nodes.values())
    found = counted(report.findings) or "no errors or warnings"
    print_summary(console, f"{verdict_counts(tally, ('FAIL', 'UNKNOWN', 'WARN', 'OK'))}; {found}")
    said = {name: (words[h.verdict], h.summary()) for name, h in report.nodes.items()}
    order = {word: i for i, word in enumerate(words.values())}
    styles = {words[v]: style for v, style in _VERDICT_STYLE.items()}
    print_folded(console, said, every=verbose, order=order, styles=styles, cut=True)
    shown = [f for f in report.findings if f.severity != "info"]
    if shown and verbose:
        console.print(findings_table(shown))
    else:  # wrapped under their codes, the nodes that share one folded: reads at 80 columns
        print_findings(console, shown)
    for a in done:
        what = f"{a.state} {a.node}" + (f" ({a.reason})" if a.reason else "")
        outcome = "done" if a.ok else markup_safe("failed: " + a.detail)
        console.print(f"slurm: {markup_safe(what)}: {outcome}", highlight=False)


def collect_command(
    inventory_path: Path | None = InventoryOption,
    output: Path = typer.Option(
        ..., "--output", "-o", help="Directory for the bundle (DIR/<node>/<key>.txt)."
    ),
    timeout: float = TimeoutOption,
) -> int:
    """Write the topology bundle only (no judgement); exit 1 when a node could not be reached."""
    from clusterctl.diagnostics.collect import collect_bundle

    inventory = load(inventory_path)
    bundles = collect_bundle(inventory, inventory.nodes, output, timeout_s=timeout)
    _show_collected({name: b.meta for name, b in bundles.items()})
    console.print(safe_text(f"bundle written to {output}"), highlight=False, markup=False)
    return 1 if any(b.meta.unreachable or b.meta.error for b in bundles.values()) else 0


def _show_collected(metas: dict[str, NodeMeta]) -> None:
    """One line per node: reached or not, its seconds, and how many tools answered, were missing or
    failed (`check topology -v` has the table of every tool)."""
    from collections import Counter

    from clusterctl.cli.verdicts import verdict_line

    width = max((len(name) for name in metas), default=0)
    for name, meta in metas.items():
        if meta.unreachable or meta.error:
            line = verdict_line(name, width, "FAIL", meta.error or "unreachable")
        else:
            counts = Counter(section.status for section in meta.sections.values())
            tools = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
            line = verdict_line(name, width, "ok", f"{meta.duration_s:.1f} s; tools: {tools}")
        console.print(line, highlight=False)


def findings_table(findings: list[Finding]) -> Table:
    """Findings with their node, worst first."""
    from rich.table import Table

    table = Table(title="findings", show_header=True, header_style="bold")
    for column in ("severity", "node", "code", "message", "advice"):
        table.add_column(column, overflow="fold")
    order = {"error": 0, "warning": 1, "info": 2}
    for f in sorted(findings, key=lambda f: order[f.severity]):
        style = _SEVERITY_STYLE[f.severity]
        table.add_row(
            f"[{style}]{f.severity}[/]",
            *map(markup_safe, (f.node or "(cluster)", f.code, f.message, f.advice)),
        )
    return table


def _tools_table(metas: dict[str, NodeMeta]) -> Table:
    from rich.table import Table

    from clusterctl.diagnostics.collectors import COLLECTORS

    table = Table(title="reachability and tools", header_style="bold")
    for column in ("node", "reached", "seconds", *(c.key for c in COLLECTORS)):
        table.add_column(column)
    for name, meta in metas.items():
        statuses = [meta.sections.get(c.key) for c in COLLECTORS]
        table.add_row(
            name,
            "[red]no[/]" if meta.unreachable else ("[red]error[/]" if meta.error else "yes"),
            f"{meta.duration_s:.1f}",
            *(f"[{_STATUS_STYLE[s.status]}]{s.status}[/]" if s else "-" for s in statuses),
        )
    return table


def _show(inventory: Inventory, report: TopologyReport, verbose: bool) -> None:
    """The summary line first, then a verdict line per set of nodes that say the same (folded,
    ``node[001-127]  ok``), then the errors and warnings wrapped under their codes; ``verbose``: a verdict
    line per node, the fact tables and every finding (info too)."""
    from clusterctl.cli.verdicts import CLUSTER, print_findings, print_summary, print_verdicts, summary_line

    per_node = {name: r.findings for name, r in report.nodes.items()} | {CLUSTER: report.cluster}
    print_summary(console, summary_line(per_node))
    print_verdicts(console, per_node, every=verbose)
    if verbose:
        _fact_tables(inventory, report)
        if report.findings:
            console.print(findings_table(report.findings))
    else:
        print_findings(console, [f for f in report.findings if f.severity != "info"])


def _fact_tables(inventory: Inventory, report: TopologyReport) -> None:
    """The tables of what was collected: tools, IB ports, GPU to nearest NIC, versions, addressing."""
    from rich.table import Table

    from clusterctl.diagnostics.parsers.ibstat import IbStat
    from clusterctl.diagnostics.parsers.ip_addr import IpAddr
    from clusterctl.diagnostics.parsers.nvidia_smi_topo import NvidiaSmiTopo
    from clusterctl.diagnostics.rules_cluster import node_versions

    console.print(_tools_table({name: r.meta for name, r in report.nodes.items() if r.meta}))
    ports = Table(title="IB ports (ibstat)", header_style="bold")
    for column in ("node", "CA", "type", "firmware", "port", "state", "physical", "rate Gb/s", "link layer"):
        ports.add_column(column)
    gdr = Table(title="GPU to nearest NIC (nvidia-smi topo -m)", header_style="bold")
    for column in ("node", "GPU", "nearest NIC", "path", "CPU affinity"):
        gdr.add_column(column)
    versions = Table(title="versions", header_style="bold")
    for column in ("node", "ofed", "nvidia-driver", "hca-firmware"):
        versions.add_column(column)
    addressing = Table(title="fabric addressing (ip -j addr)", header_style="bold")
    for column in ("node", "interface", "inventory", "on the node", "state"):
        addressing.add_column(column)
    for node in inventory.nodes:
        facts = report.nodes[node.name].facts
        if isinstance(ib := facts.get("ibstat"), IbStat):
            for ca in ib.cas:
                for p in ca.ports:
                    rate = f"{p.rate:g}" if p.rate is not None else "?"
                    ports.add_row(*map(markup_safe, (node.name, ca.name, ca.type or "?", ca.firmware or "?", str(p.port),
                                  p.state or "?", p.physical_state or "?", rate, p.link_layer or "?")))  # fmt: skip
        else:
            ports.add_row(node.name, "unknown", *[""] * 7)
        if isinstance(topo := facts.get("nvidia-smi-topo"), NvidiaSmiTopo) and topo.gpus:
            for gpu in topo.gpus:
                nic, path = topo.nearest_nic(gpu) or ("none", "")
                gdr.add_row(*map(markup_safe, (node.name, gpu, nic, path, topo.cpu_affinity.get(gpu, ""))))
        else:
            gdr.add_row(node.name, "unknown", "", "", "")
        versions.add_row(
            *map(
                markup_safe,
                (node.name, *(v or "unknown" for v in node_versions(node, report.nodes[node.name]).values())),
            )
        )
        wanted = str(node.fabric.address) if node.fabric.address else "(not set)"
        if isinstance(ip := facts.get("ip-addr"), IpAddr) and not ip.error:
            interface = ip.interface(node.fabric.interface)
            has = ", ".join(interface.addresses) if interface else "no such interface"
            addressing.add_row(
                *map(
                    markup_safe,
                    (
                        node.name,
                        node.fabric.interface,
                        wanted,
                        has,
                        interface.state or "?" if interface else "",
                    ),
                )
            )
        else:
            addressing.add_row(node.name, node.fabric.interface, wanted, "unknown", "")
    for table in (ports, gdr, versions, addressing):
        console.print(table)
