"""The benchmark container's spec (pure): the whitepaper's docker run lines, the cpu sandbox, hostile values."""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path
from typing import Any

import pytest

from clusterctl.containers.plan import container_spec, docker_run_argv, docker_run_kwargs
from clusterctl.errors import InventoryError
from clusterctl.hosts.cluster_keys import container_host_names, ensure_cluster_keys, node_ssh_files
from clusterctl.hosts.container_exec import _exec_wrapper
from clusterctl.image.render import CONTAINER_SSH_DIR
from clusterctl.inventory import load_inventory, validate_document
from clusterctl.paths import data_dir

# The whitepaper's secondary line (appendix, "Run the system as"); the primary's differs only in the
# command (none: the image's default) and in the image tag's spelling.
WHITEPAPER_SECONDARY = (
    "docker run --gpus all -it --network=host -v /root/.ssh:/root/.ssh --cap-add=IPC_LOCK "
    "-v /home/dell/imagenet_tfrecords/:/data/ -v /home/dell/benchmarks/:/benchmarks "
    "-v /etc/localtime:/etc/localtime:ro --privileged "
    "horovod:latest-mlnxofed_gpudirect-tfl.14_cuda10.0 bash -c '/usr/sbin/sshd -p 50000; sleep infinity'"
)


def _paper():
    return load_inventory(data_dir("inventories") / "paper-c4140.yml")


def _whitepaper_volumes() -> set[tuple[str, str, bool]]:
    argv = shlex.split(WHITEPAPER_SECONDARY)
    volumes = set()
    for flag, value in itertools.pairwise(argv):
        if flag == "-v":
            source, target, *mode = value.split(":")
            volumes.add((source.rstrip("/"), target.rstrip("/"), mode == ["ro"]))
    return volumes


@pytest.mark.parametrize("role", ["primary", "secondary"])
def test_paper_spec_carries_every_whitepaper_setting_but_the_admin_key(role: str) -> None:
    inv = _paper()
    node = inv.primary if role == "primary" else inv.secondaries[0]
    plan = container_spec(inv, node, "horovod:latest-mlnxofed_gpudirect-tf1.14_cuda10.0")
    assert plan.gpus  # --gpus all
    assert plan.network_mode == "host"  # --network=host
    assert "IPC_LOCK" in plan.cap_add  # --cap-add=IPC_LOCK
    mounts = {(m.source, m.target, m.read_only) for m in plan.mounts}
    wanted = _whitepaper_volumes() - {("/root/.ssh", "/root/.ssh", False)}
    assert wanted <= mounts  # data, benchmarks, localtime:ro
    # The admin-key mount is replaced by the cluster's own SSH material, read-only.
    assert not any(m.source.startswith("/root/.ssh") or m.target == "/root/.ssh" for m in plan.mounts)
    assert ("/etc/clusterctl/paper-c4140/ssh", CONTAINER_SSH_DIR, True) in mounts
    # InfiniBand: the verbs devices and unlimited pinned memory, as horovod's docs add to the paper.
    assert plan.devices == ["/dev/infiniband"] and plan.memlock_unlimited
    assert plan.shm_size == "16g"
    # --privileged follows the inventory, which does not ask for it.
    assert plan.privileged is False
    assert plan.labels == {
        "io.clusterctl.cluster": "paper-c4140",
        "io.clusterctl.node": node.name,
        "io.clusterctl.role": role,
    }


def test_paper_argv_and_sdk_kwargs_agree_with_the_plan() -> None:
    inv = _paper()
    plan = container_spec(inv, inv.primary, "img:1")
    argv = docker_run_argv(plan)
    for piece in (
        "--network=host",
        "--cap-add=IPC_LOCK",
        "--device=/dev/infiniband",
        "/etc/localtime:/etc/localtime:ro",
    ):
        assert piece in argv
    assert argv[argv.index("--gpus") + 1] == "all"
    assert argv[-1] == "img:1"  # no command: the image's long-lived `sshd -D -e`, never `sshd -d`
    kwargs = docker_run_kwargs(plan)
    assert "command" not in kwargs
    assert kwargs["network_mode"] == "host"
    assert kwargs["device_requests"][0]["Count"] == -1
    assert kwargs["ulimits"][0]["Name"] == "memlock" and kwargs["ulimits"][0]["Soft"] == -1
    assert {m["Source"] for m in kwargs["mounts"]} >= {"/home/dell/imagenet_tfrecords", "/etc/localtime"}


def test_cpu_sandbox_spec_has_no_gpus_devices_or_memlock() -> None:
    inv = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    plan = container_spec(inv, inv.secondaries[0], "clusterctl/sandbox:cpu-0123456789ab")
    assert plan.name == "clusterctl-sandbox-node2"
    assert not plan.gpus and plan.devices == [] and not plan.memlock_unlimited and not plan.privileged
    assert "--gpus" not in docker_run_argv(plan)
    assert docker_run_kwargs(plan)["device_requests"] == []


def test_privileged_and_extra_caps_only_when_asked() -> None:
    inv = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    inv.container.privileged = True
    inv.container.cap_add = ["SYS_NICE", "IPC_LOCK"]
    plan = container_spec(inv, inv.primary, "x:1")
    assert plan.privileged and "--privileged" in docker_run_argv(plan)
    assert plan.cap_add == ["IPC_LOCK", "SYS_NICE"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("cluster", "name"), "x; rm -rf /"),
        (("nodes", 0, "name"), "node1 --privileged"),
        (("container", "image"), "img:1 --privileged"),
        (("container", "shm_size"), "1g --privileged"),
    ],
)
def test_hostile_values_cannot_reach_a_container(path: tuple, value: str) -> None:
    doc = {
        "cluster": {"name": "c"},
        "nodes": [{"name": "node1", "address": "10.0.0.1", "role": "primary"}],
        "container": {},
    }
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InventoryError):
        validate_document(doc, Path("hostile.yml"))


def test_cluster_keys_know_every_name_of_every_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    inv = _paper()
    keys = ensure_cluster_keys(inv)
    lines = keys.known_hosts.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[192.168.11.1]:50000,[c4140-1]:50000,[10.10.0.11]:50000 ssh-ed25519 ")
    assert container_host_names(inv.secondaries[0]) == ["192.168.11.2", "c4140-2", "10.10.0.12"]
    assert (keys.client_key.stat().st_mode & 0o777) == 0o600
    ensure_cluster_keys(inv)  # idempotent: known_hosts is appended to only when something is new
    assert keys.known_hosts.read_text().splitlines() == lines
    files = node_ssh_files(keys, inv.primary)
    assert set(files) == {"authorized_keys", "ssh_host_ed25519_key", "id_ed25519", "known_hosts"}
    assert files["ssh_host_ed25519_key"] != node_ssh_files(keys, inv.secondaries[0])["ssh_host_ed25519_key"]


def test_exec_wrapper_runs_the_argv_unchanged_in_its_own_session() -> None:
    argv = ["python", "-c", "print('a b; c')"]
    wrapped = _exec_wrapper(argv, "/tmp/p.pid", 10)
    assert wrapped[:2] == ["setsid", "--wait"]
    assert wrapped[-3:] == argv  # passed as arguments, never pasted into the script
    assert wrapped[wrapped.index("/tmp/p.pid") + 1] == "40"  # the in-container backstop
