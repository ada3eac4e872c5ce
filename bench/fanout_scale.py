"""clusterctl's read-only fan-out at 1 to 128 nodes, beside ClusterShell (clush), pyinfra and Ansible.

One light sandbox (`sandbox up --light`: sshd, no engine), grown to each node count N in turn (1, 8, 32,
64, 128 by default). At each N, as fresh processes, timed: `clusterctl check topology` (its collection
script on every node in one SSH call each, then the judging), `clusterctl check health`, `clusterctl
provision --dry-run` (the playbook's read-only checks: provision with nothing changed), and clush,
pyinfra and Ansible each running check topology's collection script (the same shell command, `sh -c
SCRIPT`) on the same hosts, one after the other in the same run. For each: wall time, CPU seconds (user
+ system of the process and its children) and peak memory (the largest process's resident set, so
Ansible's forked workers are not summed); t(N)/t(1); and at each N clusterctl's check topology against
each peer. Nothing is asserted: bench/README.md and docs/performance.md quote one run.

Peers are installed from PyPI into their own virtual environment (never the project's .venv):
    python3 -m venv ~/.cache/clusterctl/bench-peers
    ~/.cache/clusterctl/bench-peers/bin/pip install ClusterShell pyinfra ansible-core
Each peer gets the fan-out ClusterShell uses by default (64): clush -f 64, ansible -f 64 (its own default
is 5); pyinfra connects to every host at once (gevent) and is left at that. Ansible runs with pipelining
on and no ControlMaster (each run starts cold, as the others do) and its Python interpreter given (no
discovery round trip). Every tool verifies host keys against the sandbox's known_hosts.

Usage: .venv/bin/python bench/fanout_scale.py [--nodes 1,8,32,64,128] [--peers DIR] [--json FILE]
       [--fanout 64]  (clusterctl's check topology again at the largest N with CLUSTERCTL_FANOUT=64)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
from _sandbox import print_table, write_json

from clusterctl.diagnostics.collectors import COLLECTORS, collection_script
from clusterctl.inventory import load_inventory
from clusterctl.sandbox import cluster
from clusterctl.sandbox.engine import free_subnet
from clusterctl.sandbox.scratch import remove_scratch, unique_name

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PEERS = Path("~/.cache/clusterctl/bench-peers").expanduser()
PEER_FANOUT = 64
TIMEOUT_S = 1800


@dataclass
class Cost:
    """One timed process: wall seconds, CPU seconds (with its children), peak RSS in MiB, exit code."""

    wall_s: float
    cpu_s: float
    peak_mib: float
    rc: int


# The measuring parent: a fresh, small Python that forks the tool and reads its rusage with wait4. Timed
# straight from this process, a child's peak resident set would start at this process's own (~70 MiB,
# carried over the fork and exec), hiding the tool's.
MEASURE = """import json, os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss], out)
"""


def timed(argv: Sequence[str], env: dict[str, str], cwd: Path) -> Cost:
    """Run ``argv`` to its end; its wall time, and CPU and peak memory from wait4 (its own and its
    waited-for children's). Output is discarded (the tools print per-node results we do not compare)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as figures:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", MEASURE, figures.name, *argv],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT_S,
            check=False,
        )
        wall = time.perf_counter() - start
        rc, cpu, peak_kib = json.loads(Path(figures.name).read_text())
    if rc != 0:
        tail = done.stderr.decode(errors="replace")[-400:]
        print(f"  note: {Path(argv[0]).name} {' '.join(argv[1:3])} ... exited {rc}: {tail}", file=sys.stderr)
    return Cost(wall, cpu, peak_kib / 1024, rc)


@dataclass(frozen=True)
class Bed:
    """The light sandbox as each tool addresses it."""

    state_dir: Path
    work: Path
    peers: Path

    @property
    def files(self) -> Path:
        return self.state_dir / "sandbox"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_INVENTORY"}
        return {**env, "CLUSTERCTL_STATE_DIR": str(self.state_dir), "PYTHONPATH": str(REPO), **extra}

    def addresses(self) -> list[str]:
        return [n.address for n in load_inventory(self.files / "inventory.yml").nodes]

    def clusterctl(self, *args: str, **extra: str) -> Cost:
        return timed([sys.executable, "-m", "clusterctl", *args], self.env(**extra), self.work)

    def ssh_options(self) -> list[str]:
        return [
            "-i", str(self.files / "id_ed25519"), "-o", f"UserKnownHostsFile={self.files / 'known_hosts'}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
        ]  # fmt: skip

    def clush(self, command: str) -> Cost:
        argv = [str(self.peers / "bin/clush"), "-w", ",".join(self.addresses()), "-l", "root"]
        argv += ["-f", str(PEER_FANOUT), "-o", shlex.join(self.ssh_options()), command]
        return timed(argv, self.env(), self.work)

    def pyinfra(self, command: str) -> Cost:
        inventory = self.work / "pyinfra_inventory.py"
        data = {
            "ssh_user": "root",
            "ssh_key": str(self.files / "id_ed25519"),
            "ssh_known_hosts_file": str(self.files / "known_hosts"),
            "ssh_strict_host_key_checking": "yes",
        }
        inventory.write_text(f"hosts = [(a, {data!r}) for a in {self.addresses()!r}]\n")
        argv = [str(self.peers / "bin/pyinfra"), str(inventory), "exec", "-y", "--", command]
        return timed(argv, self.env(), self.work)

    def ansible(self, command: str) -> Cost:
        inventory = self.work / "ansible_inventory.ini"
        common = shlex.join([*self.ssh_options()[2:], "-o", "ControlMaster=no"])
        inventory.write_text(
            "[all]\n" + "".join(f"{a}\n" for a in self.addresses()) + "[all:vars]\nansible_user=root\n"
            f"ansible_ssh_private_key_file={self.files / 'id_ed25519'}\n"
            f"ansible_python_interpreter=/usr/bin/python3\nansible_ssh_common_args='{common}'\n"
        )
        argv = [str(self.peers / "bin/ansible"), "all", "-i", str(inventory), "-f", str(PEER_FANOUT)]
        argv += ["-m", "shell", "-a", command]
        env = self.env(ANSIBLE_PIPELINING="1", ANSIBLE_HOME=str(self.work / "ansible-home"))
        return timed(argv, env, self.work)


