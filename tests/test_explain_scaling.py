"""Computation scalability and global efficiency (POP across a configuration's rows), the
compute-scaling rule and the verdict that names it, and the communication-bound rule's bandwidth bounds:
hand numbers for the formulas, and real sandbox runs (tests/fixtures/explain/scaling/README.md) for the
report and `explain`."""

from __future__ import annotations

import csv
import io
import math
import shutil
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.explain.explanation import explain
from clusterctl.explain.gather import gather, worst_row_line
from clusterctl.explain.model import RunFacts
from clusterctl.explain.rules import communication_bound
from clusterctl.results.history import load_runs
from clusterctl.results.pop import ScalingReference, run_pop, scaling_of
from clusterctl.results.record import read_record
from clusterctl.results.report import ReportRow, build_report, report_csv, report_of
from clusterctl.results.report_table import meaning
from tests.helpers.breakdowns import with_phase
from tests.helpers.strictjson import report_rows, strict_loads

QUICKSTART = ScalingReference(devices=1, compute_ms=385.0, source="breakdown")


def test_scaling_of_hand_numbers_from_the_quickstart_s_figures() -> None:
    # docs/sandbox.md: 385 ms of compute a step on 1 node, 850 on 2, PE 0.96
    scaling = scaling_of(QUICKSTART, 850.0, 0.96)
    assert scaling is not None and scaling.reference == QUICKSTART
    assert scaling.computation_scalability == pytest.approx(385 / 850)
    assert scaling.global_efficiency == pytest.approx(0.96 * 385 / 850)
    unknown_pe = scaling_of(QUICKSTART, 850.0, None)
    assert unknown_pe is not None and unknown_pe.global_efficiency is None
    assert unknown_pe.computation_scalability == pytest.approx(385 / 850)


@pytest.mark.parametrize("compute", [None, 0.0, -5.0, math.nan, math.inf])
def test_no_scaling_without_a_compute_that_is_a_measurement(compute: float | None) -> None:
    assert scaling_of(QUICKSTART, compute, 0.9) is None


def test_no_scaling_without_a_reference() -> None:
    assert scaling_of(None, 850.0, 0.9) is None


