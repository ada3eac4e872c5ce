"""A slurm job's snapshots of its nodes, read back: the batch script's collection (with the fabric
counters) run for real by sh on this machine, the job directory's files printed by the real
``job_files_command``, then cut into bundles and before/after readings; and the conductor judging
and recording what a launch read inside its allocation, without reading anything over SSH."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterctl.diagnostics.collectors import collection_script
from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters, PortBytes, counter_command
from clusterctl.inventory import FabricSpec, Inventory, load_inventory
from clusterctl.paths import NODE_SAMPLER, data_dir, payload_dir
from clusterctl.results.history import load_runs
from clusterctl.results.telemetry import load_telemetry
from clusterctl.results.telemetry_status import SOURCES
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run
from clusterctl.run.slurm.snapshots import (
    COUNTERS_KEY,
    job_collectors,
    job_files_command,
    read_job_snapshots,
    split_job_files,
)
from tests.helpers.localrun import Ended
from tests.helpers.traffic import send_over_loopback

# Every Linux machine has the loopback interface: the test's own traffic goes through it.
LOOPBACK = FabricSpec(kind="ethernet", interface="lo")
MB = 10**6


def _snapshot(job: Path, moment: str, node: str) -> None:
    """What the batch script's snapshot step leaves for ``node``: the collection script's output."""
    script = collection_script(job_collectors(LOOPBACK))
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=300, check=False)
    (job / f"topology-{moment}-{node}.txt").write_text(done.stdout)


def test_the_job_snapshots_become_bundles_and_counter_readings(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    _snapshot(job, "before", "node1")
    _snapshot(job, "before", "node2")  # node2's second snapshot never came (a node lost mid-job)
    send_over_loopback(5 * MB)
    _snapshot(job, "after", "node1")
    (job / "output.log").write_text("0: done\n")
    (job / "job.sh").write_text("#!/bin/bash\n")
    printed = subprocess.run(job_files_command(str(job)), capture_output=True, text=True, check=True).stdout
    files = split_job_files(printed)
    assert set(files) == {
        "topology-before-node1.txt",
        "topology-before-node2.txt",
        "topology-after-node1.txt",
    }
    assert files["topology-after-node1.txt"] == (job / "topology-after-node1.txt").read_text()

    snapshots = read_job_snapshots(files, LOOPBACK, "2026-01-02T03:04:05+00:00")
    assert set(snapshots.bundles) == {"topology", "topology-after"}
    assert set(snapshots.bundles["topology"]) == {"node1", "node2"}
    bundle = snapshots.bundles["topology-after"]["node1"]
    assert bundle.meta.sections[COUNTERS_KEY].status == "ok"
    assert "ip-addr" in bundle.meta.sections  # check topology's collectors are there too
    assert snapshots.counters is not None
    before, after = snapshots.counters
    moved = after["node1"].ports["lo"].tx - before["node1"].ports["lo"].tx
    assert moved >= 5 * MB
    assert after["node2"].ports == {} and "no snapshot after the run" in (after["node2"].error or "")


def test_a_snapshot_without_counters_or_no_snapshot_at_all_says_so() -> None:
    snapshots = read_job_snapshots({"topology-before-n1.txt": "", "topology-after-n1.txt": "",
                                    "output.log": "x", "topology-before-../x.txt": ""}, LOOPBACK, "t")  # fmt: skip
    assert snapshots.counters is not None
    before, _ = snapshots.counters
    assert set(before) == {"n1"} and "has no fabric counters" in (before["n1"].error or "")
    assert read_job_snapshots({}, LOOPBACK, "t").counters is None
    assert split_job_files("") == {}


def test_the_batch_script_reads_the_fabric_counters_on_every_node() -> None:
    from tests.helpers.slurm import slurm_inventory, slurm_script

    script = slurm_script()
    fabric = slurm_inventory().primary.fabric
    assert shlex.join(("sh", "-c", counter_command(fabric))) in script
    assert f"@@clusterctl-collect@@ begin {COUNTERS_KEY}" in script


def _eth(tx: int) -> NodeCounters:
    return NodeCounters(ports={"eth0": PortBytes(tx=tx, rx=tx)})


@pytest.fixture(scope="module")
def sandbox() -> Inventory:
    return load_inventory(data_dir("inventories") / "sandbox-example.yml")


def test_the_conductor_judges_and_records_what_the_launch_read_in_its_allocation(
    sandbox: Inventory, tmp_path: Path
) -> None:
    plan = plan_run(sandbox, "resnet50", nodes=2)
    # the allocation's nodes, not the inventory's: the proof judges the nodes the job ran on
    before = {"c1": _eth(0), "c2": _eth(0)}
    after = {"c1": _eth(10**12), "c2": _eth(10**12)}
    bundles = read_job_snapshots(
        {"topology-before-c1.txt": "", "topology-after-c1.txt": ""}, LOOPBACK, "t"
    ).bundles

    slurm = Ended(0, name="slurm", command="#!/bin/bash\nsrun x\n", counters=(before, after), bundles=bundles)
    [(record, directory)] = run_plans(
        run_context(sandbox, [plan], launcher=slurm, timeout_s=10, runs_dir=tmp_path)
    )
    assert record.launcher == "slurm"
    assert record.counters is not None and set(record.counters.nodes) == {"c1", "c2"}
    assert record.counters.nodes["c1"].sent == 10**12
    assert (directory / "command.txt").read_text() == "#!/bin/bash\nsrun x\n"
    assert json.loads((directory / "result.json").read_text())["launcher"] == "slurm"
    assert [r.launcher for r in load_runs(tmp_path).runs] == ["slurm"]
    assert (directory / "topology" / "c1" / "meta.json").is_file()
    assert (directory / "topology-after" / "c1" / "meta.json").is_file()


def test_the_jobs_telemetry_files_are_read_back_into_the_run_directory(
    sandbox: Inventory, tmp_path: Path
) -> None:
    """The sampler as the batch script runs it (the job's copy, stdout in telemetry-<node>.jsonl, its
    stop file), its file printed by the real ``job_files_command``, and the conductor writing it."""
    from tests.helpers.slurm import slurm_script

    job = tmp_path / "job"
    job.mkdir()
    script = slurm_script()
    assert "--output=/shared/clusterctl/" in script and "/telemetry-%N.jsonl" in script
    assert f"python3 '/shared/clusterctl/{job_name(script)}/payload/{NODE_SAMPLER}' --max-seconds" in script
    assert "trap stop_telemetry EXIT" in script
    stop = job / "telemetry.stop"
    with (job / "telemetry-c1.jsonl").open("w") as out:
        sampler = subprocess.Popen(
            [sys.executable, str(payload_dir() / NODE_SAMPLER), "--max-seconds", "60", "--stop-file", str(stop),
             "--net", "lo", "--interval", "0.5"],
            stdout=out,
        )  # fmt: skip
        try:
            time.sleep(2)
            stop.touch()
            assert sampler.wait(timeout=30) == 0
        finally:
            sampler.kill()
            sampler.wait()
    _snapshot(job, "before", "c1")
    _snapshot(job, "before", "c2")
    printed = subprocess.run(
        job_files_command(str(job)), capture_output=True, text=True, timeout=60, check=True
    )
    snapshots = read_job_snapshots(split_job_files(printed.stdout), LOOPBACK, "t")
    assert list(snapshots.telemetry) == ["c1"]
    assert snapshots.telemetry_errors == {"c2": "the job left no telemetry file"}

    slurm = Ended(0, name="slurm", telemetry=snapshots.telemetry, telemetry_errors=snapshots.telemetry_errors)
    [(record, directory)] = run_plans(
        run_context(
            sandbox,
            [plan_run(sandbox, "resnet50", nodes=2)],
            launcher=slurm,
            timeout_s=10,
            runs_dir=tmp_path / "runs",
        )
    )
    samples = load_telemetry(directory)
    assert list(samples) == ["c1"] and len(samples["c1"]) >= 2
    assert record.telemetry_unknown is not None
    assert record.telemetry_unknown["c2"] == ["sampler: the job left no telemetry file", *SOURCES]
    assert "gpus" in record.telemetry_unknown["c1"] and "cpu" not in record.telemetry_unknown["c1"]


def job_name(script: str) -> str:
    """The job directory's name in a rendered script."""
    return script.split("--output='/shared/clusterctl/", 1)[1].split("'", 1)[0]
