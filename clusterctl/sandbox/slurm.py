"""Slurm in the sandbox (``sandbox up --slurm``): munge, slurmctld on node1, configless slurmd everywhere.

Every node gets the sandbox's own munge key (made once, kept in the sandbox's files), the Epilog that
removes a job's containers, and the shared volume mounted at ``SHARED_DIR`` (the run directory the
login node and the batch host share). node1 gets ``slurm.conf`` and ``gres.conf`` (rendered from
``templates/sandbox-slurm.conf.j2`` and ``sandbox-gres.conf.j2``) and runs slurmctld; every node runs
``slurmd --conf-server node1``. Daemons already running are kept; a changed configuration restarts
slurmctld and the slurmds. ``up`` waits, bounded, until ``sinfo`` shows every node idle. A node
container that restarts starts munge, slurmctld and slurmd again from its entrypoint
(``templates/node-entrypoint.sh``), from the files written here.

Each node has the shape of a GPU node (a simulation of the shape, not of a GPU): ``SOCKETS`` sockets of
``CORES_PER_SOCKET`` core, each core one real CPU of the node's cpuset (``CPUS_PER_NODE``; task/affinity
binds tasks to them), and ``GPUS_PER_NODE`` GPUs as Slurm GRES, backed by device nodes made inside the
node (``mknod /dev/nvidiaN c 195 N``), each socket's GPUs on its core in gres.conf. Slurm then sets
``CUDA_VISIBLE_DEVICES``, ``SLURM_LOCALID`` and CPU masks for real; the payload computes on CPUs and
says which GPU it would have used. The login node (node1) gives SSH sessions the low soft
locked-memory limit of a stock login node (``LOGIN_MEMLOCK_KIB``); slurm.conf keeps it from the ranks.
"""

from __future__ import annotations

import io
import secrets
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from docker.models.containers import Container

from clusterctl.errors import EnvironmentProblem
from clusterctl.inventory import parse_cpu_list
from clusterctl.run.slurm.script import JOB_LABEL
from clusterctl.sandbox.plan import CpuPlan, NodePlan, SandboxPlan
from clusterctl.templating import template_environment

PARTITION = "sandbox"
CONTROLLER_PORT = 6817
SLURM_CONF = "/etc/slurm/slurm.conf"
EPILOG = "/etc/slurm/clusterctl-epilog.sh"
MUNGE_KEY = "/etc/munge/munge.key"
# The controller's address:port, for the node's entrypoint to start slurmd again after a restart.
CONF_SERVER_FILE = "/etc/slurm/clusterctl-conf-server"
# The shared volume every node mounts: the slurm block's run directory lives on it.
SHARED_DIR = "/shared"
RUN_DIR = f"{SHARED_DIR}/clusterctl"
# munge's own key size (mungekey's default is 1024 bytes).
MUNGE_KEY_BYTES = 1024
# From daemon start to every node idle in sinfo: a few seconds on an idle machine.
READY_DEADLINE_S = 120
POLL_INTERVAL_S = 1.0
# Node states in which a node takes jobs.
_USABLE = {"idle", "mixed", "allocated", "completing"}
GRES_CONF = "/etc/slurm/gres.conf"
# The GPU node's shape: sockets of one core each (a real CPU of the node's cpuset per core), and GPUs
# spread evenly over the sockets. 2 ranks per node at most get a core of their own (task/affinity
# binds; --overcommit steps get no binding).
SOCKETS = 2
CORES_PER_SOCKET = 1
CPUS_PER_NODE = SOCKETS * CORES_PER_SOCKET
GPUS_PER_NODE = 4
# The NVIDIA driver's character device major number: /dev/nvidiaN is (195, N).
NVIDIA_MAJOR = 195
# The login node's soft locked-memory limit for SSH sessions, in KiB: a stock login node's (64 KiB,
# pam_limits' long-standing default), so a job that propagated it would see it.
LOGIN_MEMLOCK_KIB = 64
LOGIN_LIMITS = "/etc/security/limits.d/clusterctl-login.conf"
# The GPU count, for the node's entrypoint to make the device nodes again after a restart.
GPUS_FILE = "/etc/slurm/clusterctl-gpus"

Log = Callable[[str], None]


