"""The diagnosis rules on recorded breakdowns: real payload outputs (tests/fixtures/breakdown, one host;
tests/fixtures/explain, the sandbox's two nodes with node2 throttled) and telemetry built from the
``Sample`` model (no real capture exists yet: the sampler is being built beside this)."""

from __future__ import annotations

import pytest

from clusterctl.explain.explanation import explain, node_phases
from clusterctl.explain.model import RunFacts
from clusterctl.explain.rules import (
    communication_bound,
    cpu_starved,
    diagnose,
    gpu_idle,
    input_bound,
    not_overlapped,
    rails,
    straggler,
)
from clusterctl.results.record import read_record
from clusterctl.results.telemetry import LinkRate, Sample
from tests.helpers.breakdowns import (
    DDP,
    GRADIENT_BYTES,
    HOROVOD,
    OLD_RUN,
    THROTTLED,
    breakdown_record,
    cpu_samples,
    gpu_samples,
    with_phase,
)


def test_the_fixtures_are_real_breakdowns_of_their_runs() -> None:
    assert [b.rank for b in THROTTLED] == [0, 1]
    assert [b.host for b in THROTTLED] == ["node1", "node2"]
    assert {b.host for b in DDP} == {b.host for b in HOROVOD} == {"vm"}


def test_a_run_without_breakdown_is_unknown_everywhere_never_guessed() -> None:
    facts = RunFacts(record=read_record(OLD_RUN))
    explained = explain(facts)
    assert explained.verdict.code == "unknown"
    assert "no per-step breakdown" in explained.verdict.line
    assert {d.status for d in explained.diagnoses} == {"unknown"}
    assert len(explained.diagnoses) == 9 and explained.phases == []


def test_the_throttled_node_is_the_straggler_and_its_telemetry_is_quoted() -> None:
    telemetry = {"node1": cpu_samples(0.5), "node2": cpu_samples(1.0, steal=0.2)}
    found = straggler(RunFacts(record=breakdown_record(THROTTLED), telemetry=telemetry))
    assert (found.status, found.node, found.severity) == ("found", "node2", "warning")
    assert found.evidence["slowest"] == "node2" and found.evidence["fastest"] == "node1"
    node1, node2 = (b.useful_ms or 0.0 for b in THROTTLED)
    assert found.evidence["ratio"] == pytest.approx(node2 / node1, abs=1e-3) and node2 / node1 > 1.25
    assert found.message.startswith("node2 computes ")
    assert "CPUs 100% busy" in found.message and "steal 20%" in found.message
    assert "--bind-to" in found.advice
    blind = straggler(RunFacts(record=breakdown_record(THROTTLED)))
    assert blind.status == "found" and "telemetry: unknown" in blind.message


def test_the_straggler_verdict_comes_before_the_wait_it_causes() -> None:
    explained = explain(RunFacts(record=breakdown_record(THROTTLED)))
    assert explained.verdict.code == "straggler"
    assert explained.verdict.line.startswith("straggler: node2 computes ")
    assert [n.host for n in explained.phases] == ["node1", "node2"]


def test_one_host_s_ranks_are_compared_rank_by_rank() -> None:
    found = straggler(RunFacts(record=breakdown_record(DDP, nodes=1)))
    assert found.evidence["slowest"] in ("rank 0", "rank 1") and found.node is None
    # the two ranks shared one machine evenly: within the 1.15x margin
    assert found.status == "clear"


