"""The diagnosis rules: one small function per bottleneck, each reading ``RunFacts`` and answering with
a ``Diagnosis`` (found, clear or unknown), its evidence and the knob that changes it. Pure.

Shares are of the step's mean time (the phases tile each step); a run's figure is the mean over its
ranks (the step waits for every rank, so a slow rank's wait shows on the others as exposed
communication). Telemetry covers the whole launch; GPU figures are read inside each GPU's busy
window (its first to its last busy sample), so start-up and shutdown are no idle gap.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from clusterctl.explain.model import (
    Diagnosis,
    Evidence,
    PeerRun,
    RunFacts,
    decided,
    mean_or_none,
    share,
    unknown,
)
from clusterctl.results.record import RunRecord
from clusterctl.results.step import (
    COMM_SHARE,
    COMMUNICATION_BOUND,
    INPUT_SHARE,
    NOT_OVERLAPPED,
    PHASES,
    hidden_share,
)
from clusterctl.results.telemetry import Sample
from clusterctl.workloads.breakdown import RankBreakdown

AT_FABRIC = 0.8  # the exchange's bus bandwidth at least this share of the preflight's: the wire's limit
STRAGGLER = 1.25  # the slowest node's useful compute over the fastest one's (noise on a shared host: 1.17)
COMPUTE_SCALING = 1 / STRAGGLER  # POP's computation scalability under 0.8 (POP: below 0.8 needs a look)
COMPUTE_SCALING_CODE = "compute-scaling"
CPU_SATURATED = 0.95  # a node's mean CPU utilisation counted as saturated
STEAL = 0.05  # a hypervisor taking 5% of the CPUs
RAIL_IDLE = 0.02  # a rail moving under 2% of its node's busiest rail
RAIL_BALANCE = 0.5  # least-used / most-used rail
GPU_IDLE_UTIL = 0.10  # a sample under 10% utilisation is idle
GPU_IDLE_SHARE = 0.20  # a fifth of the busy window idle
# Runs of one configuration spreading more than a tenth of their median, (max - min) / median: more than
# a repeat on a quiet cluster gives (the report's spread column), so something differed between them.
RUN_TO_RUN = 0.10
RUN_TO_RUN_CODE = "run-to-run"


def node_compute(breakdown: Sequence[RankBreakdown]) -> dict[str, float]:
    """Each host's mean useful compute per step (ms) over its ranks; hosts with a rank lacking it are left out."""
    by_host: dict[str, list[float | None]] = defaultdict(list)
    for b in breakdown:
        by_host[b.host].append(b.useful_ms)
    return {
        host: statistics.fmean(u for u in v if u is not None) for host, v in by_host.items() if None not in v
    }


def _cpu(samples: Sequence[Sample], what: str) -> float | None:
    return mean_or_none([getattr(s.cpu, what) if s.cpu else None for s in samples])


def input_bound(facts: RunFacts) -> Diagnosis:
    """Waiting for the batch: the input phase's share of the step."""
    code = "input-bound"
    parts = facts.parts
    value = parts.input_share if parts else None
    if value is None:
        return unknown(code, "no input phase in the breakdown")
    found = value >= INPUT_SHARE
    return decided(
        found,
        code,
        message=f"{100 * value:.0f}% of each step waits for its input batch",
        advice="more data-loader workers (and pinned memory), the data set on node-local storage or "
        "cached in memory, a larger prefetch",
        evidence={"input_share": round(value, 4), "threshold": INPUT_SHARE},
    )


