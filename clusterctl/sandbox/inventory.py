"""The inventory of a sandbox: a CPU cluster on an Ethernet fabric that every command accepts.

Generated from the sandbox's plan (pure), validated with the same model as a hand-written inventory
before it is written, and written as plain YAML (inventories/sandbox-example.yml shows its shape).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from clusterctl.data.probe import DEFAULT_DATA
from clusterctl.inventory import Inventory, validate_document
from clusterctl.sandbox.plan import CpuPlan, SandboxPlan
from clusterctl.sandbox.slurm import GPUS_PER_NODE, PARTITION, RUN_DIR
from clusterctl.sandbox.state import SandboxFiles

WHEELHOUSE_ENV = "CLUSTERCTL_WHEELHOUSE"
# Where scripts/setup-env.sh builds the wheels the cpu image installs (PyTorch CPU, Horovod).
DEFAULT_WHEELHOUSE = "~/.cache/clusterctl/wheelhouse"
# The container's sshd port; the sandbox nodes' port 22 belongs to the node's own sshd.
CONTAINER_SSHD_PORT = 50000
# The benchmark containers see each node's /srv at /data, so `data synth` with no arguments writes
# (/srv/synth) where `run resnet50 --data` reads (/data/synth) with no edit and no restart. /srv is in
# every Debian base, so `up` finds the source; read-only: data synth writes on the node, over SSH.
DATA_MOUNT = {"source": "/srv", "target": posixpath.dirname(DEFAULT_DATA), "read_only": True}
# Small enough that a run on two CPU-only nodes ends in about a minute in CI.
RUN_DEFAULTS = {"batch_size": 8, "image_size": 64, "warmup_steps": 2, "steps": 10}


def wheelhouse() -> str:
    """The wheelhouse the cpu image installs from: ``$CLUSTERCTL_WHEELHOUSE`` or the setup script's."""
    return os.environ.get(WHEELHOUSE_ENV) or DEFAULT_WHEELHOUSE


def inventory_document(
    plan: SandboxPlan,
    cpus: CpuPlan,
    files: SandboxFiles,
    wheels: str,
    *,
    slurm: bool = False,
    light: bool = False,
) -> dict[str, Any]:
    """The inventory of ``plan`` as a YAML-ready mapping (pure); with ``slurm``, its slurm block, whose
    runtime is ``none`` on ``light`` nodes (no engine to start a container per task).

    Each node's ``cpuset`` is its node container's: the benchmark container the node's own engine
    starts gets it explicitly, because it does not always inherit it (a node that shares the
    machine's cgroup tree, in capabilities mode, makes its containers siblings of itself).
    """
    prefix = plan.subnet.prefixlen
    ssh = {
        "user": "root",
        "port": 22,
        "identity_file": str(files.private_key),
        "known_hosts": str(files.known_hosts),
    }
    document: dict[str, Any] = {
        "cluster": {
            "name": plan.name,
            "defaults": {
                "ssh": dict(ssh),
                "gpus": {"count": 0},
                "fabric": {"kind": "ethernet", "interface": "eth0"},
            },
        },
        "nodes": [
            {
                "name": node.name,
                "address": node.address,
                "role": "primary" if node.index == 1 else "secondary",
                "fabric": {"address": f"{node.address}/{prefix}"},
                "cpuset": cpuset,
            }
            for node, cpuset in zip(plan.nodes, cpus.cpusets, strict=True)
        ],
        "container": {"sshd_port": CONTAINER_SSHD_PORT, "mounts": [dict(DATA_MOUNT)]},
        "image": {"profile": "cpu", "wheelhouse": wheels},
        "run": dict(RUN_DEFAULTS),
        # The nodes reach the machine at the bridge's gateway; `up` installs the registry's CA on them.
        "delivery": {"transport": "registry", "registry": {"address": str(plan.subnet.network_address + 1)}},
    }
    if slurm:
        # node1 is the login node and the controller; the run directory is on the volume every node
        # mounts, as a real cluster's is on shared storage. The docker runtime: one container per task.
        document["slurm"] = {
            "login": {"address": plan.nodes[0].address, "ssh": dict(ssh)},
            "run_dir": RUN_DIR,
            "runtime": "none" if light else "docker",
            "partition": PARTITION,
            # The GPU-shaped nodes' GRES (clusterctl.sandbox.slurm): the job asks for them, and each rank
            # reports the one it would use; the benchmark still computes on CPUs.
            "gpus_per_node": GPUS_PER_NODE,
            # The sandbox's own flow stays mpirun over SSH; `run --launcher slurm` goes through Slurm.
            "default": False,
            # The sandbox's nodes serve nobody else: a job still pending after 5 minutes waits on a
            # node whose slurmd is gone (a restarted node container), not on other users' jobs.
            "pending_limit_s": 300,
        }
    return document


def write_inventory(
    plan: SandboxPlan, files: SandboxFiles, cpus: CpuPlan, *, slurm: bool = False, light: bool = False
) -> Inventory:
    """Validate the sandbox's inventory (with ``slurm``: its slurm block) and write it to ``files.inventory``.

    Raises:
        InventoryError: the generated document does not validate (a bug here, reported, not written).
    """
    document = inventory_document(plan, cpus, files, wheelhouse(), slurm=slurm, light=light)
    inventory = validate_document(document, files.inventory)
    files.directory.mkdir(parents=True, exist_ok=True)
    tmp = files.inventory.with_suffix(".tmp")
    with tmp.open("w") as fh:
        fh.write(
            "# Generated by `clusterctl sandbox up`; rewritten by every up. `clusterctl sandbox down` "
            "removes it.\n"
        )
        yaml = YAML(typ="rt")
        yaml.default_flow_style = False
        yaml.dump(document, fh)
    os.replace(tmp, files.inventory)
    inventory._source = Path(files.inventory)
    return inventory
