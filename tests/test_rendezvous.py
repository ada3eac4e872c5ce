"""Each DDP run's own rendezvous port (issue: a fixed MASTER_PORT 29500 made two runs on the same nodes,
or a port in use, collide): derived from the run id, set in the plan, checked free by a real bash on a
real socket, and moved up in the Slurm batch script while in use."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from clusterctl.errors import InputError
from clusterctl.inventory import load_inventory
from clusterctl.run.launchers.mpirun import Mpirun
from clusterctl.run.plan import (
    RENDEZVOUS_PORTS,
    RENDEZVOUS_TRIES,
    plan_run,
    rendezvous_ports,
    with_rendezvous_port,
)
from clusterctl.run.rendezvous import ALL_IN_USE, probe_argv

SANDBOX = Path(__file__).resolve().parents[1] / "inventories" / "sandbox-example.yml"


def test_each_run_id_gets_its_own_ports_in_the_range_and_the_same_id_the_same() -> None:
    a = rendezvous_ports("20261126T001500Z_resnet50_2n")
    b = rendezvous_ports("20261126T001501Z_resnet50_2n")
    assert a == rendezvous_ports("20261126T001500Z_resnet50_2n")
    assert a != b and len(set(a)) == RENDEZVOUS_TRIES
    assert all(port in RENDEZVOUS_PORTS for port in a + b)
    assert RENDEZVOUS_PORTS.stop <= 32768  # below the kernel's ephemeral ports
    # spread over the range, not stuck at torch's default
    firsts = {rendezvous_ports(f"run{i}")[0] for i in range(200)}
    assert len(firsts) > 150


def test_the_port_reaches_the_env_and_mpirun_and_horovod_is_left_alone() -> None:
    inventory = load_inventory(SANDBOX)
    plan = with_rendezvous_port(plan_run(inventory, "resnet50", nodes=2, framework="ddp"), 30123)
    assert plan.env["MASTER_PORT"] == "30123"
    argv = Mpirun().command(inventory, plan)
    assert "MASTER_PORT=30123" in argv and "MASTER_PORT=29500" not in argv
    horovod = plan_run(inventory, "resnet50", nodes=2, framework="horovod")
    assert with_rendezvous_port(horovod, 30123) == horovod
    with pytest.raises(InputError, match="outside 29500-32767"):
        with_rendezvous_port(plan, 40000)


def _listening() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def _probe(ports: list[int]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(probe_argv("127.0.0.1", ports), capture_output=True, text=True, timeout=20)


def test_the_probe_skips_a_port_in_use_and_says_when_all_are() -> None:
    with _listening() as busy, _listening() as also_busy:
        taken = busy.getsockname()[1]
        free = _listening()
        free_port = free.getsockname()[1]
        free.close()  # nothing listens there now
        done = _probe([taken, free_port])
        assert (done.returncode, done.stdout.strip()) == (0, str(free_port)), done
        done = _probe([taken, also_busy.getsockname()[1]])
        assert done.returncode == ALL_IN_USE and done.stdout == "", done


def test_the_batch_script_moves_up_while_the_port_is_in_use(tmp_path: Path) -> None:
    from clusterctl.run.slurm.script import plan_batch
    from tests.helpers.slurm import STARTED, slurm_inventory

    inventory = slurm_inventory()
    plan = with_rendezvous_port(plan_run(inventory, "resnet50", framework="ddp"), 30200)
    script = plan_batch(inventory, plan, STARTED, "t").script
    assert "export MASTER_PORT='30200'" in script
    start = script.index("# Rank 0's port:")
    loop = script[script.index("for _ in", start) : script.index("echo", start)]
    assert f"seq 1 {RENDEZVOUS_TRIES}" in loop
    # the loop itself, run by bash against a real listener: the taken port is left for the next
    with _listening() as busy:
        port = busy.getsockname()[1]
        shell = f"MASTER_ADDR=127.0.0.1; MASTER_PORT={port}\n{loop}echo $MASTER_PORT"
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0 and int(done.stdout) > port, done
