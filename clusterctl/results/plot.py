"""The report as figures drawn like the whitepaper's and the Dell paper's scaling figures.

One figure per configuration: bars of median throughput per device count (one-node and several-node
bars coloured apart) with min-max whiskers and the speedup written on each bar, the ideal-scaling line
from the 1-device median, the predicted range (no overlap .. full overlap) as a shaded band where a
collective was measured, the scaling efficiency on a second axis, and the published reference points
(``references.yml``) where the configuration matches. ``plot_report`` writes them into one PNG, a
sub-figure each; ``configuration_png`` draws one alone (the HTML report embeds them one by one). Text is
drawn as written (``plain_text``: a ``$`` in a name starts no mathtext) and a figure that is not finite,
or too large to draw (``MAX_PLOTTED``), is left out like a missing one.
"""

from __future__ import annotations

import io
import math
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from clusterctl.errors import InputError
from clusterctl.results.report import COLLECTIVES
from clusterctl.results.report_table import amount

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import SubFigure

    from clusterctl.results.record import RunConfig
    from clusterctl.results.report import ReportRow

# Figures one PNG holds (one per configuration): 300 configurations took 25 s and 1 GB of memory.
MAX_PANELS = 12
ONE_NODE, SEVERAL_NODES = "#1f77b4", "#ff7f0e"
EFFICIENCY, REFERENCE, PREDICTED = "#2ca02c", "#d62728", "#7f7f7f"
# Readable names for the axis (the report's metric field names are not for people).
_METRICS = {"total_images_per_sec": "throughput", "avg_bus_bandwidth": "bus bandwidth"}
_UNITS = {"img/s": "images/s"}
_MODELS = {"resnet50": "ResNet-50", "resnet101": "ResNet-101", "resnet152": "ResNet-152",
           "vgg16": "VGG-16", "inception3": "Inception-v3"}  # fmt: skip
_NOTE = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}
# Figure size in inches of one configuration's figure; at 120 dpi 960 x 600 pixels.
SIZE = (8.0, 5.0)


# The largest figure drawn: matplotlib's tick locators overflow near float's limit (1.7e308 gave an
# OverflowError), and no throughput or bandwidth comes near it; a row beyond it is left out, as a NaN is.
MAX_PLOTTED = 1e300


def _finite(*values: float | None) -> bool:
    """Whether every value is a number that can be drawn: finite and within ``MAX_PLOTTED``."""
    return all(v is not None and math.isfinite(v) and abs(v) <= MAX_PLOTTED for v in values)


def plain_text() -> AbstractContextManager[None]:
    """Text drawn as it is written: a ``$`` in a recorded name (a model, a node, a reference) starts no
    mathtext, which could not parse it and raised. Figures are built and saved inside it."""
    return matplotlib.rc_context({"text.parse_math": False})


def title_of(config: RunConfig) -> str:
    """``ResNet-50, fp32, batch 8 per device, 64 px`` over ``ddp on cpu (1-core nodes)``: each name
    once (the workload only when it is not the model's own name)."""
    model = _MODELS.get(config.model, config.model)
    by = "" if config.workload == config.model else f" ({config.workload})"
    return (
        f"{model}{by}, {config.precision}, batch {config.batch_size} per device, {config.image_size} px\n"
        f"{config.framework} on {config.device}"
    )


def axis_label(metric: str, unit: str) -> str:
    """``throughput [images/s]``: the metric in words and its unit."""
    words = _METRICS.get(metric, metric.replace("_", " "))
    return f"{words} [{_UNITS.get(unit, unit)}]" if unit else words


def configurations(rows: list[ReportRow]) -> list[list[ReportRow]]:
    """The rows with finite figures grouped by configuration, each group by device count; the
    collectives (nccl-tests, allreduce) left out when there is anything else.

    Raises:
        InputError: no row has a number to plot.
    """
    groups: dict[str, list[ReportRow]] = {}
    # A collective's bus bandwidth feeds the predicted ranges; it is drawn only when nothing else is.
    scaled = [r for r in rows if r.config.workload not in COLLECTIVES] or rows
    for row in scaled:
        if _finite(row.median, row.minimum, row.maximum):
            groups.setdefault(row.config.model_dump_json(), []).append(row)
    if not groups:
        raise InputError("nothing to plot: the history has no valid run with a result.")
    return [sorted(g, key=lambda r: (r.devices, r.launcher != "ssh")) for g in groups.values()]


