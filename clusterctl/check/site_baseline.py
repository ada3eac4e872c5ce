"""`clusterctl baseline save`: a site's own baseline from a known-good collective run or `check pairs`.

The figure is the collective's bus bandwidth at the large sizes: a run directory's (nccl-tests or the
CPU allreduce, a valid run) or, from `check pairs --json` output that named nothing, the median of its
pairs. It is matched to the inventory's hardware and the run's node count (``hardware_config``), so
`check pairs` and `run --preflight` find it before the shipped figures.
"""

from __future__ import annotations

import json
import math
import statistics
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from clusterctl.check.pairs import SCHEMA
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from clusterctl.readfile import read_capped
from clusterctl.results.baselines import BUSBW_METRIC, Baseline, hardware_config
from clusterctl.results.record import RESULT_FILE, read_record
from clusterctl.workloads.nccl_tests import LARGE_BUSBW

COLLECTIVES = ("nccl-tests", "allreduce")
MAX_CHECK_BYTES = 16 << 20


def baseline_from(source: Path, inventory: Inventory, *, name: str | None, tolerance: float) -> Baseline:
    """The baseline ``source`` (a run directory, or a `check pairs --json` file) shows for ``inventory``.

    Raises:
        InputError: ``source`` is neither, or is not known-good (an invalid run, another workload, a
            check that named a node or link).
    """
    if (source / RESULT_FILE).is_file():
        nodes, value, origin = _from_run(source)
    elif source.is_file():
        nodes, value, origin = _from_check(source)
    else:
        raise InputError(
            f"baseline save {source}: neither a run directory (with {RESULT_FILE}) nor a file. Fix: name the "
            "run directory of a good nccl-tests/allreduce run, or a file holding `check pairs --json` output."
        )
    if not math.isfinite(value) or value <= 0:
        raise InputError(
            f"baseline save {source}: the bus bandwidth read there is {value!r} GB/s, not a finite figure above "
            "zero, so it is no measurement to judge others against. Fix: name a run or a check that measured "
            "the collective."
        )
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    match = hardware_config(inventory, nodes)
    return Baseline(
        name=name or f"site-{inventory.cluster.name}-{nodes}n",
        metric=BUSBW_METRIC,
        match=match,
        value=value,
        unit="GB/s",
        tolerance=tolerance,
        source=f"this site: {origin}, saved {when} by `clusterctl baseline save`",
    )


def _from_run(directory: Path) -> tuple[int, float, str]:
    try:
        record = read_record(directory)
    except (ValidationError, ValueError, OSError) as exc:
        raise InputError(f"baseline save {directory}: {RESULT_FILE} cannot be read ({exc}).") from None
    busbw = record.metrics.get(LARGE_BUSBW)
    problem = (
        f"it ran {record.config.workload}, not a collective ({' or '.join(COLLECTIVES)})"
        if record.config.workload not in COLLECTIVES
        else "the run is not valid (`clusterctl report` shows why)"
        if not record.valid
        else "it printed no bus bandwidth"
        if busbw is None
        else None
    )
    if problem or busbw is None:
        raise InputError(f"baseline save {directory}: {problem}. Fix: name a known-good collective run.")
    return record.nodes, busbw.value, f"run {record.run_id}"


def _from_check(path: Path) -> tuple[int, float, str]:
    fix = "save the output of `clusterctl check pairs --json > FILE` from a check that named nothing"
    try:
        document = json.loads(read_capped(path, MAX_CHECK_BYTES, fix))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"baseline save {path}: not JSON ({exc}). Fix: {fix}.") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise InputError(
            f"baseline save {path}: not `check pairs --json` output (schema {SCHEMA}). Fix: {fix}."
        )
    try:
        named = [n["node"] for n in document["nodes"] if n["verdict"] != "ok"]
        named += ["-".join(link["nodes"]) for link in document["links"]]
        pairs = [float(g["median_gb_s"]) for g in document["groups"] if len(g["nodes"]) == 2]
        bad = next((p for p in pairs if not (math.isfinite(p) and p > 0)), None)
        if bad is not None:
            raise ValueError(f"a finite median_gb_s above zero in every pair (one is {bad!r})")
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"baseline save {path}: a {SCHEMA} document lacks {exc}. Fix: {fix}.") from None
    if named or not pairs:
        why = f"the check named {', '.join(named)}: not known-good" if named else "the check measured no pair"
        raise InputError(f"baseline save {path}: {why}. Fix: {fix}.")
    return 2, statistics.median(pairs), f"check pairs of {len(pairs)} pair(s), their median"