def test_cpu_starved_needs_saturated_cpus_and_slower_compute() -> None:
    record = breakdown_record(THROTTLED)
    starved = cpu_starved(
        RunFacts(record=record, telemetry={"node1": cpu_samples(0.6), "node2": cpu_samples(0.99)})
    )
    assert (starved.status, starved.node) == ("found", "node2")
    assert starved.evidence == {"cpu_util.node1": 0.6, "cpu_util.node2": 0.99}
    assert "--bind-to core" in starved.advice
    idle = cpu_starved(
        RunFacts(record=record, telemetry={"node1": cpu_samples(0.6), "node2": cpu_samples(0.5)})
    )
    assert idle.status == "clear"
    assert cpu_starved(RunFacts(record=record)).status == "unknown"
    # the fast node saturated is no starvation: its compute is the fastest
    fast = cpu_starved(RunFacts(record=record, telemetry={"node1": cpu_samples(1.0)}))
    assert fast.status == "clear"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_communication_share_and_the_bounds_of_the_exchange_s_bandwidth() -> None:
    record = breakdown_record(HOROVOD, framework="horovod", nodes=1)
    share = _mean(
        [b.phases_ms.exposed_comm.mean / b.step_ms.mean for b in HOROVOD if b.phases_ms.exposed_comm]
    )
    exposed = _mean([b.phases_ms.exposed_comm.mean for b in HOROVOD if b.phases_ms.exposed_comm])
    backward = _mean([b.phases_ms.backward.mean for b in HOROVOD if b.phases_ms.backward])
    d = communication_bound(RunFacts(record=record, bus_bandwidth_gb_s=1.5))
    assert d.evidence["exposed_share"] == pytest.approx(share, abs=1e-4)
    # 2 ranks: the bus bandwidth is the algorithm bandwidth (x 2(n-1)/n = 1); the exchange ran at most
    # over backward + exposed (lower bound) and at least over the exposed wait (upper bound)
    assert d.evidence["min_bus_gb_s"] == pytest.approx(GRADIENT_BYTES / (exposed + backward) / 1e6, abs=1e-3)
    assert d.evidence["max_bus_gb_s"] == pytest.approx(GRADIENT_BYTES / exposed / 1e6, abs=1e-3)
    assert f"({exposed:.0f} ms exposed); the gradients moved at least " in d.message
    assert "against the preflight's 1.5 GB/s" in d.message
    assert d.status == ("found" if share >= 0.2 else "clear")
    waiting = [with_phase(b, "exposed_comm", 2000.0) for b in HOROVOD]
    found = communication_bound(RunFacts(record=breakdown_record(waiting, framework="horovod")))
    assert found.status == "found" and "HOROVOD_FUSION_THRESHOLD" in found.advice
    assert "fp16_allreduce" in found.advice and "`run --preflight`" in found.message
    ddp = communication_bound(
        RunFacts(record=breakdown_record([with_phase(b, "exposed_comm", 2000.0) for b in DDP]))
    )
    assert "bucket_cap_mb" in ddp.advice and "bus bandwidth" not in ddp.advice


@pytest.mark.parametrize(
    ("preflight", "advice"),
    [
        # the lower bound reaches the fabric's bus bandwidth: the wire is the limit
        (1.0, "at the fabric's bus bandwidth"),
        # even the upper bound (the exposed wait alone) is far below it: overheads
        (10 / 0.8, "below the fabric's bus bandwidth even over the exposed wait alone"),
        # the fabric's between the bounds: the breakdown cannot tell, and says nothing of it
        (1.5, "a larger Horovod fusion buffer"),
    ],
)
def test_the_wire_or_overheads_only_where_both_bounds_agree(preflight: float, advice: str) -> None:
    waiting = [with_phase(b, "exposed_comm", 2000.0) for b in HOROVOD]
    facts = RunFacts(record=breakdown_record(waiting, framework="horovod"), bus_bandwidth_gb_s=1.0)
    low = communication_bound(facts).evidence["min_bus_gb_s"]
    high = communication_bound(facts).evidence["max_bus_gb_s"]
    assert isinstance(low, float) and isinstance(high, float) and low < 0.8 * high
    d = communication_bound(RunFacts(record=facts.record, bus_bandwidth_gb_s=preflight * low))
    assert d.status == "found" and d.advice.startswith(advice), d.advice


