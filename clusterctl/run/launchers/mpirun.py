"""The mpirun launcher: a job as Open MPI's ``mpirun`` command. Pure.

The flags follow the whitepaper's multi-node command (its Appendix), plus what a container needs: the
cluster key and known_hosts mounted at ``CONTAINER_SSH_DIR`` (mpirun reaches the other containers over
their own sshd: ``plm_rsh_args``), strict host-key checking, and ``--tag-output`` so rank 0's lines can be
told apart. The job's variables go with ``-x NAME=VALUE``, those taken from the launching shell with
``-x NAME``, the ranks' MPI parameters with ``-mca NAME VALUE``. A job whose ranks are bound starts each
through ``BIND_WRAPPER``; mpirun itself keeps the whitepaper's ``--bind-to none``.
"""

from __future__ import annotations

import shlex

from clusterctl.image.render import CONTAINER_PAYLOAD_DIR, CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory
from clusterctl.workloads.job import Job

# What every bound rank runs first: it binds the rank to its GPU's CPUs, then execs the rank's command
# (clusterctl/payload/bind.py).
BIND_WRAPPER = ("python3", f"{CONTAINER_PAYLOAD_DIR}/bind.py", "--")


def rsh_args(inventory: Inventory) -> str:
    """The ssh options mpirun uses to start ranks in the other containers (one string, as MPI wants)."""
    return " ".join(
        [
            f"-p {inventory.container.sshd_port}",
            f"-i {CONTAINER_SSH_DIR}/id_ed25519",
            f"-o UserKnownHostsFile={CONTAINER_SSH_DIR}/known_hosts",
            "-o StrictHostKeyChecking=yes",
            "-o ConnectionAttempts=10",
        ]
    )


def mca_params(inventory: Inventory, job: Job) -> list[str]:
    """mpirun's ``-mca NAME VALUE`` triples: its own ssh launch (``plm_rsh_args``), then the job's MPI
    parameters."""
    pairs = [("plm_rsh_args", rsh_args(inventory)), *job.mpi.items()]
    return [arg for name, value in pairs for arg in ("-mca", name, value)]


def env_flags(job: Job) -> list[str]:
    """``-x NAME=VALUE`` for each of the job's variables, then ``-x NAME`` for each forwarded one."""
    flags: list[str] = []
    for name, value in job.env.items():
        flags += ["-x", f"{name}={value}"]
    for name in job.forwarded:
        flags += ["-x", name]
    return flags


class Mpirun:
    """``mpirun -np N -H addr:slots,...``: the ranks on the job's hosts, in order, started over ssh."""

    def command(self, inventory: Inventory, job: Job) -> list[str]:
        """The whole mpirun command: its flags, the binding wrapper where the job binds, the rank's argv."""
        argv = [
            "mpirun",
            "-np",
            str(job.world_size),
            "-H",
            ",".join(f"{h.address}:{h.slots}" for h in job.hosts),
            "--allow-run-as-root",
            "--tag-output",
            "--bind-to",
            "none",
            "--map-by",
            "slot",
            *mca_params(inventory, job),
            *env_flags(job),
        ]
        return [*argv, *(BIND_WRAPPER if job.bind else ()), *job.rank_argv]


def shell_command(argv: list[str]) -> str:
    """``argv`` quoted for a POSIX shell, ready to paste."""
    return shlex.join(argv)