def render_slurm_conf(plan: SandboxPlan, cpus: CpuPlan) -> str:
    """The sandbox's slurm.conf: node1 the controller, each node of the GPU node's shape (pure).

    Raises:
        ValueError: a node's cpuset does not hold ``CPUS_PER_NODE`` CPUs, one per declared core.
    """
    for node, cpuset in zip(plan.nodes, cpus.cpusets, strict=True):
        if len(parse_cpu_list(cpuset)) != CPUS_PER_NODE:
            raise ValueError(
                f"{node.name}: cpuset {cpuset} is not {CPUS_PER_NODE} CPUs, one per declared core"
            )
    return (
        template_environment()
        .get_template("sandbox-slurm.conf.j2")
        .render(
            name=plan.name,
            controller=plan.nodes[0],
            nodes=plan.nodes,
            sockets=SOCKETS,
            cores_per_socket=CORES_PER_SOCKET,
            gpus=GPUS_PER_NODE,
            partition=PARTITION,
            epilog=EPILOG,
            job_label=JOB_LABEL,
        )
    )


def _range(first: int, count: int) -> str:
    """Slurm's bracket form of ``count`` numbers from ``first``: ``[0-1]``, or ``0`` alone."""
    return str(first) if count == 1 else f"[{first}-{first + count - 1}]"


def render_gres_conf(plan: SandboxPlan) -> str:
    """The sandbox's gres.conf: on every node, each socket's ``GPUS_PER_NODE / SOCKETS`` GPUs with that
    socket's cores (pure)."""
    per_socket = GPUS_PER_NODE // SOCKETS
    sockets = [
        {
            "files": f"/dev/nvidia{_range(s * per_socket, per_socket)}",
            "cores": _range(s * CORES_PER_SOCKET, CORES_PER_SOCKET).strip("[]"),
        }
        for s in range(SOCKETS)
    ]
    return (
        template_environment()
        .get_template("sandbox-gres.conf.j2")
        .render(name=plan.name, nodes=[n.name for n in plan.nodes], sockets=sockets, major=NVIDIA_MAJOR)
    )


def render_login_limits() -> str:
    """The login node's pam_limits file: SSH sessions get a stock login node's soft memlock (pure)."""
    return (
        "# Written by `clusterctl sandbox up --slurm`: SSH sessions on the login node get the low soft\n"
        "# locked-memory limit of a stock login node; slurm.conf's PropagateResourceLimitsExcept=MEMLOCK\n"
        "# keeps it from the job's ranks.\n"
        "# pam_limits applies no wildcard line to root, the sandbox's SSH user: it is named too.\n"
        f"*    soft    memlock    {LOGIN_MEMLOCK_KIB}\n"
        f"root soft    memlock    {LOGIN_MEMLOCK_KIB}\n"
    )


def render_epilog() -> str:
    """The Epilog removing a job's labelled containers on a node (pure)."""
    return template_environment().get_template("sandbox-slurm-epilog.sh.j2").render(job_label=JOB_LABEL)


def munge_key(key_path: Path) -> bytes:
    """The sandbox's munge key at ``key_path``, made of ``MUNGE_KEY_BYTES`` random bytes if absent (0600)."""
    if not key_path.is_file():
        key_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = key_path.with_suffix(".tmp")
        tmp.write_bytes(secrets.token_bytes(MUNGE_KEY_BYTES))
        tmp.chmod(0o600)
        tmp.replace(key_path)
    return key_path.read_bytes()


def _put(container: Container, path: str, data: bytes, mode: int) -> bool:
    """Write ``data`` at ``path`` in ``container`` unless it is already there; True when written."""
    current = container.exec_run(["cat", path])
    if current.exit_code == 0 and current.output == data:
        return False
    directory, _, name = path.rpartition("/")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = mode
        tar.addfile(info, io.BytesIO(data))
    container.put_archive(directory, buf.getvalue())
    return True


def _sh(container: Container, node: NodePlan, script: str, *args: str) -> str:
    """Run ``script`` (values as positional arguments, never interpolated) in the node; its output."""
    result = container.exec_run(["sh", "-c", script, "sh", *args])
    output = result.output.decode(errors="replace")
    if result.exit_code != 0:
        raise EnvironmentProblem(
            f"sandbox node {node.name}: starting Slurm failed ({output.strip()[-400:]}). Fix: look at "
            f"`docker exec {node.container} tail /var/log/slurm/*.log`, then run `clusterctl sandbox up "
            "--slurm` again."
        )
    return output


