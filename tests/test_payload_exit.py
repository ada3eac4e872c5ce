"""The payloads end cleanly (issue 36): 2-rank DDP and FSDP runs of the gpt payload under this host's Open
MPI (CPU, Gloo), many in a row, none aborting at exit ("terminate called without an active exception",
SIGABRT: a run the judge calls rank-crashed), and every marker line forwarded whole with its newline.

``CLUSTERCTL_EXIT_RUNS`` sets how many runs each case makes (default 2, a few seconds each on an idle
machine: a tiny model, two steps; under the shared machine's load up to 40 s each); the acceptance
figure is 50 (``CLUSTERCTL_EXIT_RUNS=50``), run by hand (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from tests.helpers.localrun import TINY_GPT, LocalMpirun, local_inventory

RUNS = int(os.environ.get("CLUSTERCTL_EXIT_RUNS", "2"))
MARKERS = re.compile(r"(?:CLUSTERCTL_RESULT|CLUSTERCTL_BREAKDOWN|clusterctl-peak) ")
ABORTS = ("terminate called", "Aborted", "signal 6", "core dumped")


def _run(framework: str) -> tuple[int | None, str]:
    inventory = local_inventory()
    plan = build_job(
        inventory,
        run_options(inventory, "gpt", nodes=2, framework=framework, **TINY_GPT),
        get_workload("gpt"),
    )
    launch = LocalMpirun().start(inventory, plan)
    code = launch.follow(lambda _: None, time.monotonic() + 300)
    return code, launch.output


def _cut_markers(output: str) -> list[str]:
    """The marker lines that did not reach the output whole: whatever follows the JSON is not a newline
    (mpirun forwarded the line and its newline as two pieces, another rank's piece possibly between)."""
    decoder = json.JSONDecoder()
    cut = []
    for match in MARKERS.finditer(output):
        try:
            _, end = decoder.raw_decode(output, match.end())
        except json.JSONDecodeError:
            cut.append(output[match.start() : match.start() + 80])
            continue
        if output[end : end + 1] != "\n":
            cut.append(output[match.start() : match.start() + 40] + " ... " + output[end : end + 40])
    return cut


@pytest.mark.parametrize("framework", ["ddp", "fsdp"])
def test_two_rank_runs_end_cleanly_every_time(framework: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Unbuffered, print() writes a line and its newline apart (what mpirun then forwards as two pieces);
    # marker lines must reach the output whole all the same.
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    for attempt in range(1, RUNS + 1):
        code, output = _run(framework)
        assert code == 0 and not any(sign in output for sign in ABORTS), (
            f"{framework} run {attempt} of {RUNS} ended with exit code {code}:\n{output[-3000:]}"
        )
        assert output.count("CLUSTERCTL_RESULT ") == 1 and output.count("CLUSTERCTL_BREAKDOWN ") == 2, output
        assert not _cut_markers(output), _cut_markers(output)