def test_not_overlapped_times_the_exposed_wait_against_the_whole_allreduce() -> None:
    record = breakdown_record(DDP)
    exposed_s = sum(b.phases_ms.exposed_comm.mean for b in DDP if b.phases_ms.exposed_comm) / 2 / 1e3
    assert not_overlapped(RunFacts(record=record)).status == "unknown"
    whole = not_overlapped(RunFacts(record=record, allreduce_s=exposed_s))
    assert whole.status == "found" and whole.evidence["hidden_share"] == 0.0
    assert "bucket_cap_mb" in whole.advice
    hidden = not_overlapped(RunFacts(record=record, allreduce_s=10 * exposed_s))
    assert hidden.status == "clear" and hidden.evidence["hidden_share"] == pytest.approx(0.9, abs=1e-3)
    one = breakdown_record(DDP[:1], nodes=1)
    assert not_overlapped(RunFacts(record=one, allreduce_s=1.0)).status == "unknown"


def test_input_bound_reads_the_input_phase_share() -> None:
    # synthetic data: the real runs wait for no batch
    assert input_bound(RunFacts(record=breakdown_record(DDP))).status == "clear"
    slow = [with_phase(b, "input", 500.0) for b in DDP]
    found = input_bound(RunFacts(record=breakdown_record(slow)))
    assert found.status == "found" and "data-loader workers" in found.advice
    assert float(found.evidence["input_share"] or 0) >= 0.1


def _rails(rates: dict[str, float]) -> list[Sample]:
    return [
        Sample(t=1000.0 + i, net={k: LinkRate(tx_Bps=v, rx_Bps=v) for k, v in rates.items()})
        for i in range(3)
    ]


def test_an_idle_or_unbalanced_rail_is_named_with_its_node() -> None:
    record = breakdown_record(THROTTLED)
    idle = rails(RunFacts(record=record, telemetry={"node2": _rails({"mlx5_0:1": 5e8, "mlx5_1:1": 0.0})}))
    assert (idle.status, idle.node) == ("found", "node2") and "mlx5_1:1 idle" in idle.message
    uneven = rails(RunFacts(record=record, telemetry={"node1": _rails({"mlx5_0:1": 5e8, "mlx5_1:1": 1e8})}))
    assert uneven.status == "found" and "0.20 of its busiest" in uneven.message
    even = rails(RunFacts(record=record, telemetry={"node1": _rails({"mlx5_0:1": 5e8, "mlx5_1:1": 4.5e8})}))
    assert even.status == "clear"
    assert rails(RunFacts(record=record, telemetry={"node1": _rails({"eth0": 5e8})})).status == "unknown"


def test_gpu_idle_gaps_inside_the_busy_window() -> None:
    record = breakdown_record(THROTTLED)
    # idle before the first and after the last busy sample: start-up and shutdown, no gap
    steady = gpu_idle(
        RunFacts(record=record, telemetry={"node1": gpu_samples([0, 0, 0.9, 0.95, 0.9, 0.9, 0, 0])})
    )
    assert steady.status == "clear" and steady.evidence == {"idle_share.node1/gpu0": 0.0}
    gaps = gpu_idle(
        RunFacts(record=record, telemetry={"node1": gpu_samples([0, 0.9, 0.0, 0.9, 0.05, 0.9, 0])})
    )
    assert (gaps.status, gaps.node) == ("found", "node1")
    assert gaps.evidence == {"idle_share.node1/gpu0": 0.4}
    assert gpu_idle(RunFacts(record=record, telemetry={"node1": cpu_samples(0.5)})).status == "unknown"


def test_every_rule_answers_with_a_stable_code_once() -> None:
    codes = [d.code for d in diagnose(RunFacts(record=breakdown_record(THROTTLED)))]
    assert codes == ["straggler", "cpu-starved", "compute-scaling", "communication-bound", "not-overlapped",
                     "input-bound", "gpu-idle", "rails", "run-to-run"]  # fmt: skip


def test_phases_per_node_average_that_node_s_ranks() -> None:
    [vm] = node_phases(DDP)
    assert vm.ranks == [0, 1]
    forward = [b.phases_ms.forward.mean for b in DDP if b.phases_ms.forward]
    assert vm.phases_ms["forward"] == pytest.approx(sum(forward) / 2)