def _bus(bytes_: int, ms: float, ranks: int) -> float | None:
    """``bytes_`` all-reduced in ``ms`` over ``ranks`` as nccl-tests' bus bandwidth (GB/s: algbw x
    2(n-1)/n), comparable with the preflight's; None for no time or one rank."""
    return bytes_ / (ms / 1e3) / 1e9 * 2 * (ranks - 1) / ranks if ms > 0 and ranks > 1 else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def communication_bound(facts: RunFacts) -> Diagnosis:
    """Blocked on the gradient allreduce: the exposed communication's share of the step, and what the
    breakdown bounds the exchange's bandwidth to against the preflight's bus bandwidth.

    The step shows only the exposed part of the allreduce: it runs at the earliest from the start of
    backward (gradients are all-reduced as they are ready) to the end of the exposed wait, and at the
    latest over the exposed wait alone. So the gradient bytes over backward + exposed time is a lower
    bound of its bandwidth, and over the exposed time alone an upper bound: no bandwidth when the
    exchange is mostly hidden (the sandbox's 4% exposed read as 10x the fabric's bus bandwidth).
    """
    code = COMMUNICATION_BOUND
    parts = facts.parts
    value = parts.exposed_share if parts else None
    if parts is None or value is None or parts.exposed_ms is None:
        return unknown(code, "no exposed-communication phase in the breakdown")
    exposed_ms = parts.exposed_ms
    window_ms = exposed_ms + parts.backward_ms if parts.backward_ms is not None else None
    gradient, n = facts.record.gradient_bytes, facts.record.world_size
    at_least = _bus(gradient, window_ms, n) if gradient and window_ms else None
    at_most = _bus(gradient, exposed_ms, n) if gradient else None
    evidence: Evidence = {
        "exposed_share": round(value, 4),
        "exposed_ms": round(exposed_ms, 3),
        "backward_exposed_ms": _rounded(window_ms),
        "gradient_bytes": gradient,
        "min_bus_gb_s": _rounded(at_least),
        "max_bus_gb_s": _rounded(at_most),
        "bus_bandwidth_gb_s": facts.bus_bandwidth_gb_s,
        "threshold": COMM_SHARE,
    }
    found = value >= COMM_SHARE and n > 1
    against = ""
    if at_least is not None:
        preflight = facts.bus_bandwidth_gb_s
        against = f"; the gradients moved at least {at_least:.3g} GB/s bus bandwidth over backward + " + (
            f"exposed, against the preflight's {preflight:.3g} GB/s"
            if preflight
            else "exposed (no preflight bus bandwidth to compare: `run --preflight`)"
        )
    return decided(
        found,
        code,
        message=f"{100 * value:.0f}% of each step waits on allreduce ({exposed_ms:.0f} ms exposed){against}",
        advice=_communication_advice(facts, at_least, at_most),
        evidence=evidence,
    )


def _communication_advice(facts: RunFacts, at_least: float | None, at_most: float | None) -> str:
    """The knobs for a communication-bound run; first, where the bounds of the exchange's bus bandwidth
    settle it against the preflight's, whether the wait is the fabric's limit or overhead."""
    busbw = facts.bus_bandwidth_gb_s
    where = ""
    if busbw and at_least is not None and at_least >= AT_FABRIC * busbw:
        where = "at the fabric's bus bandwidth: fewer bytes (fp16 allreduce) or more overlap help; "
    elif busbw and at_most is not None and at_most < AT_FABRIC * busbw:
        where = "below the fabric's bus bandwidth even over the exposed wait alone: overheads, not the wire; "
    if facts.record.config.framework == "ddp":
        knobs = "a larger DDP bucket (inventory run.bucket_cap_mb) so fewer, larger allreduces go out"
    else:
        knobs = (
            "a larger Horovod fusion buffer (HOROVOD_FUSION_THRESHOLD, e.g. 128 MiB) and cycle time "
            "(HOROVOD_CYCLE_TIME), and fp16 allreduce (inventory run.fp16_allreduce: half the bytes)"
        )
    return f"{where}{knobs}; check every rail carries traffic (`clusterctl check`), nodes on one leaf switch"


