"""The training rate a node's storage must feed, read from the recorded runs (pure).

`check topology` compares each node's read rate of ``run.data`` with it. The figure is the best
(highest) per-node training rate of a valid image-training run on this inventory's device, real data or
synthetic: synthetic tensors show what the model consumes when nothing waits on input, which is what
the storage must keep up with. No absolute images/s baseline ships with clusterctl (the references are
speedups and efficiencies, the prediction needs recorded 1-device runs), so without a recorded run the
need is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.data.storage import InputNeed
from clusterctl.inventory import Inventory
from clusterctl.results.record import RunRecord, run_device

IMAGE_RATE = "total_images_per_sec"
# What trains a model on images: a loader-only run reads without training, so it is no need.
TRAINING_DATA = ("real", "synthetic")


def input_need(inventory: Inventory, runs: Sequence[RunRecord]) -> InputNeed | None:
    """The best per-node training rate among ``runs`` on ``inventory``'s device, and which run gave
    it; None when none of them is a valid image-training run with a rate on that device."""
    device = run_device(inventory)
    rated = [
        ((r.value or 0.0) / r.nodes, r)
        for r in runs
        if r.valid
        and r.primary_metric == IMAGE_RATE
        and r.config.device == device
        and r.config.data in TRAINING_DATA
        and r.value
    ]
    if not rated:
        return None
    per_node, best = max(rated, key=lambda pair: pair[0])
    c = best.config
    return InputNeed(
        per_node,
        f"run {best.run_id} ({c.workload}, {c.data} data, {best.nodes} node(s), {c.precision}, "
        f"batch {c.batch_size}, {best.value:,.1f} img/s), the best of {len(rated)} recorded on {device}",
    )
