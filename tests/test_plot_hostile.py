"""Recorded text and numbers that reach matplotlib (`report --plot`, the HTML page's figures, `explain
--plot`): a ``$`` in a name starts no mathtext (an unparsable one raised ValueError), and a figure that
is not finite or near float's limit (1e308 overflowed matplotlib's tick locator) is left out, never a
crash (issue 37 item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from clusterctl.explain.explanation import explain
from clusterctl.explain.model import RunFacts
from clusterctl.explain.plot import plot_explanation
from clusterctl.results.plot import plot_report
from clusterctl.results.references import load_references
from clusterctl.results.report import build_report
from clusterctl.results.telemetry import CpuSample, Sample
from tests.helpers.breakdowns import THROTTLED, breakdown_record, cpu_samples
from tests.helpers.records import V100, record

MATHTEXT = "$\\nosuchmacro{$ 50"  # unparsable as mathtext: drawn as written, or ValueError


def _png(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


def test_report_plot_draws_dollar_names_as_written(tmp_path: Path) -> None:
    config = V100.model_copy(update={"model": MATHTEXT, "framework": "a$b$\\c", "device": "$x^$"})
    rows = build_report([record("a", 1, 640.0, config=config), record("b", 4, 2400.0, config=config)], [])
    assert _png(plot_report(rows, tmp_path / "p.png"))[0] > 0


@pytest.mark.parametrize("huge", [1e308, 1.7976931348623157e308, 1e301])
def test_report_plot_leaves_out_figures_too_large_to_draw(tmp_path: Path, huge: float) -> None:
    rows = build_report(
        [record("a", 1, huge), record("b", 4, huge), record("c", 8, 5000.0)], load_references()
    )
    assert _png(plot_report(rows, tmp_path / "p.png"))[0] > 0


def test_explain_plot_draws_dollar_hosts_and_leaves_out_huge_figures(tmp_path: Path) -> None:
    facts = RunFacts(record=breakdown_record(THROTTLED), telemetry={"$node1^$": cpu_samples(0.5)})
    e = explain(facts)
    hostile = [
        p.model_copy(update={"host": f"{MATHTEXT}{i}", "phases_ms": dict.fromkeys(p.phases_ms, 1.7e308)})
        for i, p in enumerate(e.phases)
    ]
    e = e.model_copy(update={"phases": hostile, "run_id": "$\\frac$"})
    huge = {"ib0": {"tx_Bps": 1.7e308, "rx_Bps": 1.7e308}}  # their sum overflows to inf
    telemetry = {
        "$node1^$": [*cpu_samples(0.5), Sample.model_validate({"t": 1e308, "net": huge})],
        "node2": [
            Sample.model_validate({"t": 1001.0, "net": huge}),
            Sample(t=float("inf"), cpu=CpuSample(util=1.0)),
        ],
    }
    assert _png(plot_explanation(e, telemetry, tmp_path / "e.png"))[0] > 0
