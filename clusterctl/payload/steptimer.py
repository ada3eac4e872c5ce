"""Where each measured training step's time goes, per rank: the payload's per-step breakdown.

Shipped beside ``resnet50_bench.py`` and imported by it as a sibling; it imports only torch and the
standard library, never clusterctl. Every step is cut into consecutive phases, so the phases of a
step add up to the step:

- ``input``         obtaining the batch (the payload's synthetic batch is already on the device: ~0)
- ``forward``       zero_grad, forward pass and loss
- ``backward``      the backward pass up to the last gradient computed
- ``exposed_comm``  blocked on the gradient allreduce after that: Horovod's ``optimizer.synchronize()``;
  under DDP the rest of ``backward()`` after the last bucket's gradients were ready (DDP waits for its
  allreduces inside ``backward()``; a comm hook marks when each bucket is ready)
- ``optimizer``     the optimizer step on the all-reduced gradients

On a CPU each edge is the wall clock (``time.perf_counter``); on a GPU it is a CUDA event recorded on
the current stream, read only after the device was synchronised at a window edge (the benchmark's own
synchronisation: nothing is added per step). At the end each rank prints one line:

    CLUSTERCTL_BREAKDOWN {"rank": 0, "host": ..., "steps": ..., "phases_ms": {...}, "step_ms": {...}, ...}

each phase (and the whole step) as its median, p10, p90 and mean over the measured steps, in ms.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import statistics
import time
from typing import Any

import torch

BREAKDOWN_PREFIX = "CLUSTERCTL_BREAKDOWN "
# CLUSTERCTL_BREAKDOWN=0 in a rank's environment turns the timer off (bench/telemetry_cost.py
# measures the breakdown's cost as the throughput with it on against off); the line then has no steps.
BREAKDOWN_SWITCH = "CLUSTERCTL_BREAKDOWN"
PHASES = ("input", "forward", "backward", "exposed_comm", "optimizer")

Mark = float | torch.cuda.Event


class StepTimer:
    """The phase edges of every measured step, read into milliseconds at window edges."""

    def __init__(self, device: torch.device):
        self.enabled = os.environ.get(BREAKDOWN_SWITCH, "1") != "0"
        self.cuda = device.type == "cuda"
        self._marks: list[Mark] = []
        self._steps: list[list[Mark]] = []
        self._ready: Mark | None = None
        self.durations: dict[str, list[float]] = {phase: [] for phase in ("step", *PHASES)}

    def _now(self) -> Mark:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def begin(self) -> None:
        """The step starts (the edge before ``input``)."""
        if self.enabled:
            self._marks, self._ready = [self._now()], None

    def end(self, phase: str) -> None:
        """``phase`` (the next one in ``PHASES``) ends now; ``backward`` ends at the gradients-ready
        mark when a DDP comm hook took one, the rest of ``backward()`` then counts as exposed comm."""
        if not self.enabled:
            return
        assert PHASES[len(self._marks) - 1] == phase, f"phase {phase} out of order"
        self._marks.append(self._ready if phase == "backward" and self._ready is not None else self._now())
        if phase == PHASES[-1]:
            self._steps.append(self._marks)

    def gradients_ready(self) -> None:
        """A gradient bucket is ready for its allreduce (the last call of a step marks the end of backward)."""
        self._ready = self._now()

    def watch(self, model: torch.nn.Module) -> None:
        """Under DDP, wrap its allreduce in a comm hook that marks when each bucket's gradients are ready."""
        register = getattr(model, "register_comm_hook", None)
        if register is None or not self.enabled:  # Horovod: synchronize() is timed by the loop itself
            return
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        def hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
            self.gradients_ready()
            return allreduce_hook(state, bucket)

        # DDP compares the annotations with the classes; this module's are strings (future annotations).
        hook.__annotations__ = {"bucket": dist.GradBucket, "return": torch.futures.Future[torch.Tensor]}
        register(None, hook)

    def read(self) -> None:
        """Turn the steps recorded so far into durations; on a GPU, call after the device is synchronised."""
        for marks in self._steps:
            for phase, (a, b) in zip(PHASES, itertools.pairwise(marks), strict=True):
                self.durations[phase].append(self._ms(a, b))
            self.durations["step"].append(self._ms(marks[0], marks[-1]))
        self._steps = []

    @staticmethod
    def _ms(a: Mark, b: Mark) -> float:
        if isinstance(a, torch.cuda.Event) and isinstance(b, torch.cuda.Event):
            return float(a.elapsed_time(b))
        assert isinstance(a, float) and isinstance(b, float)
        return (b - a) * 1e3

    def summary(self, rank: int, seconds: float, **facts: object) -> dict[str, Any]:
        """This rank's breakdown: per phase and per step median/p10/p90/mean (ms), and ``facts``.

        ``seconds``: the rank's measured wall time for all its steps (the step times cover it but for
        the loop's own overhead between steps).
        """
        return {
            "rank": rank,
            "host": socket.gethostname(),
            "clock": "cuda-events" if self.cuda else "wall",
            "steps": len(self.durations["step"]),
            "seconds": round(seconds, 6),
            "phases_ms": {phase: stats(self.durations[phase]) for phase in PHASES},
            "step_ms": stats(self.durations["step"]),
            **facts,
        }


def stats(values: list[float]) -> dict[str, float] | None:
    """Median, p10, p90 and mean of ``values`` in ms (3 decimals); None when there are none."""
    if not values:
        return None
    if len(values) == 1:
        p10 = p90 = values[0]
    else:
        deciles = statistics.quantiles(values, n=10, method="inclusive")
        p10, p90 = deciles[0], deciles[-1]
    figures = {"median": statistics.median(values), "p10": p10, "p90": p90, "mean": statistics.fmean(values)}
    return {name: round(value, 3) for name, value in figures.items()}


def breakdown_line(summary: dict[str, Any]) -> str:
    """The one machine-readable line a rank prints: the prefix and its summary as JSON."""
    return BREAKDOWN_PREFIX + json.dumps(summary, sort_keys=True)
