"""The report as a PNG, in the style of the whitepaper's scale-up vs scale-out figure.

One panel per configuration: bars of median throughput per device count (single-node bars and
multi-node bars coloured apart), min-max whiskers, and the ideal-scaling line from the 1-device run.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from clusterctl.errors import InputError
from clusterctl.results.report import ReportRow

# Panels one figure draws (one per configuration): 300 configurations took 25 s and 1 GB of memory.
MAX_PANELS = 12


def _figure(value: float) -> str:
    """A throughput for a bar's label: whole numbers from 100 up, else three significant digits
    (a sandbox's 1.7 img/s must not read as 2)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def plot_report(rows: list[ReportRow], path: Path) -> Path:
    """Write the scaling figure for ``rows`` to exactly ``path`` (PNG, whatever its suffix) and return it.

    At most ``MAX_PANELS`` configurations are drawn, the figure saying how many more there are; a row
    whose figures are not finite (an overflowing median) is left out.

    Raises:
        InputError: no row has a number to plot.
    """
    groups: dict[str, list[ReportRow]] = {}
    for row in rows:
        if _finite(row.median, row.minimum, row.maximum):
            groups.setdefault(row.config.model_dump_json(), []).append(row)
    if not groups:
        raise InputError("nothing to plot: the history has no valid run with a result.")
    shown = list(groups.values())[:MAX_PANELS]
    fig, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown), 4.5), squeeze=False)
    if len(groups) > len(shown):
        fig.text(0.01, 0.01, f"{len(groups) - len(shown)} more configurations not drawn (at most {MAX_PANELS} "
                 "panels); `clusterctl report` lists them all", fontsize=8)  # fmt: skip
    for ax, group in zip(axes[0], shown, strict=True):
        group.sort(key=lambda r: r.devices)
        labels = [str(r.devices) + ("" if r.launcher == "ssh" else f"\n{r.launcher}") for r in group]
        medians = [r.median or 0.0 for r in group]
        errors = [
            [(r.median or 0) - (r.minimum or 0) for r in group],
            [(r.maximum or 0) - (r.median or 0) for r in group],
        ]
        colours = ["#1f77b4" if max(r.nodes) == 1 else "#ff7f0e" for r in group]
        ax.bar(labels, medians, yerr=errors, color=colours, capsize=4)
        for x, row in enumerate(group):
            note = _figure(row.median or 0.0) + (f"\n{row.speedup:.2f}x" if row.speedup else "")
            # above the whisker, clear of it and of the ideal-scaling marker at the median
            top = row.maximum if row.maximum is not None else row.median or 0.0
            ax.annotate(
                note,
                (x, top),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
        base = next((r.median for r in group if r.devices == 1), None)
        ideal = [base * r.devices for r in group] if base else []
        ideal = ideal if _finite(*ideal) else []
        if ideal:
            ax.plot(labels, ideal, "k--", marker=".", label="ideal scaling")
            ax.legend(loc="upper left")
        # headroom above the highest whisker, label or ideal point for the labels and the legend
        highest = max([*(r.maximum or r.median or 0.0 for r in group), *ideal])
        top = highest * 1.3 if _finite(highest * 1.3) else highest  # 1.3 x a huge figure overflows
        ax.set_ylim(0, top or 1.0)
        c = group[0].config
        ax.set_title(f"{c.workload} {c.model} {c.precision} bs{c.batch_size} ({c.framework}, {c.device})")
        ax.set_xlabel("devices (blue: one node, orange: several nodes)")
        ax.set_ylabel(f"{group[0].metric} [{group[0].unit}]")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")  # format given: matplotlib adds no suffix of its own
    plt.close(fig)
    return path