@contextlib.contextmanager
def light_bed(peers: Path) -> Iterator[tuple[Bed, str]]:
    """A private state directory for a light sandbox named ``bench-scale-XXXXXX``; removed on the way out."""
    name = unique_name("bench-scale")
    with tempfile.TemporaryDirectory(prefix="clusterctl-bench-scale-") as tmp:
        state, work = Path(tmp) / "state", Path(tmp) / "work"
        work.mkdir()
        previous = os.environ.get("CLUSTERCTL_STATE_DIR")
        os.environ["CLUSTERCTL_STATE_DIR"] = str(state)
        try:
            yield Bed(state, work, peers), name
        finally:
            remove_scratch(name)
            if previous is None:
                os.environ.pop("CLUSTERCTL_STATE_DIR", None)
            else:
                os.environ["CLUSTERCTL_STATE_DIR"] = previous


def node_memory_mib(name: str) -> float:
    """The median memory (cgroup usage, MiB) of the light sandbox's node containers, from docker stats."""
    client = docker.from_env(timeout=60)
    used = []
    for container in client.containers.list(filters={"label": f"io.clusterctl.sandbox={name}"})[:8]:
        stats = container.stats(stream=False)
        used.append(stats.get("memory_stats", {}).get("usage", 0) / 2**20)
    return sorted(used)[len(used) // 2] if used else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nodes", default="1,8,32,64,128", help="Node counts, ascending (default 1,8,32,64,128)."
    )
    parser.add_argument(
        "--peers", type=Path, default=DEFAULT_PEERS, help=f"The peers' venv (default {DEFAULT_PEERS})."
    )
    parser.add_argument(
        "--fanout", type=int, default=64, help="Also time check topology at the largest N with this fan-out."
    )
    parser.add_argument("--json", type=Path, help="Also write the figures as JSON to this file.")
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]
    for tool in ("clush", "pyinfra", "ansible"):
        if not (args.peers / "bin" / tool).is_file():
            raise SystemExit(
                f"--peers {args.peers}: no bin/{tool}. Fix: install the peers (see the usage above)."
            )
    script = "sh -c " + shlex.quote(collection_script(COLLECTORS))
    figures: dict[int, dict[str, Cost]] = {}
    memory: dict[int, float] = {}
    with light_bed(args.peers) as (bed, name):
        subnet = free_subnet(docker.from_env(timeout=30))
        for n in counts:
            started = time.perf_counter()
            cluster.up(name, n, subnet, light=True)
            print(f"N={n}: light sandbox up in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            row = {
                "check topology": bed.clusterctl("check", "topology"),
                "check health": bed.clusterctl("check", "health"),
                "provision --dry-run": bed.clusterctl("provision", "--dry-run"),
                "clush": bed.clush(script),
                "pyinfra": bed.pyinfra(script),
                "ansible": bed.ansible(script),
            }
            if n == counts[-1] and args.fanout:
                row[f"check topology, fan-out {args.fanout}"] = bed.clusterctl(
                    "check", "topology", CLUSTERCTL_FANOUT=str(args.fanout)
                )
            figures[n] = row
            memory[n] = node_memory_mib(name)
            print(
                f"N={n}: " + ", ".join(f"{k} {c.wall_s:.1f} s (rc {c.rc})" for k, c in row.items()),
                file=sys.stderr,
            )
            write_json(
                args.json,
                {
                    "figures": {str(k): {t: asdict(c) for t, c in v.items()} for k, v in figures.items()},
                    "node_memory_mib": memory,
                },
            )
    tools = list(figures[counts[0]])
    base = figures[counts[0]]
    print_table(
        f"wall seconds (t(N)/t({counts[0]})); CPU seconds; peak MiB",
        ["nodes", *tools],
        [
            [
                n,
                *(
                    f"{r[t].wall_s:.1f} ({r[t].wall_s / base[t].wall_s:.1f}); {r[t].cpu_s:.1f}; {r[t].peak_mib:.0f}"
                    for t in tools
                ),
            ]
            for n, r in figures.items()
        ],
    )
    print_table(
        "clusterctl check topology's wall time against each peer's (below 1: clusterctl is faster)",
        ["nodes", "/ clush", "/ pyinfra", "/ ansible", "node container MiB (median)", "exit codes"],
        [
            [
                n,
                *(f"{r['check topology'].wall_s / r[p].wall_s:.2f}" for p in ("clush", "pyinfra", "ansible")),
                f"{memory[n]:.1f}",
                " ".join(str(c.rc) for c in r.values()),
            ]
            for n, r in figures.items()
        ],
    )
    extra = [t for t in figures[counts[-1]] if t not in tools]
    for t in extra:
        c = figures[counts[-1]][t]
        print(f"\nN={counts[-1]}, {t}: {c.wall_s:.1f} s wall, {c.cpu_s:.1f} CPU s, {c.peak_mib:.0f} MiB peak")


if __name__ == "__main__":
    main()
