"""The payload's per-step breakdown lines read back (real 2-rank outputs of the payload), and the POP
metrics computed from them and from hand numbers (the RWTH study's 64-GPU figures among them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.results.pop import pop_metrics, run_pop
from clusterctl.results.record import read_record
from clusterctl.workloads import get_workload
from clusterctl.workloads.breakdown import BREAKDOWN_PREFIX, RankBreakdown, parse_breakdown

FIXTURES = Path(__file__).parent / "fixtures"
# Real outputs: `mpirun --tag-output -np 2 python resnet50_bench.py --framework=<fw> --image-size=32
# --batch-size=2 --steps=4 --warmup-steps=1 --display-every=2` on a 2-core machine.
DDP_LOG = (FIXTURES / "breakdown" / "ddp-2ranks.log").read_text()
HOROVOD_LOG = (FIXTURES / "breakdown" / "horovod-2ranks.log").read_text()
PHASES = ("input", "forward", "backward", "exposed_comm", "optimizer")


def _breakdown_lines(log: str) -> list[str]:
    """The log's breakdown lines, from the prefix on (without mpirun's tag)."""
    return [line[line.index(BREAKDOWN_PREFIX) :] for line in log.splitlines() if BREAKDOWN_PREFIX in line]


@pytest.mark.parametrize("log", [DDP_LOG, HOROVOD_LOG], ids=["ddp", "horovod"])
def test_every_rank_s_line_is_read_with_every_phase_tiling_the_step(log: str) -> None:
    ranks = parse_breakdown(log)
    assert [b.rank for b in ranks] == [0, 1]
    for b in ranks:
        assert b.host and b.clock == "wall" and b.steps == 4
        phases = [getattr(b.phases_ms, name) for name in PHASES]
        assert all(p is not None and p.p10 <= p.median <= p.p90 for p in phases)
        # The phases are consecutive intervals of each step: their means add up to the step's mean,
        # but for the payload's rounding to 0.001 ms (six rounded figures).
        assert sum(p.mean for p in phases if p) == pytest.approx(b.step_ms.mean, abs=0.003)
        assert b.useful_ms == pytest.approx(
            sum(p.mean for p in (b.phases_ms.forward, b.phases_ms.backward, b.phases_ms.optimizer) if p)
        )
    assert get_workload("resnet50").breakdown(log) == ranks


def test_a_line_glued_to_another_by_tag_output_is_still_read() -> None:
    # mpirun --tag-output glued rank 1's breakdown onto the end of rank 0's result line (seen for real).
    zero, one = _breakdown_lines(DDP_LOG)
    result = next(line for line in DDP_LOG.splitlines() if "CLUSTERCTL_RESULT" in line)
    glued = f"{result}[1,1]<stdout>:{one}\n[1,0]<stdout>:{zero}[1,0]<stdout>:\n"
    assert [b.rank for b in parse_breakdown(glued)] == [0, 1]


def test_slurm_s_rank_labels_and_untagged_lines_are_read() -> None:
    zero, one = _breakdown_lines(HOROVOD_LOG)
    assert [b.rank for b in parse_breakdown(f"0: {zero}\n{one}\n")] == [0, 1]


def test_a_crashed_rank_s_cut_line_and_a_non_finite_figure_are_skipped_not_errors() -> None:
    zero, one = _breakdown_lines(DDP_LOG)
    nan = zero.replace('"mean": ', '"mean": NaN, "x": ', 1)
    assert parse_breakdown(f"{one[: len(one) // 2]}\n{zero}\n") == parse_breakdown(zero)
    assert parse_breakdown(nan) == []
    assert parse_breakdown(f"{BREAKDOWN_PREFIX}not json\n") == []


def test_runs_without_a_breakdown_have_none() -> None:
    # Real run directories written before the payload printed one: their log has none, their record
    # (without the fields) still reads, with None.
    directory = FIXTURES / "runs" / "20261125T170753Z_resnet50_2n"
    assert get_workload("resnet50").breakdown((directory / "output.log").read_text()) == []
    record = read_record(directory)
    assert record.breakdown is None and record.pop is None
    assert get_workload("tf_cnn_benchmarks").breakdown(DDP_LOG) == []  # prints no breakdown
    assert run_pop([], 2) is None


def test_pop_of_hand_numbers() -> None:
    pop = pop_metrics([90.0, 100.0], 200.0)
    assert pop is not None
    assert pop.load_balance == pytest.approx(0.95)  # mean 95 / max 100
    assert pop.communication_efficiency == pytest.approx(0.5)  # max 100 / step 200
    assert pop.parallel_efficiency == pytest.approx(0.475)  # mean 95 / step 200
    assert pop.ranks == 2
    one = pop_metrics([80.0], 100.0)
    assert one is not None and one.load_balance == 1.0 and one.parallel_efficiency == pytest.approx(0.8)


def test_the_rwth_64_gpu_figures_are_truncated_factors_of_a_rounded_product() -> None:
    # The study: 64 GPUs, PE 0.34 = LB ~0.99 x CommE 0.33. Taken as rounded, 0.99 x 0.33 = 0.3267,
    # which rounds to 0.33, not 0.34 ...
    as_printed = pop_metrics([98.0, 100.0], 100 / 0.33)
    assert as_printed is not None
    assert as_printed.load_balance == pytest.approx(0.99)
    assert round(as_printed.parallel_efficiency, 2) == 0.33
    # ... while factors truncated to 0.99 and 0.33 (LB 0.999, CommE 0.339) give 0.3387: 0.34.
    truncated = pop_metrics([99.8, 100.0], 100 / 0.339)
    assert truncated is not None
    assert int(truncated.load_balance * 100) / 100 == 0.99
    assert int(truncated.communication_efficiency * 100) / 100 == 0.33
    assert round(truncated.parallel_efficiency, 2) == 0.34


@pytest.mark.parametrize(
    ("useful", "step"),
    [([], 100.0), ([0.0, 0.0], 100.0), ([10.0], 0.0), ([float("nan")], 100.0), ([-1.0, 5.0], 100.0)],
)
def test_pop_of_figures_that_are_no_measurement_is_none(useful: list[float], step: float) -> None:
    assert pop_metrics(useful, step) is None


def test_pop_of_a_run_needs_every_rank_s_breakdown() -> None:
    ranks = parse_breakdown(DDP_LOG)
    pop = run_pop(ranks, 2)
    assert pop is not None and pop.ranks == 2
    useful = [b.useful_ms or 0.0 for b in ranks]
    assert pop.load_balance == pytest.approx(sum(useful) / 2 / max(useful))
    assert pop.communication_efficiency == pytest.approx(max(useful) / max(b.step_ms.mean for b in ranks))
    assert 0 < pop.parallel_efficiency <= pop.load_balance <= 1
    assert run_pop(ranks[:1], 2) is None  # rank 1 crashed before its line
    assert run_pop([ranks[1]], 1) is None  # not the ranks 0..world_size-1
    no_backward = RankBreakdown.model_validate(
        {**ranks[0].model_dump(), "phases_ms": {**ranks[0].phases_ms.model_dump(), "backward": None}}
    )
    assert run_pop([no_backward, ranks[1]], 2) is None
