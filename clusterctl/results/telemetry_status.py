"""What a run's node telemetry holds and what it could not say: the samplers' output split into the
run directory's files and the record's ``telemetry_unknown``. Pure.

A sampler prints one JSON object per sample; anything else it printed (``python3: not found``, a
traceback) says why a node has fewer samples or none. A source is unknown on a node when every sample
there has it null (the rate sources: every sample but the first, which has no rates).
"""

from __future__ import annotations

from collections.abc import Mapping

from clusterctl.results.telemetry import Sample, parse_samples

# Each source's name in ``telemetry_unknown``, and whether it is a rate (null in the first sample).
SOURCES = ("cpu", "memory", "load", "net", "storage.disk", "storage.nfs", "gpus")
# How much of a sampler's other output is quoted as the reason.
REASON_CHARS = 300


def _value(sample: Sample, source: str) -> object:
    storage = sample.storage
    return {
        "cpu": sample.cpu,
        "memory": sample.mem_total_bytes,
        "load": sample.load1,
        "net": sample.net,
        "storage.disk": storage.read_Bps if storage else None,
        "storage.nfs": storage.nfs_read_Bps if storage else None,
        "gpus": sample.gpus,
    }[source]


def unknown_sources(samples: list[Sample]) -> list[str]:
    """The sources null in every sample (rates: every sample after the first), in ``SOURCES`` order."""
    rated = samples[1:]
    unknown = []
    for source in SOURCES:
        among = samples if source in ("memory", "load", "gpus") else rated
        if not any(_value(s, source) is not None for s in among):
            unknown.append(source)
    return unknown


def split_output(text: str) -> tuple[str, list[str]]:
    """A sampler's output as (its sample lines, as JSON Lines; every other non-empty line)."""
    samples: list[str] = []
    other: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        (samples if parse_samples(line) else other).append(line)
    return "".join(f"{line}\n" for line in samples), other


def telemetry_files(
    outputs: Mapping[str, str], errors: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Each node's telemetry file text (nodes with at least one sample) and what is unknown, by node.

    Args:
        outputs: each sampler's output, by node.
        errors: why a node's sampler did not start or lost samples, by node.

    Returns:
        (file text by node, unknown sources by node; ``sampler: <why>`` first where the sampler said
        something else than samples, or did not start).
    """
    files: dict[str, str] = {}
    unknown: dict[str, list[str]] = {}
    for node in sorted(outputs.keys() | errors.keys()):
        jsonl, other = split_output(outputs.get(node, ""))
        reasons = [errors[node]] if node in errors else []
        if other:
            reasons.append(" | ".join(other)[:REASON_CHARS])
        samples = parse_samples(jsonl)
        if samples:
            files[node] = jsonl
        elif not reasons:
            reasons.append("no sample")
        missing = [f"sampler: {'; '.join(reasons)}"] if reasons else []
        missing += unknown_sources(samples)
        if missing:
            unknown[node] = missing
    return files, unknown