def draw_configuration(fig: Figure | SubFigure, group: list[ReportRow]) -> Axes:
    """Draw one configuration's figure into ``fig`` and return its throughput axes (the efficiency
    axes is its twin)."""
    ax = fig.add_subplot()
    x = list(range(len(group)))
    labels = [str(r.devices) + ("" if r.launcher == "ssh" else f"\n{r.launcher}") for r in group]
    medians = [r.median or 0.0 for r in group]
    whiskers = [[m - (r.minimum or 0) for m, r in zip(medians, group, strict=True)],
                [(r.maximum or 0) - m for m, r in zip(medians, group, strict=True)]]  # fmt: skip
    colours = [ONE_NODE if max(r.nodes) == 1 else SEVERAL_NODES for r in group]
    ax.bar(x, medians, yerr=whiskers, color=colours, capsize=4, width=0.6, zorder=2)
    base = next((r.median for r in group if r.devices == 1), None)
    ideal = [base * r.devices for r in group] if base else []
    ideal = ideal if _finite(*ideal) else []
    tops = [r.maximum if r.maximum is not None else m for r, m in zip(group, medians, strict=True)]
    predicted = [r.predicted.full_overlap for r in group if r.predicted and _finite(r.predicted.full_overlap)]
    highest = max([*tops, *ideal, *predicted])
    # The bars fill the lower two thirds; the efficiency line (85-100 % on its axis) runs above them.
    top = highest * 1.5 if _finite(highest * 1.5) else highest  # 1.5 x a huge figure overflows
    ax.set_ylim(0, top or 1.0)
    handles: list[object] = [Patch(color=ONE_NODE, label="one node"), Patch(color=SEVERAL_NODES,
                             label="several nodes")]  # fmt: skip
    if ideal:
        (line,) = ax.plot(x, ideal, "k--", marker=".", label="ideal scaling", zorder=3)
        handles.append(line)
    handles += _draw_predictions(ax, x, group)
    handles += _draw_references(ax, x, group, base)
    handles += _draw_efficiency(ax, x, group)
    # The labels go on the uppermost axes (the efficiency twin, when drawn), so its line never hides them.
    for xi, row, colour in zip(x, group, colours, strict=True):
        _label_bar(fig.axes[-1], ax, xi, row, colour)
    ax.set_xticks(x, labels)
    ax.set_title(title_of(group[0].config), fontsize=10)
    ax.set_xlabel("devices" + (" (CPU ranks)" if group[0].config.device.startswith("cpu") else " (GPUs)"))
    ax.set_ylabel(axis_label(group[0].metric, group[0].unit))
    ax.grid(axis="y", alpha=0.3, zorder=0)
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return ax


def _label_bar(on: Axes, ax: Axes, x: int, row: ReportRow, colour: str) -> None:
    """The speedup (bold) and the median written on the bar (drawn on the axes ``on``, placed in
    ``ax``'s data), inside its top on a patch of the bar's colour (over the whisker); above the bar when
    it is too short to hold them."""
    median = row.median or 0.0
    top = ax.get_ylim()[1]
    text = (f"{row.speedup:.2f}x\n" if row.speedup is not None else "") + amount(median)
    inside = median > 0.14 * top
    patch = {"boxstyle": "round,pad=0.15", "facecolor": colour if inside else "white", "edgecolor": "none"}
    on.annotate(text, (x, median), xycoords=ax.transData, xytext=(0, -4 if inside else 3), textcoords="offset points",
                ha="center", va="top" if inside else "bottom", fontsize=9, fontweight="bold",
                color="white" if inside else "black", zorder=5, bbox=patch)  # fmt: skip