# $1: how many /dev/nvidiaN to make (major 195, minor N), unless they exist.
MAKE_DEVICES = (
    'i=0; while [ "$i" -lt "$1" ]; do [ -e "/dev/nvidia$i" ] || mknod -m 0666 "/dev/nvidia$i" c 195 "$i"; '
    "i=$((i + 1)); done"
)
_START_MUNGE = 'chown munge:munge "$1" && chmod 0400 "$1" && { pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged; }'
# $1: whether the configuration changed (restart), $2: the controller's address and port.
_START_SLURMCTLD = (
    'if [ "$1" = 1 ]; then pkill -x slurmctld; sleep 1; fi; pgrep -x slurmctld >/dev/null || slurmctld'
)
# slurmd's own locked-memory limit raised where the container allows it (a real node's
# LimitMEMLOCK=infinity); the ranks keep it (PropagateResourceLimitsExcept=MEMLOCK).
_START_SLURMD = (
    'if [ "$1" = 1 ]; then pkill -x slurmd; sleep 1; fi; pgrep -x slurmd >/dev/null || '
    '{ ulimit -l unlimited 2>/dev/null || true; slurmd --conf-server "$2"; }'
)


def start_slurm(
    plan: SandboxPlan, nodes: Sequence[tuple[NodePlan, Container]], cpus: CpuPlan, key: bytes, log: Log
) -> list[str]:
    """Configure and start munge, slurmctld (node1) and slurmd (every node); wait until all are idle.

    Returns:
        The changes made (empty when everything was already in place).

    Raises:
        EnvironmentProblem: a daemon would not start, or a node was not idle by the deadline.
    """
    changes: list[str] = []
    conf = render_slurm_conf(plan, cpus).encode()
    epilog = render_epilog().encode()
    controller = nodes[0][1]
    conf_changed = _put(controller, SLURM_CONF, conf, 0o644)
    conf_changed = _put(controller, GRES_CONF, render_gres_conf(plan).encode(), 0o644) or conf_changed
    _put(controller, LOGIN_LIMITS, render_login_limits().encode(), 0o644)
    for node, container in nodes:
        _put(container, MUNGE_KEY, key, 0o400)
        _put(container, EPILOG, epilog, 0o755)
        _put(container, GPUS_FILE, f"{GPUS_PER_NODE}\n".encode(), 0o644)
        _sh(container, node, MAKE_DEVICES, str(GPUS_PER_NODE))
        _sh(container, node, _START_MUNGE, MUNGE_KEY)
    restart = "1" if conf_changed else "0"
    _sh(controller, nodes[0][0], _START_SLURMCTLD, restart)
    server = f"{plan.nodes[0].address}:{CONTROLLER_PORT}"
    for node, container in nodes:
        _put(container, CONF_SERVER_FILE, server.encode(), 0o644)
        _sh(container, node, _START_SLURMD, restart, server)
    if conf_changed:
        changes.append(f"configured Slurm: slurmctld on {plan.nodes[0].name}, slurmd on {len(nodes)} node(s)")
        log(changes[-1])
    wait_idle(nodes[0], [n.name for n, _ in nodes])
    return changes


def parse_sinfo_nodes(text: str) -> dict[str, str]:
    """``sinfo -h -N -o '%N %T'`` output as node to state (``idle``, ``down*``...)."""
    states = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def wait_idle(
    controller: tuple[NodePlan, Container], names: list[str], deadline_s: float = READY_DEADLINE_S
) -> None:
    """Wait until ``sinfo`` on the controller shows every node in ``names`` able to take jobs.

    Raises:
        EnvironmentProblem: not all were by the deadline; names each node's state.
    """
    node, container = controller
    end = time.monotonic() + deadline_s
    states: dict[str, str] = {}
    while time.monotonic() < end:
        result = container.exec_run(["sinfo", "-h", "-N", "-o", "%N %T"])
        states = parse_sinfo_nodes(result.output.decode(errors="replace")) if result.exit_code == 0 else {}
        if all(states.get(name) in _USABLE for name in names):
            return
        time.sleep(POLL_INTERVAL_S)
    shown = ", ".join(f"{name}: {states.get(name, 'not registered')}" for name in names)
    raise EnvironmentProblem(
        f"sandbox Slurm not ready after {deadline_s:.0f} s ({shown}). Fix: look at `docker exec {node.container} "
        "tail /var/log/slurm/slurmctld.log` and each node's /var/log/slurm/slurmd.log, then run `clusterctl "
        "sandbox up --slurm` again."
    )
