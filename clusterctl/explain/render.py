"""The explanation on a terminal: verdict first, the phase table per node, POP, MFU, then the findings
with advice; readable at 80 columns. Rich is imported on use; every text goes through ``safe_text``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.explain.explanation import Explanation, NodePhases
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

_HEADERS = (("input", "input"), ("forward", "fwd"), ("backward", "bwd"), ("exposed_comm", "comm"),
            ("optimizer", "opt"))  # fmt: skip


def _ms(value: float | None) -> str:
    """A phase's milliseconds: a tenth below a second; whole milliseconds above, so that steps of ten
    seconds and more (a CPU at full ImageNet size) still fit nine columns in 80 without an ellipsis."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def _phase_table(phases: list[NodePhases]) -> Table:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="ms per step (mean of ranks)",
                  title_justify="left")  # fmt: skip
    table.add_column("node", overflow="fold")
    table.add_column("ranks", justify="right")
    for _, header in _HEADERS:
        table.add_column(header, justify="right")
    table.add_column("step", justify="right")
    table.add_column("useful", justify="right")
    for node in phases:
        ranks = str(len(node.ranks))
        cells = [_ms(node.phases_ms.get(name)) for name, _ in _HEADERS]
        table.add_row(Text(safe_text(node.host)), ranks, *cells, _ms(node.step_ms), _ms(node.useful_ms))
    return table


def pop_line(e: Explanation) -> str:
    if e.pop is None:
        return "POP: unknown (not every rank printed a breakdown)"
    p = e.pop
    return (f"POP: parallel efficiency {p.parallel_efficiency:.2f} = load balance {p.load_balance:.2f} "
            f"x comm. efficiency {p.communication_efficiency:.2f}")  # fmt: skip


def scaling_line(e: Explanation) -> str:
    s = e.scaling
    if s is None:
        return "computation scalability: unknown (no run of this configuration on fewer devices)"
    ref = s.reference
    devices = f"{ref.devices} device{'s' if ref.devices > 1 else ''}"
    ge = "" if s.global_efficiency is None else f"; global efficiency {s.global_efficiency:.2f}"
    return (f"computation scalability {s.computation_scalability:.2f} ({ref.compute_ms:,.0f} ms of compute "
            f"per step on {devices}, {s.compute_ms:,.0f} here){ge}")  # fmt: skip


def mfu_line(e: Explanation) -> str:
    f = e.flops
    if f is None:
        return "MFU: unknown (no FLOPs record)"
    if f.mfu is None or f.peak_tflops is None:
        return f"MFU: unknown peak; achieved {f.achieved_tflops:.3g} TFLOP/s"
    return (f"MFU: {100 * f.mfu:.1f}% ({f.achieved_tflops:.3g} TFLOP/s of {f.peak_tflops:.3g} per device, "
            f"{f.peak_source} peak)")  # fmt: skip


def print_explanation(e: Explanation, out: Console) -> None:
    """Print ``e`` on ``out``, wrapped at its width."""

    def say(text: str, style: str | None = None) -> None:
        out.print(safe_text(text), style=style, markup=False, highlight=False, soft_wrap=False)

    say(e.verdict.line, "bold")
    status = "" if e.valid else " (INVALID)"
    say(f"run {e.run_id}{status}: {e.workload} {e.framework}, {e.world_size} ranks on {e.nodes} nodes, "
        f"{e.throughput or 'no result'}")  # fmt: skip
    if e.selection:
        say(e.selection, "dim")
    if e.phases:
        out.print(_phase_table(e.phases))
    say(pop_line(e))
    say(scaling_line(e))
    say(mfu_line(e))
    if e.bus_bandwidth_gb_s is not None:
        say(f"preflight bus bandwidth: {e.bus_bandwidth_gb_s:.3g} GB/s")  # the sandbox's 0.0149, never 0.01
    telemetry = ", ".join(e.telemetry_nodes) or "none recorded"
    say(f"telemetry: {telemetry}")
    for d in (d for d in e.diagnoses if d.status == "found"):
        say(f"{d.severity} {d.code}: {d.message}", "yellow" if d.severity == "warning" else "red")
        if d.advice:
            say(f"  advice: {d.advice}")
    for d in (d for d in e.diagnoses if d.status != "found"):
        say(f"{d.code}: {'' if d.status == 'unknown' else 'clear: '}{d.message}", "dim")