def straggler(facts: RunFacts) -> Diagnosis:
    """The slowest node (or, on one node, rank) in useful compute against the fastest, with what its
    telemetry shows: CPU saturation and steal, GPU clocks and throttling."""
    code = "straggler"
    by_node = node_compute(facts.breakdown)
    if len(by_node) >= 2:
        unit, compute = "node", by_node
    else:
        unit = "rank"
        compute = {f"rank {b.rank}": b.useful_ms for b in facts.breakdown if b.useful_ms is not None}
    if len(compute) < 2:
        return unknown(code, "fewer than two ranks with a useful-compute figure: nothing to compare")
    slow = max(compute, key=compute.__getitem__)
    fast = min(compute, key=compute.__getitem__)
    ratio = compute[slow] / compute[fast] if compute[fast] > 0 else None
    if ratio is None:
        return unknown(code, "no useful compute measured")
    found = ratio >= STRAGGLER
    node = facts.node_of(slow) if unit == "node" else None
    seen, evidence = _node_health(facts, node)
    return decided(
        found,
        code,
        node=node,
        message=f"{slow} computes {ratio:.1f}x slower than {fast} "
        f"({compute[slow]:.0f} vs {compute[fast]:.0f} ms per step){seen}",
        advice=f"look at {slow}: rank-to-CPU binding (mpirun --bind-to core/socket), other load on it, "
        "its GPU clocks and cooling; or leave it out of the run (--nodes, the inventory)",
        evidence={
            "slowest": slow,
            "fastest": fast,
            "slowest_ms": round(compute[slow], 3),
            "fastest_ms": round(compute[fast], 3),
            "ratio": round(ratio, 3),
            "threshold": STRAGGLER,
            **evidence,
        },
    )


def _node_health(facts: RunFacts, node: str | None, whose: str = "its") -> tuple[str, Evidence]:
    """What a node's telemetry says of its CPUs and GPUs, as words for a message (``whose`` telemetry)
    and evidence."""
    samples = facts.telemetry.get(node, []) if node else []
    if not samples:
        return (f"; {whose} telemetry: unknown (none recorded)" if node else ""), {"telemetry": "unknown"}
    util, steal = _cpu(samples, "util"), _cpu(samples, "steal")
    clocks = [g.sm_clock_mhz for s in samples for g in s.gpus or [] if g.sm_clock_mhz is not None]
    reasons = sorted({r for s in samples for g in s.gpus or [] for r in g.throttle or []})
    words = [f"CPUs {100 * util:.0f}% busy" if util is not None else "CPU unknown"]
    words += [f"steal {100 * steal:.0f}%"] if steal is not None and steal >= STEAL else []
    words += [f"GPU SM clock min {min(clocks):.0f} MHz"] if clocks else []
    words += [f"throttled ({', '.join(reasons)})"] if reasons else []
    evidence: Evidence = {
        "cpu_util": None if util is None else round(util, 3),
        "cpu_steal": None if steal is None else round(steal, 3),
        "gpu_sm_clock_min_mhz": min(clocks) if clocks else None,
        "gpu_throttle": ",".join(reasons) or None,
    }
    return f"; {whose} telemetry: " + ", ".join(words), evidence


