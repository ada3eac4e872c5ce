"""The slurm launcher on the session sandbox's real Slurm 22.05 (munge, slurmctld, configless slurmd):
DDP on 2 nodes x 2 ranks through sbatch + srun --mpi=pmix in per-task containers running the job's own
payload copy (ranks from Slurm's variables, the rendezvous on the allocation's first node, one snapshot
task per node), its fabric counters read inside the allocation, next to the ssh launcher's run (each
rank through the binding wrapper) in the report; on the GPU-shaped nodes every rank a distinct GPU of
its own CPU's socket, the login node's low memlock kept from the ranks; Ctrl-C leaves no job and no
container; a failing rank fails the run with its state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.ssh import connect, run
from clusterctl.inventory import Inventory, parse_cpu_list
from clusterctl.results.telemetry import load_telemetry
from clusterctl.run.backends.slurm import SlurmBackend
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run
from clusterctl.run.slurm.script import JOB_LABEL, login_node
from clusterctl.sandbox import cluster as sandbox_cluster
from tests.helpers.sandbox import Sandbox, on_node
from tests.helpers.strictjson import report_rows, strict_loads

pytestmark = pytest.mark.integration


def _on_login(inv: Inventory, argv: list[str]) -> str:
    """What ``argv`` printed on the slurm login node."""
    assert inv.slurm is not None
    with connect(inv, login_node(inv.slurm)) as conn:
        return run(conn, login_node(inv.slurm), argv, timeout_s=30).stdout


def _queue(inv: Inventory) -> str:
    """squeue on the login node: one 'id state' line per job still in the queue."""
    return _on_login(inv, ["squeue", "-h", "-o", "%i %T"])


def _job_containers(inv: Inventory) -> dict[str, list[str]]:
    """Per node: names of the containers a Slurm job's task started (label io.clusterctl.slurm-job)."""
    found = {}
    for node in inv.nodes:
        client = docker_client(inv, node)
        try:
            found[node.name] = [
                c.name for c in client.containers.list(all=True, filters={"label": JOB_LABEL})
            ]
        finally:
            client.close()
    return found


def _assert_no_sampler(sandbox2: Sandbox) -> None:
    """No telemetry sampler left on any node (ssh's runs as python3 -c, the job's from its file)."""
    for node in ("node1", "node2"):
        processes = on_node(sandbox2, node, "ps", "-eo", "args=")
        assert "nodesampler" not in processes, (node, processes)