def _draw_predictions(ax: Axes, x: list[int], group: list[ReportRow]) -> list[object]:
    """A shaded band over each bar with a prediction, from no overlap to full overlap."""
    drawn: list[object] = []
    for xi, row in zip(x, group, strict=True):
        p = row.predicted
        if p is not None and _finite(p.no_overlap, p.full_overlap):
            band = ax.fill_between([xi - 0.42, xi + 0.42], p.no_overlap, p.full_overlap, color=PREDICTED,
                                   alpha=0.35, zorder=4, label="predicted range (no .. full overlap)")  # fmt: skip
            drawn = [band]
    return drawn


def _draw_references(ax: Axes, x: list[int], group: list[ReportRow], base: float | None) -> list[object]:
    """The published speedups as stars at ``expected x base`` (the 1-device median), labelled."""
    drawn: list[object] = []
    for xi, row in zip(x, group, strict=True):
        for c in row.comparisons:
            if c.metric == "speedup" and base and _finite(c.expected * base):
                (star,) = ax.plot([xi], [c.expected * base], marker="*", markersize=13, color=REFERENCE,
                                  linestyle="none", zorder=6, label=f"reference: {c.reference}")  # fmt: skip
                ax.annotate(f"{c.expected:g}x ref", (xi, c.expected * base), xytext=(9, -3), fontsize=7,
                            textcoords="offset points", color=REFERENCE, zorder=6, bbox=_NOTE)  # fmt: skip
                drawn = [star]
    return drawn


def _draw_efficiency(ax: Axes, x: list[int], group: list[ReportRow]) -> list[object]:
    """Scaling efficiency (percent) on a second axis, and the published efficiencies as stars on it."""
    points = [
        (xi, 100 * r.efficiency)
        for xi, r in zip(x, group, strict=True)
        if r.efficiency is not None and _finite(100 * r.efficiency)
    ]
    if not points:
        return []
    twin = ax.twinx()
    (line,) = twin.plot(*zip(*points, strict=True), color=EFFICIENCY, marker="o", label="scaling efficiency",
                        zorder=3)  # fmt: skip
    for xi, row in zip(x, group, strict=True):
        for c in row.comparisons:
            if c.metric == "efficiency":
                twin.plot([xi], [100 * c.expected], marker="*", markersize=13, color=REFERENCE,
                          markeredgecolor=EFFICIENCY, linestyle="none", zorder=6)  # fmt: skip
                twin.annotate(f"{100 * c.expected:.0f}% ref", (xi, 100 * c.expected), xytext=(9, -3),
                              textcoords="offset points", fontsize=7, color=REFERENCE, bbox=_NOTE)  # fmt: skip
    twin.set_ylim(0, max(120.0, *(y * 1.1 for _, y in points)))
    twin.set_ylabel("scaling efficiency [%]", color=EFFICIENCY)
    twin.tick_params(axis="y", colors=EFFICIENCY)
    return [line]


def configuration_png(group: list[ReportRow], dpi: int = 100) -> bytes:
    """One configuration's figure on its own as PNG bytes (no pyplot state: nothing to close)."""
    buffer = io.BytesIO()
    with plain_text():
        fig = Figure(figsize=SIZE, layout="constrained")
        draw_configuration(fig, group)
        fig.savefig(buffer, dpi=dpi, format="png")
    return buffer.getvalue()


def plot_report(rows: list[ReportRow], path: Path) -> Path:
    """Write the figures of ``rows`` to exactly ``path`` (PNG, whatever its suffix), one per configuration
    stacked, and return it. At most ``MAX_PANELS`` configurations are drawn, the figure saying how many
    more there are; a row whose figures are not finite (an overflowing median) is left out.

    Raises:
        InputError: no row has a number to plot.
    """
    groups = configurations(rows)
    shown = groups[:MAX_PANELS]
    with plain_text():
        fig = Figure(figsize=(SIZE[0], SIZE[1] * len(shown)), layout="constrained")
        for sub, group in zip(fig.subfigures(len(shown), 1, squeeze=False)[:, 0], shown, strict=True):
            draw_configuration(sub, group)
        if len(groups) > len(shown):
            fig.text(0.01, 0.002, f"{len(groups) - len(shown)} more configurations not drawn (at most "
                     f"{MAX_PANELS}); `clusterctl report` lists them all", fontsize=8)  # fmt: skip
        fig.savefig(path, dpi=120, format="png")  # format given: matplotlib adds no suffix of its own
    return path
