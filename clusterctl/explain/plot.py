"""The explanation as a PNG: stacked phase times per node and, when the run recorded telemetry, the
nodes' fabric, CPU/GPU and storage over time (one panel each), like the Dell V100 study's figures. Names
are drawn as written (a ``$`` starts no mathtext) and a figure that cannot be drawn is left out."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeGuard

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from clusterctl.errors import InputError
from clusterctl.explain.explanation import Explanation
from clusterctl.explain.model import mean_or_none
from clusterctl.results.plot import MAX_PLOTTED, plain_text
from clusterctl.results.step import PHASES
from clusterctl.results.telemetry import Sample

Series = Callable[[Sample], float | None]


def _fabric(s: Sample) -> float | None:
    rates = [(r.tx_Bps or 0.0) + (r.rx_Bps or 0.0) for name, r in (s.net or {}).items() if name != "lo"]
    return sum(rates) / 1e6 if s.net else None


def _cpu(s: Sample) -> float | None:
    return None if s.cpu is None or s.cpu.util is None else 100 * s.cpu.util


def _gpu(s: Sample) -> float | None:
    mean = mean_or_none([g.util for g in s.gpus or []])
    return None if mean is None else 100 * mean


def _storage(s: Sample) -> float | None:
    if s.storage is None or (s.storage.read_Bps is None and s.storage.nfs_read_Bps is None):
        return None
    return ((s.storage.read_Bps or 0.0) + (s.storage.nfs_read_Bps or 0.0)) / 1e6


PANELS: tuple[tuple[str, Series], ...] = (
    ("fabric tx+rx [MB/s]", _fabric),
    ("CPU busy [%]", _cpu),
    ("GPU utilisation [%]", _gpu),
    ("storage read [MB/s]", _storage),
)


def _drawable(value: float | None) -> TypeGuard[float]:
    """Whether ``value`` can be drawn: finite and within ``MAX_PLOTTED`` (a sample or phase beyond it is
    no measurement, and matplotlib's tick locators overflow near float's limit)."""
    return value is not None and math.isfinite(value) and abs(value) <= MAX_PLOTTED


def _points(samples: Sequence[Sample], series: Series, start: float) -> tuple[list[float], list[float]]:
    """The drawable (time since ``start``, value) points of ``series``; any other is left out."""
    pairs = [(t, v) for s in samples if _drawable(v := series(s)) and _drawable(t := s.t - start)]
    return [t for t, _ in pairs], [v for _, v in pairs]


def plot_explanation(e: Explanation, telemetry: Mapping[str, Sequence[Sample]], path: Path) -> Path:
    """Write the figure for ``e`` (and its run's ``telemetry``) to exactly ``path`` and return it.

    Raises:
        InputError: the run has no breakdown and no telemetry: nothing to draw.
    """
    with plain_text():
        return _plot(e, telemetry, path)


def _plot(e: Explanation, telemetry: Mapping[str, Sequence[Sample]], path: Path) -> Path:
    panels = [(title, series) for title, series in PANELS
              if any(_drawable(series(s)) for samples in telemetry.values() for s in samples)]  # fmt: skip
    if not e.phases and not panels:
        raise InputError(
            f"--plot: run {e.run_id} recorded no per-step breakdown and no telemetry: nothing to plot."
        )
    fig, axes = plt.subplots(1 + len(panels), 1, figsize=(8, 3 + 2.2 * len(panels)), squeeze=False)
    bars = axes[0][0]
    hosts = [n.host for n in e.phases]
    bottom = [0.0] * len(hosts)
    for name in PHASES:
        # A phase that is no drawable figure is drawn as nothing; the bars' sum stays within float too.
        heights = [h if _drawable(h := n.phases_ms.get(name)) else 0.0 for n in e.phases]
        heights = [h if _drawable(b + h) else 0.0 for b, h in zip(bottom, heights, strict=True)]
        bars.bar(hosts, heights, bottom=bottom, label=name.replace("_", " "))
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    bars.set_ylabel("ms per step (mean of ranks)")
    bars.set_title(f"{e.run_id}: {e.verdict.code}", fontsize=10)
    if hosts:
        bars.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    start = min((s.t for samples in telemetry.values() for s in samples if _drawable(s.t)), default=0.0)
    for row, (title, series) in enumerate(panels, start=1):
        ax = axes[row][0]
        for node, samples in sorted(telemetry.items()):
            times, values = _points(samples, series, start)
            if values:
                ax.plot(times, values, label=node)
        ax.set_ylabel(title, fontsize=8)
        ax.set_ylim(bottom=0)
        if row > 1:  # one time axis for every telemetry panel
            ax.sharex(axes[1][0])
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if panels:
        axes[-1][0].set_xlabel("seconds since the first sample")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)
    return path
