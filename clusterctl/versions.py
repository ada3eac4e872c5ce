"""Release version strings (NCCL's, CUDA's) as tuples that compare in release order.

One parser for every place that asks "is this release older than the one that introduced X": the
job's environment (``workloads/job.py``: NCCL's exact-name lists) and the diagnostics rules (GDR semantics, DMA-BUF).
"""

from __future__ import annotations

import re


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """``"2.5.6"``, ``"2.18.3-1"`` or ``"2.21.5+cuda12.4"`` as (major, minor[, patch]); None when unknown.

    Compare with tuples of the release that introduced something: ``(2, 5, 6) < (2, 6)``.
    """
    match = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    return tuple(int(part) for part in match.groups() if part is not None) if match else None