def compute_scaling(facts: RunFacts) -> Diagnosis:
    """POP's computation scalability: each rank's useful compute per step against the configuration's
    smallest run's (the same work per rank: weak scaling), with global efficiency = PE x CS; what its
    slowest node's telemetry shows."""
    code = COMPUTE_SCALING_CODE
    ref, n = facts.reference, facts.record.world_size
    if n == 1:
        return unknown(
            code, "a 1-device run is its own reference: nothing smaller to compare its compute with"
        )
    if ref is None or ref.devices >= n:
        return unknown(code, f"no run of this configuration on fewer than its {n} devices in the runs "
                       "directory to compare its compute with (run it on 1 node with the same settings)")  # fmt: skip
    scaling = facts.scaling
    if scaling is None:
        return unknown(code, "a rank without a useful-compute figure", reference_devices=ref.devices)
    cs, ge = scaling.computation_scalability, scaling.global_efficiency
    by_node = node_compute(facts.breakdown)
    node = facts.node_of(max(by_node, key=by_node.__getitem__)) if by_node else None
    seen, health = _node_health(facts, node, f"{node}'s")
    devices = f"{ref.devices} device{'s' if ref.devices > 1 else ''}"
    whole = ", its whole step: no breakdown" if ref.source == "rate" else ""
    pe = facts.record.pop.parallel_efficiency if facts.record.pop else None
    product = "" if ge is None or pe is None else f"; global efficiency {ge:.2f} = {pe:.2f} PE x {cs:.2f} CS"
    found = cs < COMPUTE_SCALING
    return decided(
        found,
        code,
        message=f"computation scalability {cs:.2f}: each rank computes {1 / cs:.1f}x as long per step as on "
        f"{devices} ({scaling.compute_ms:.0f} vs {ref.compute_ms:.0f} ms{whole}){product}{seen}",
        advice=_compute_advice(facts),
        evidence={
            "computation_scalability": round(cs, 4),
            "global_efficiency": _rounded(ge),
            "parallel_efficiency": _rounded(pe),
            "compute_ms": round(scaling.compute_ms, 3),
            "reference_compute_ms": round(ref.compute_ms, 3),
            "reference_devices": ref.devices,
            "reference_source": ref.source,
            "threshold": round(COMPUTE_SCALING, 4),
            **health,
        },
    )


def _compute_advice(facts: RunFacts) -> str:
    """The knobs for ranks computing slower than on fewer devices: CPU contention first."""
    if facts.record.config.framework == "horovod":
        threads = "Horovod's background thread on a core of its own (HOROVOD_THREAD_AFFINITY)"
    else:
        threads = "DDP's communication threads a core of their own"
    return (
        "compute and communication contend for the CPUs: bind each rank to its own cores (mpirun "
        f"--bind-to core, --map-by), fewer compute threads (OMP_NUM_THREADS, torch.set_num_threads) and "
        f"{threads}, or nodes with more cores; on GPUs compare the SM clocks and throttle reasons in the "
        "telemetry (power, thermals) and the memory bandwidth the ranks of a node share"
    )


def cpu_starved(facts: RunFacts) -> Diagnosis:
    """Nodes whose CPUs were saturated (telemetry) while their ranks computed slower than the fastest node's."""
    code = "cpu-starved"
    compute = node_compute(facts.breakdown)
    util = {host: _cpu(facts.telemetry.get(facts.node_of(host), []), "util") for host in compute}
    known = {host: u for host, u in util.items() if u is not None}
    if not known:
        return unknown(code, "no CPU telemetry for the run's nodes")
    if len(compute) < 2:
        return unknown(code, "one node: no faster node to compare its compute with",
                       cpu_util=round(next(iter(known.values())), 3))  # fmt: skip
    fastest = min(compute.values())
    starved = sorted(h for h, u in known.items() if u >= CPU_SATURATED and compute[h] >= STRAGGLER * fastest)
    evidence: Evidence = {f"cpu_util.{h}": round(u, 3) for h, u in sorted(known.items())}
    if not starved:
        return Diagnosis(status="clear", severity="info", code=code, evidence=evidence,
                         message="no node's CPUs were saturated while its ranks computed slower")  # fmt: skip
    names = ", ".join(
        f"{h} ({100 * known[h]:.0f}% busy, {compute[h] / fastest:.1f}x slower)" for h in starved
    )
    return Diagnosis(
        status="found",
        severity="warning",
        code=code,
        node=facts.node_of(starved[0]),
        message=f"CPUs saturated while computing slower: {names}",
        advice="bind each rank to its own cores (mpirun --bind-to core, --map-by), fewer threads per rank "
        "(OMP_NUM_THREADS), no other work on the node, or a node with more cores",
        evidence=evidence,
    )


def _rail_rates(samples: Sequence[Sample]) -> dict[str, float]:
    """Each rail's (HCA port's, ``name:port``) mean tx+rx bytes per second over the samples."""
    rates: dict[str, list[float]] = defaultdict(list)
    for sample in samples:
        for name, link in (sample.net or {}).items():
            if ":" in name and link.tx_Bps is not None and link.rx_Bps is not None:
                rates[name].append(link.tx_Bps + link.rx_Bps)
    return {name: statistics.fmean(values) for name, values in rates.items()}