# Real runs of one configuration on 1 and 2 sandbox nodes, the 2-node one with its preflight (README.md).
SCALING = Path(__file__).parent / "fixtures" / "explain" / "scaling"
ONE, TWO = "20261126T002851Z_resnet50_1n", "20261126T003332Z_resnet50_2n"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A copy of the recorded runs directory (reading it indexes it)."""
    return Path(shutil.copytree(SCALING, tmp_path / "runs"))


def _rows(runs: Path) -> dict[int, ReportRow]:
    return {r.devices: r for r in report_of(runs)[0] if r.config.workload == "resnet50"}


def test_the_report_s_rows_carry_cs_and_ge_against_the_1_node_row(runs: Path) -> None:
    rows = _rows(runs)
    one, two = rows[1], rows[2]
    two_ranks = read_record(runs / TWO).breakdown or []
    assert two.compute_ms == pytest.approx(sum(b.useful_ms or 0.0 for b in two_ranks) / 2)
    assert (
        one.scaling_reference
        == two.scaling_reference
        == ScalingReference(devices=1, compute_ms=one.compute_ms or 0.0, source="breakdown")
    )
    assert one.computation_scalability == 1.0 and one.global_efficiency == one.parallel_efficiency
    cs = two.computation_scalability
    assert cs is not None
    assert cs == pytest.approx((one.compute_ms or 0.0) / (two.compute_ms or 1.0)) and 0 < cs < 0.8
    assert two.global_efficiency == pytest.approx((two.parallel_efficiency or 0.0) * cs)
    # GE is not the scaling efficiency (step parts vs throughput medians), but on these runs close to it
    assert two.global_efficiency == pytest.approx(two.efficiency, abs=0.02)


def test_csv_json_and_the_row_s_sentence_say_them(runs: Path) -> None:
    rows = report_of(runs)[0]
    two = next(r for r in rows if r.devices == 2 and r.config.workload == "resnet50")
    [line] = [
        r
        for r in csv.DictReader(io.StringIO(report_csv(rows)))
        if r["workload"] == "resnet50" and r["devices"] == "2"
    ]
    assert float(line["computation_scalability"]) == pytest.approx(two.computation_scalability or 0)
    assert float(line["global_efficiency"]) == pytest.approx(two.global_efficiency or 0)
    assert float(line["reference_compute_ms"]) == pytest.approx(9179.072)
    assert strict_loads(two.model_dump_json())["scaling_reference"]["source"] == "breakdown"
    sentence = meaning(two) or ""
    assert "71% efficiency (POP: parallel 0.94 x computation scalability 0.75 = 0.71);" in sentence


def test_a_reference_without_breakdown_gives_its_whole_step_from_its_rate(runs: Path) -> None:
    old = read_record(runs / ONE).model_copy(update={"breakdown": None, "pop": None})
    records = [old, read_record(runs / TWO)]
    rows = {r.devices: r for r in build_report(records, [])}
    ref = rows[2].scaling_reference
    # 8 images per step per device at 0.871 img/s on 1 device: its whole step, 9,185 ms
    assert ref is not None and (ref.devices, ref.source) == (1, "rate")
    assert ref.compute_ms == pytest.approx(1e3 * 8 / 0.871)
    assert rows[1].computation_scalability is None  # no compute of its own to compare
    assert rows[2].computation_scalability == pytest.approx(ref.compute_ms / (rows[2].compute_ms or 1))
    # a configuration no row of which recorded a breakdown (a collective) has no reference at all
    allreduce = read_record(runs / "20261126T003048Z_allreduce_2n")
    assert build_report([allreduce], [])[0].scaling_reference is None


def test_explain_names_compute_scaling_as_the_main_loss(runs: Path) -> None:
    facts, _ = gather(runs, TWO)
    explained = explain(facts)
    assert explained.verdict.line.startswith(
        "compute-scaling: computation scalability 0.75: each rank computes 1.3x as long per step as on 1 device"
    )
    [d] = [d for d in explained.diagnoses if d.code == "compute-scaling"]
    assert (d.status, d.severity) == ("found", "warning")
    assert d.evidence["reference_compute_ms"] == 9179.072 and d.evidence["reference_source"] == "breakdown"
    assert d.evidence["computation_scalability"] == pytest.approx(0.7503, abs=1e-4)
    assert "global efficiency 0.71 = 0.94 PE x 0.75 CS" in d.message and "CPUs 100% busy" in d.message
    assert "HOROVOD_THREAD_AFFINITY" in d.advice and "--bind-to core" in d.advice
    assert explained.scaling is not None and explained.scaling.reference.devices == 1


def test_without_a_smaller_run_compute_scaling_is_unknown(runs: Path) -> None:
    one = explain(gather(runs, ONE)[0])
    [d] = [d for d in one.diagnoses if d.code == "compute-scaling"]
    assert (
        d.status == "unknown" and "a 1-device run is its own reference" in d.message and one.scaling is None
    )
    shutil.rmtree(runs / ONE)
    alone = explain(gather(runs, TWO)[0])
    [d] = [d for d in alone.diagnoses if d.code == "compute-scaling"]
    assert (
        d.status == "unknown"
        and "on fewer than its 2 devices" in d.message
        and "run it on 1 node" in d.message
    )
    assert alone.verdict.code == "balanced" and alone.scaling is None
    # ... and the report agrees: a 2-device row with nothing smaller has no CS or GE, as no speedup
    [two] = _rows(runs).values()
    assert (two.devices, two.speedup, two.computation_scalability, two.global_efficiency) == (
        2,
        None,
        None,
        None,
    )


def test_the_rules_inside_the_run_lead_when_they_lose_more(runs: Path) -> None:
    facts, _ = gather(runs, TWO)
    # the same ranks waiting 10 s more a step on the allreduce: PE drops under CS (0.75)
    waiting = [with_phase(b, "exposed_comm", 10_000.0) for b in facts.breakdown]
    record = facts.record.model_copy(update={"breakdown": waiting, "pop": run_pop(waiting, 2)})
    slow = RunFacts(record=record, reference=facts.reference, bus_bandwidth_gb_s=facts.bus_bandwidth_gb_s)
    assert record.pop is not None and record.pop.parallel_efficiency < 0.75
    explained = explain(slow)
    assert explained.verdict.code == "communication-bound"
    assert "; computation scalability 0.75: " in explained.verdict.line  # still named, second


def test_balanced_says_every_efficiency_it_knows(runs: Path) -> None:
    facts, _ = gather(runs, TWO)
    close = ScalingReference(
        devices=1, compute_ms=0.9 * (facts.scaling.compute_ms if facts.scaling else 0), source="breakdown"
    )
    line = explain(RunFacts(record=facts.record, reference=close)).verdict.line
    assert line.startswith(
        "balanced: parallel efficiency 0.94; computation scalability 0.90; global efficiency 0.85;"
    )


def test_a_mostly_hidden_exchange_is_given_no_bandwidth_it_did_not_have(runs: Path) -> None:
    facts, _ = gather(runs, TWO)
    d = communication_bound(facts)
    exposed = d.evidence["exposed_ms"]
    assert isinstance(exposed, float) and facts.record.gradient_bytes and facts.bus_bandwidth_gb_s
    # what the old message said: gradients / exposed time, 9x the fabric's measured bus bandwidth
    old = facts.record.gradient_bytes / exposed / 1e6
    assert d.evidence["max_bus_gb_s"] == pytest.approx(old, abs=1e-3) and old > 5 * facts.bus_bandwidth_gb_s
    assert f"{old:.2f} GB/s" not in d.message and "gradients at" not in d.message
    low = d.evidence["min_bus_gb_s"]
    assert isinstance(low, float) and low <= facts.bus_bandwidth_gb_s <= old
    assert d.message.startswith(
        "6% of each step waits on allreduce (750 ms exposed); the gradients moved at least"
    )
    assert d.status == "clear" and d.advice == ""


def test_the_screen_and_the_report_lead_with_it(
    runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--runs-dir", str(runs), "--json"]) == 0
    verdicts = [
        r["verdict"] for r in report_rows(capsys.readouterr().out) if r["config"]["workload"] == "resnet50"
    ]
    assert verdicts == ["balanced", "compute-scaling"]
    monkeypatch.delenv("COLUMNS", raising=False)  # 80 columns, as piped
    assert main(["explain", "--runs-dir", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("compute-scaling: computation scalability 0.75") and max(map(len, lines)) <= 80
    # its 13 s steps fit the phase table whole (they were cut to `12,991…`)
    assert not any("…" in line for line in lines)
    assert any(line.split()[:1] == ["node1"] and line.split()[-2:] == ["12,992", "12,707"] for line in lines)
    assert (
        "computation scalability 0.75 (9,179 ms of compute per step on 1 device, 12,234 here); "
        "global efficiency 0.71" in " ".join(" ".join(lines).split())
    )


def test_sweep_s_worst_row_line_names_it(runs: Path) -> None:
    history = load_runs(runs)
    line = worst_row_line(build_report(history.runs, []), history.runs, history, runs)
    assert line == (
        f"worst row (resnet50 on 2 devices, efficiency 71%, run {TWO}): compute-scaling: computation "
        "scalability 0.75: each rank computes 1.3x as long per step as on 1 device"
    )
