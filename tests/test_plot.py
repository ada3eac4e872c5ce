"""`report --plot`'s figure has what the whitepaper's and the Dell paper's figures have, read through
matplotlib's objects (titles, labels, the text on the bars), not pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from clusterctl.errors import InputError
from clusterctl.results.plot import axis_label, draw_configuration, plot_report, title_of
from clusterctl.results.predict import predict_throughput
from clusterctl.results.references import load_references
from clusterctl.results.report import ReportRow, build_report
from tests.helpers.records import PAPER_RUNS, V100, record

# The quickstart's configuration: 1-core sandbox nodes, small synthetic images.
SANDBOX = V100.model_copy(
    update={"workload": "resnet50", "precision": "fp32", "batch_size": 8, "image_size": 64,
            "image_profile": "cpu", "device": "cpu (1-core nodes)"}
)  # fmt: skip


def _paper_rows() -> list[ReportRow]:
    """The whitepaper's figures (640 img/s on 1 GPU, 3.9x on 4, 6.9x on 8) with a prediction at 4 and 8."""
    rows = build_report(PAPER_RUNS, load_references())
    for row in rows:
        if row.devices > 1:  # ResNet-50's 102 MB of gradients at 10 GB/s bus bandwidth
            row.predicted = predict_throughput(single_device=640, batch_size=256, devices=row.devices,
                                               gradient_bytes=102_000_000, bus_bandwidth_gb_s=10.0)  # fmt: skip
    return rows


def _draw(rows: list[ReportRow]) -> tuple[Axes, Axes | None, Figure]:
    fig = Figure()
    ax = draw_configuration(fig, rows)
    twins = [a for a in fig.axes if a is not ax]
    return ax, twins[0] if twins else None, fig


def _ys(line: Line2D) -> list[float]:
    return [float(y) for y in np.asarray(line.get_ydata(), dtype=float)]


def _xy(line: Line2D) -> tuple[float, float]:
    return float(np.asarray(line.get_xdata(), dtype=float)[0]), _ys(line)[0]


def _texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _everywhere(fig: Figure) -> set[str]:
    """The texts of every axes of ``fig`` (the bar labels sit on the uppermost one)."""
    return {text for axes in fig.axes for text in _texts(axes)}


def test_the_paper_configuration_has_every_element_of_the_papers_figures() -> None:
    ax, efficiency, fig = _draw(_paper_rows())
    assert ax.get_title() == (
        "ResNet-50 (tf_cnn_benchmarks), fp16, batch 256 per device, 224 px\nhorovod on V100-SXM2-16GB"
    )
    assert ax.get_ylabel() == "throughput [images/s]" and ax.get_xlabel() == "devices (GPUs)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "8"]
    # the speedup written on each bar, over its median
    assert {"1.00x\n640", "3.90x\n2,496", "6.91x\n4,420"} <= _everywhere(fig)
    ideal = next(line for line in ax.lines if line.get_label() == "ideal scaling")
    assert _ys(ideal) == [640, 2560, 5120]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2 and bands[0].get_label() == "predicted range (no .. full overlap)"
    # the reference points: 3.9x on 4 and 6.9x on 8 as throughput; 85 % on the efficiency axis
    stars = [line for line in ax.lines if line.get_marker() == "*"]
    assert [_xy(s) for s in stars] == [(1, 3.9 * 640), (2, 6.9 * 640)]
    assert {"3.9x ref", "6.9x ref"} <= set(_texts(ax))
    assert efficiency is not None and efficiency.get_ylabel() == "scaling efficiency [%]"
    measured = next(line for line in efficiency.lines if line.get_label() == "scaling efficiency")
    assert [round(y, 1) for y in _ys(measured)] == [100.0, 97.5, 86.3]
    assert "85% ref" in _texts(efficiency)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["one node", "several nodes", "ideal scaling", "predicted range (no .. full overlap)",
                      "reference: dell-c4140-v100-2020", "scaling efficiency"]  # fmt: skip


def test_a_sandbox_configuration_names_its_model_once_and_has_no_reference() -> None:
    rows = build_report(
        [record("a", 1, 5.1, config=SANDBOX), record("b", 2, 7.3, config=SANDBOX)], load_references()
    )
    ax, efficiency, fig = _draw(rows)
    assert ax.get_title() == "ResNet-50, fp32, batch 8 per device, 64 px\nhorovod on cpu (1-core nodes)"
    assert ax.get_xlabel() == "devices (CPU ranks)"
    assert "1.43x\n7.3" in _everywhere(fig)  # a small throughput keeps its digits
    assert not [line for line in ax.lines if line.get_marker() == "*"]
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no collective measured
    assert efficiency is not None


def test_axis_labels_are_words_with_units() -> None:
    assert axis_label("total_images_per_sec", "img/s") == "throughput [images/s]"
    assert axis_label("avg_bus_bandwidth", "GB/s") == "bus bandwidth [GB/s]"
    assert axis_label("tokens_per_sec", "tok/s") == "tokens per sec [tok/s]"
    assert title_of(SANDBOX).count("ResNet-50") == 1 and "resnet50" not in title_of(SANDBOX)


def test_plot_report_stacks_one_figure_per_configuration(tmp_path: Path) -> None:
    rows = _paper_rows() + build_report(
        [record("s1", 1, 5.1, config=SANDBOX), record("s2", 2, 7.3, config=SANDBOX)], load_references()
    )
    path = plot_report(rows, tmp_path / "scaling.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(path) as image:
        assert image.size == (960, 1200)  # two 8 x 5 in figures at 120 dpi, one above the other
    with pytest.raises(InputError, match="nothing to plot"):
        plot_report(build_report([record("x", 1, 5.0, valid=False)], []), tmp_path / "none.png")


def test_the_collective_feeds_the_prediction_but_gets_no_figure_of_its_own() -> None:
    from clusterctl.results.plot import configurations

    collective = SANDBOX.model_copy(update={"workload": "allreduce"})
    rows = build_report(
        [record("a", 2, 0.0161, config=collective), record("b", 1, 5.1, config=SANDBOX)], load_references()
    )
    assert [[r.config.workload for r in group] for group in configurations(rows)] == [["resnet50"]]
    assert [[r.config.workload for r in g] for g in configurations(rows[:1])] == [
        ["allreduce"]
    ]  # alone: drawn