def rails(facts: RunFacts) -> Diagnosis:
    """Idle or unbalanced rails: per node, each HCA port's mean traffic against its busiest one's."""
    code = "rails"
    by_node = {node: r for node, samples in facts.telemetry.items() if (r := _rail_rates(samples))}
    if not by_node:
        return unknown(code, "no per-rail (HCA port) rates in the telemetry")
    problems: list[str] = []
    evidence: Evidence = {}
    for node, rates in sorted(by_node.items()):
        busiest = max(rates.values())
        evidence |= {f"{node}.{name}_MBps": round(rate / 1e6, 3) for name, rate in sorted(rates.items())}
        idle = sorted(n for n, r in rates.items() if r <= RAIL_IDLE * busiest or busiest == 0)
        if busiest == 0 and facts.record.nodes > 1:
            problems.append(f"{node}: every rail idle")
        elif idle:
            problems.append(f"{node}: {', '.join(idle)} idle")
        elif len(rates) > 1 and min(rates.values()) / busiest < RAIL_BALANCE:
            low = min(rates, key=rates.__getitem__)
            problems.append(f"{node}: {low} carries {min(rates.values()) / busiest:.2f} of its busiest rail")
    if not problems:
        return Diagnosis(status="clear", severity="info", code=code, evidence=evidence,
                         message="every rail carried its share")  # fmt: skip
    return Diagnosis(
        status="found",
        severity="warning",
        code=code,
        node=problems[0].split(":")[0],
        message="idle or unbalanced rails: " + "; ".join(problems),
        advice="the rail: name every HCA in the inventory's fabric.hca (NCCL_IB_HCA), check its link and "
        "cabling (`clusterctl check`), one rank per rail-local GPU",
        evidence=evidence,
    )


def _busy_window(utils: list[float]) -> list[float]:
    """The samples from the first busy one to the last (start-up and shutdown are not gaps)."""
    busy = [i for i, u in enumerate(utils) if u >= GPU_IDLE_UTIL]
    return utils[busy[0] : busy[-1] + 1] if busy else utils


def gpu_idle(facts: RunFacts) -> Diagnosis:
    """GPU idle gaps: the share of each GPU's busy window with its utilisation under 10%."""
    code = "gpu-idle"
    series: dict[str, list[float]] = defaultdict(list)
    for node, samples in facts.telemetry.items():
        for sample in samples:
            for gpu in sample.gpus or []:
                if gpu.util is not None:
                    series[f"{node}/gpu{gpu.index}"].append(gpu.util)
    if not series:
        return unknown(code, "no GPU utilisation in the telemetry (a CPU run, or nvidia-smi unreadable)")
    idle = {name: share(sum(u < GPU_IDLE_UTIL for u in w), len(w)) or 0.0
            for name, utils in series.items() if (w := _busy_window(utils))}  # fmt: skip
    worst = max(idle, key=idle.__getitem__)
    found = idle[worst] >= GPU_IDLE_SHARE
    return decided(
        found,
        code,
        node=worst.split("/")[0] if found else None,
        message=f"{worst} idle {100 * idle[worst]:.0f}% of its busy time",
        advice="feed the GPUs: more data-loader workers, preprocessing on the GPU (DALI), a larger batch",
        evidence={f"idle_share.{name}": round(v, 3) for name, v in sorted(idle.items())},
    )