def test_ddp_2x2_through_slurm_is_valid_and_reported_next_to_ssh(
    cluster: Inventory, sandbox2, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    runs = tmp_path / "runs"
    records = {}
    # 2 ranks per node on nodes of 1 CPU each: the sandbox's Slurm declares the CPUs it needs
    ddp_2x2 = [
        "--framework",
        "ddp",
        "--nodes",
        "2",
        "--ranks-per-node",
        "2",
        "--steps",
        "4",
        "--warmup-steps",
        "1",
    ]
    assert main(["up", *inv]) == 0
    try:
        for launcher in ("ssh", "slurm"):
            capsys.readouterr()
            code = main(
                ["run", "resnet50", *inv, *ddp_2x2, "--launcher", launcher, "--runs-dir", str(runs), "--json"]
            )
            captured = capsys.readouterr()
            assert code == 0, captured.err[-3000:]
            (records[launcher],) = strict_loads(captured.out)["runs"]
    finally:
        assert main(["down", *inv]) == 0
    # srun --label tagged rank 0's result line; the job ended COMPLETED through sbatch + srun --mpi=pmix
    assert "0: CLUSTERCTL_RESULT" in captured.err
    assert "COMPLETED (ExitCode 0:0)" in captured.err
    for launcher, record in records.items():
        assert record["valid"], record
        assert record["launcher"] == launcher
        assert record["world_size"] == 4 and record["nodes"] == 2
        assert record["metrics"]["total_images_per_sec"]["value"] > 0
        # the proof by counters: eth0 carried at least the allreduces' bytes on both nodes (for slurm,
        # read by the batch script inside the allocation, on the nodes Slurm gave the job)
        proof = record["counters"]
        assert proof is not None and proof["valid"] and proof["fabric"] == "eth0", proof
        assert set(proof["nodes"]) == {"node1", "node2"}
        for name, node in proof["nodes"].items():
            assert node["error"] is None, (launcher, name, node)
            assert node["rails"]["eth0"]["tx"] >= proof["expected_bytes_per_node"] > 0, (launcher, name)
    slurm_dir = runs / records["slurm"]["run_id"]
    assert (slurm_dir / "command.txt").read_text().startswith("#!/bin/bash\n#")  # the batch script
    script = (slurm_dir / "command.txt").read_text()
    assert "srun --mpi=pmix" in script and 'srun -N "$SLURM_NNODES" -n "$SLURM_NNODES"' in script
    # every rank found its place from Slurm's variables (not rank 0 of 1) and met on the first node
    assert '"world_size": 4' in (slurm_dir / "output.log").read_text()
    assert (
        'export MASTER_ADDR="${CLUSTERCTL_NODES[0]}"' in script
        and "/payload:/opt/clusterctl/payload:ro" in script
    )
    # the GPU-shaped nodes (gres.conf: GPUs 0-1 on core 0, 2-3 on core 1; each node container has 2 CPUs,
    # core i its i-th): every rank bound to one CPU and a distinct GPU of that CPU's socket
    output = (slurm_dir / "output.log").read_text()
    placements = [json.loads(line.split("CLUSTERCTL_PLACEMENT ", 1)[1]) for line in output.splitlines()
                  if "CLUSTERCTL_PLACEMENT " in line]  # fmt: skip
    assert sorted(p["rank"] for p in placements) == [0, 1, 2, 3], output[-3000:]
    assert len({(p["node"], p["gpu"]) for p in placements}) == 4
    cpusets = {node.name: parse_cpu_list(node.cpus) for node in sandbox_cluster.status().nodes}
    for p in placements:
        (cpu,) = p["cpus"]
        socket = cpusets[p["node"]].index(cpu)  # Sockets=2 CoresPerSocket=1: core i is socket i
        assert p["gpu"] in ({"0", "1"} if socket == 0 else {"2", "3"}), p
        assert p["near"] == (["0", "1"] if socket == 0 else ["2", "3"]), p
    assert {p["cpus"][0] for p in placements if p["node"] == "node1"} == set(cpusets["node1"])
    # the login node's 64 KiB soft limit stayed there (PropagateResourceLimitsExcept=MEMLOCK); a CPU run
    # only reports a limit below unlimited
    assert "clusterctl: memlock on node1: " in output and "clusterctl: memlock on node1: 64\n" not in output
    ssh_output = (runs / records["ssh"]["run_id"] / "output.log").read_text()
    assert all(f"bind: rank {r} (local {r % 2}) on CPUs " in ssh_output for r in range(4))
    for folder in ("topology", "topology-after"):  # the job's own snapshots, as bundles
        for node in ("node1", "node2"):
            meta = json.loads((slurm_dir / folder / node / "meta.json").read_text())
            assert meta["sections"]["fabric-counters"]["status"] == "ok", (folder, node, meta)
    assert (runs / records["ssh"]["run_id"] / "command.txt").read_text().startswith("mpirun ")
    for launcher, record in records.items():  # node telemetry: over SSH, or inside the allocation
        telemetry = load_telemetry(runs / record["run_id"])
        assert sorted(telemetry) == ["node1", "node2"], launcher
        assert all(len(samples) >= 2 for samples in telemetry.values()), (launcher, telemetry)
        assert not any(u.startswith("sampler") for us in record["telemetry_unknown"].values() for u in us)
    _assert_no_sampler(sandbox2)
    assert _job_containers(cluster) == {"node1": [], "node2": []}  # --rm and the Epilog left nothing
    # the batch script took the topology and counters snapshot on both nodes, before and after
    snapshots = _on_login(cluster, ["sh", "-c", "cd /shared/clusterctl && ls */topology-*"]).split()
    assert {name.split("/")[1] for name in snapshots} == {
        f"topology-{moment}-{node}.txt" for moment in ("before", "after") for node in ("node1", "node2")
    }

    # more ranks per node than the nodes' 4 GPUs: refused before sbatch, nothing queued
    capsys.readouterr()
    five = ["run", "resnet50", *inv, "--framework", "ddp", "--nodes", "2", "--ranks-per-node", "5"]
    assert main([*five, "--launcher", "slurm", "--dry-run"]) == 2
    assert "share a GPU" in capsys.readouterr().err

    capsys.readouterr()
    code = main(["report", "--runs-dir", str(runs), "--json"])
    rows = report_rows(capsys.readouterr().out)
    assert code == 0
    # one configuration, one row per launcher, side by side
    assert [(row["launcher"], row["runs"], row["devices"]) for row in rows] == [
        ("ssh", 1, 4),
        ("slurm", 1, 4),
    ]


def test_check_pairs_under_slurm_runs_each_group_as_a_job_on_exactly_its_nodes(
    cluster: Inventory, sandbox2, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No `up`: under Slurm each run is a job whose tasks start their own containers.
    argv = ["check", "pairs", "-i", str(sandbox2.inventory_path), "--launcher", "slurm", "--repeats", "1",
            "--runs-dir", str(tmp_path / "runs"), "--json"]  # fmt: skip
    code = main(argv)
    captured = capsys.readouterr()
    report = strict_loads(captured.out)
    assert code == 0, captured.err[-3000:]
    (group,) = report["groups"]
    assert sorted(group["nodes"]) == ["node1", "node2"] and group["median_gb_s"] > 0, report
    assert [n["verdict"] for n in report["nodes"]] == ["ok", "ok"]
    (run_dir,) = group["run_dirs"]
    script = (Path(run_dir) / "command.txt").read_text()
    assert "#SBATCH --nodelist=node[1-2]" in script and "#SBATCH --nodes=2" in script, script
    assert json.loads((Path(run_dir) / "result.json").read_text())["launcher"] == "slurm"
    assert _queue(cluster) == ""


def test_ctrl_c_cancels_the_job_and_leaves_no_container(cluster: Inventory, sandbox2, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "clusterctl", "run", "resnet50", "-i", str(sandbox2.inventory_path),
               "--launcher", "slurm", "--steps", "10000", "--runs-dir", str(tmp_path / "runs")]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not all(_job_containers(cluster).values()):  # both ranks' containers are running
            assert process.poll() is None and time.monotonic() < deadline, "the job's ranks never started"
            time.sleep(2)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0, output
    assert "cancelled; it has left the queue" in output or _queue(cluster) == ""
    assert _queue(cluster) == ""
    assert _job_containers(cluster) == {"node1": [], "node2": []}
    _assert_no_sampler(sandbox2)


def test_a_rank_exiting_3_fails_the_run_with_the_job_state_and_its_output(
    cluster: Inventory, tmp_path: Path
) -> None:
    plan = plan_run(cluster, "resnet50", nodes=2)
    failing = 'import os, sys; r = os.environ["SLURM_PROCID"]; print("rank", r, "exits", 3 * (r == "1")); sys.exit(3 * (r == "1"))'
    plan = plan.model_copy(update={"rank_argv": ["python", "-c", failing]})
    lines: list[str] = []
    ((record, directory),) = run_plans(
        run_context(cluster, [plan], launcher=SlurmBackend(), timeout_s=300, runs_dir=tmp_path / "runs",
                    on_line=lines.append)
    )  # fmt: skip
    assert not record.valid  # `clusterctl run` exits 1 for an invalid run
    assert record.exit_code == 3
    assert sorted(load_telemetry(directory)) == ["node1", "node2"]  # the trap stopped it: its files came back
    output = (directory / "output.log").read_text()
    assert "1: rank 1 exits 3" in output
    # srun's own code is 3, or 143 when it terminated rank 0 (--kill-on-bad-exit) before rank 0 exited 0:
    # a race; the run's code and the message are rank 1's either way
    assert "FAILED (reason NonZeroExitCode, ExitCode " in output
    assert "the first to fail: task 1 on node2 (Exited with exit code 3)" in output
    assert _job_containers(cluster) == {"node1": [], "node2": []}