def not_overlapped(facts: RunFacts) -> Diagnosis:
    """Allreduce not overlapped with backward: the exposed communication against the time the whole
    gradient allreduce takes at the preflight's bus bandwidth."""
    code = "not-overlapped"
    parts = facts.parts
    if facts.record.world_size < 2:
        return unknown(code, "one rank: nothing is all-reduced")
    if parts is None or parts.exposed_ms is None:
        return unknown(code, "no exposed-communication phase in the breakdown")
    if not facts.allreduce_s:
        return unknown(code, "no preflight bus bandwidth to time the whole allreduce (`run --preflight`)")
    exposed_s = parts.exposed_ms / 1e3
    hidden = hidden_share(exposed_s, facts.allreduce_s)
    found = exposed_s >= NOT_OVERLAPPED * facts.allreduce_s
    if facts.record.config.framework == "ddp":
        knob = "smaller DDP buckets (inventory run.bucket_cap_mb) so the first ones go out during backward"
    else:
        knob = "a shorter Horovod cycle time (HOROVOD_CYCLE_TIME) and fusion threshold so allreduces start during backward"
    return decided(
        found,
        code,
        message=f"{100 * hidden:.0f}% of the allreduce hidden behind backward "
        f"({1e3 * exposed_s:.0f} ms exposed of {1e3 * facts.allreduce_s:.0f} ms at the preflight bandwidth)",
        advice=knob,
        evidence={
            "exposed_ms": round(1e3 * exposed_s, 3),
            "allreduce_ms": round(1e3 * facts.allreduce_s, 3),
            "hidden_share": round(hidden, 3),
        },
    )


def _phase_means(record: RunRecord) -> dict[str, float]:
    """A run's phases (and step) per step, ms, mean over its ranks; the phases some rank lacks left out."""
    breakdown = record.breakdown or []
    means: dict[str, float] = {}
    for name in PHASES:
        values = [p.mean for b in breakdown if (p := getattr(b.phases_ms, name)) is not None]
        if breakdown and len(values) == len(breakdown):
            means[name] = statistics.fmean(values)
    if breakdown:
        means["step"] = statistics.fmean(b.step_ms.mean for b in breakdown)
    return means


def _telemetry_means(telemetry: Mapping[str, Sequence[Sample]]) -> dict[str, float]:
    """Per node: mean CPU busy and steal shares and GPU SM clock (``node.cpu_util`` ...), where sampled."""
    out: dict[str, float] = {}
    for node, samples in sorted(telemetry.items()):
        for what in ("util", "steal"):
            if (value := _cpu(samples, what)) is not None:
                out[f"{node}.cpu_{what}"] = value
        clocks = [g.sm_clock_mhz for s in samples for g in s.gpus or [] if g.sm_clock_mhz is not None]
        if clocks:
            out[f"{node}.sm_clock_mhz"] = statistics.fmean(clocks)
    return out


def _differences(slow: PeerRun, fast: PeerRun) -> tuple[list[str], Evidence]:
    """What differed between the slowest and the fastest run, in words (the largest first) and evidence:
    the nodes they ran on, the phases that grew, the telemetry that moved."""
    words: list[str] = []
    evidence: Evidence = {}
    slow_hosts = sorted({b.host for b in slow.record.breakdown or []} or slow.telemetry)
    fast_hosts = sorted({b.host for b in fast.record.breakdown or []} or fast.telemetry)
    if slow_hosts and fast_hosts and slow_hosts != fast_hosts:
        words.append(f"nodes {', '.join(slow_hosts)} against {', '.join(fast_hosts)}")
    evidence |= {
        "slowest_nodes": ", ".join(slow_hosts) or None,
        "fastest_nodes": ", ".join(fast_hosts) or None,
    }
    s_phases, f_phases = _phase_means(slow.record), _phase_means(fast.record)
    grown = sorted(
        ((name, s_phases[name] - f_phases[name]) for name in PHASES if name in s_phases and name in f_phases),
        key=lambda item: -item[1],
    )
    if "step" in s_phases and "step" in f_phases:
        evidence |= {
            "slowest_step_ms": round(s_phases["step"], 3),
            "fastest_step_ms": round(f_phases["step"], 3),
        }
        moved = [f"{name} +{delta:,.0f} ms" for name, delta in grown[:2] if delta > 0]
        if moved:
            words.append(f"step {s_phases['step']:,.0f} vs {f_phases['step']:,.0f} ms ({', '.join(moved)})")
    for name, delta in grown:
        evidence[f"{name}_ms_delta"] = round(delta, 3)
    s_tel, f_tel = _telemetry_means(slow.telemetry), _telemetry_means(fast.telemetry)
    changes = sorted(
        ((key, s_tel[key], f_tel[key]) for key in s_tel.keys() & f_tel.keys()),
        key=lambda item: -abs(item[1] - item[2]) / (1.0 if "cpu_" in item[0] else max(item[1], item[2], 1.0)),
    )
    for key, s_value, f_value in changes:
        evidence[f"slowest.{key}"], evidence[f"fastest.{key}"] = round(s_value, 3), round(f_value, 3)
    if changes:
        key, s_value, f_value = changes[0]
        node, _, what = key.partition(".")
        if what == "sm_clock_mhz":
            words.append(f"{node}'s SM clock {s_value:,.0f} vs {f_value:,.0f} MHz")
        else:
            label = "CPUs busy" if what == "cpu_util" else "CPU steal"
            words.append(f"{node}'s {label} {100 * s_value:.0f}% vs {100 * f_value:.0f}%")
    elif not slow.telemetry or not fast.telemetry:
        words.append("no telemetry of both to compare")
    return words, evidence


def run_to_run(facts: RunFacts) -> Diagnosis:
    """Runs of one configuration that differ: their spread, (max - min) / median of the valid runs'
    throughput, against ``RUN_TO_RUN``, and what differed between the slowest and the fastest."""
    code = RUN_TO_RUN_CODE
    runs = [p for p in facts.peers if p.record.valid and p.record.value is not None]
    if len(runs) < 2:
        return unknown(code, "fewer than two valid runs of this configuration to compare (`run --repeats 3`)",
                       runs=len(runs))  # fmt: skip
    runs.sort(key=lambda p: p.record.value or 0.0)
    slow, fast = runs[0], runs[-1]
    values = [p.record.value or 0.0 for p in runs]
    middle = statistics.median(values)
    if middle <= 0:
        return unknown(code, "no throughput above zero to compare", runs=len(runs))
    spread = (values[-1] - values[0]) / middle
    metric = facts.record.metrics.get(facts.record.primary_metric)
    unit = f" {metric.unit}" if metric else ""
    found = spread > RUN_TO_RUN
    differed, evidence = _differences(slow, fast) if found else ([], {})
    why = f": {'; '.join(differed)}" if differed else ""
    return decided(
        found,
        code,
        message=f"{len(runs)} runs spread {100 * spread:.0f}% of their median ({values[0]:,.3g} to "
        f"{values[-1]:,.3g}{unit}; tolerance {100 * RUN_TO_RUN:.0f}%); slowest {slow.record.run_id} "
        f"against fastest {fast.record.run_id}{why}",
        advice="run again and compare (`clusterctl report` shows each configuration's spread); look at what "
        "differed: other load on the nodes, clocks and thermals, which nodes it ran on; the middle run is "
        "the one explained",
        evidence={
            "runs": len(runs),
            "spread": round(spread, 4),
            "tolerance": RUN_TO_RUN,
            "slowest": slow.record.run_id,
            "fastest": fast.record.run_id,
            "slowest_value": round(values[0], 4),
            "fastest_value": round(values[-1], 4),
            **evidence,
        },
    )


Rule = Callable[[RunFacts], Diagnosis]
# In the order a cause comes before its symptom: a straggler makes the others wait in the allreduce.
RULES: tuple[Rule, ...] = (
    straggler,
    cpu_starved,
    compute_scaling,
    communication_bound,
    not_overlapped,
    input_bound,
    gpu_idle,
    rails,
    run_to_run,
)
# Rules about the configuration's runs, not the explained run's step: never its verdict.
ACROSS_RUNS = frozenset({RUN_TO_RUN_CODE})


def diagnose(facts: RunFacts) -> list[Diagnosis]:
    """Every rule's answer on the run, in ``RULES`` order."""
    return [rule(facts) for rule in RULES]
