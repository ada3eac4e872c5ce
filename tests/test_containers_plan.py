"""What `up` decides per node (keep, replace, conflict) and the spec hash it decides by (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.containers.plan import (
    Action,
    DockerTop,
    Found,
    conflict_message,
    container_spec,
    decide,
    difference,
    docker_run_argv,
    docker_run_kwargs,
    spec_hash,
    ssh_material,
    user_processes,
)
from clusterctl.hosts.cluster_keys import ensure_cluster_keys
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.paths import data_dir

WANTED = "sha256:aaaa"
OTHER = "sha256:bbbb"


def _paper() -> Inventory:
    return load_inventory(data_dir("inventories") / "paper-c4140.yml")


def _hash(inv: Inventory, image_id: str = "sha256:img1", ssh: dict[str, str] | None = None) -> str:
    plan = container_spec(inv, inv.primary, "img:1")
    return spec_hash(plan, image_id, ssh or {"known_hosts": "k"})


@pytest.mark.parametrize(
    ("state", "label", "action"),
    [
        (None, None, Action.REPLACE),  # no container
        ("running", WANTED, Action.KEEP),
        ("running", OTHER, Action.CONFLICT),
        ("running", None, Action.CONFLICT),  # started by a clusterctl without the label
        ("paused", WANTED, Action.CONFLICT),  # live processes, and its sshd cannot answer
        ("restarting", OTHER, Action.CONFLICT),
        ("exited", WANTED, Action.REPLACE),
        ("exited", OTHER, Action.REPLACE),
        ("created", OTHER, Action.REPLACE),
        ("dead", None, Action.REPLACE),
    ],
)
def test_decide_keeps_only_running_matching_and_refuses_only_live_mismatches(
    state: str | None, label: str | None, action: Action
) -> None:
    assert decide(state, label, WANTED) is action


@pytest.mark.parametrize("state", [None, "running", "paused", "exited"])
@pytest.mark.parametrize("label", [WANTED, OTHER])
def test_force_recreate_replaces_everything(state: str | None, label: str) -> None:
    assert decide(state, label, WANTED, force_recreate=True) is Action.REPLACE


def test_spec_hash_is_stable_for_the_same_inventory_and_image() -> None:
    assert _hash(_paper()) == _hash(_paper())
    assert _hash(_paper()).startswith("sha256:")


def test_spec_hash_does_not_depend_on_key_order() -> None:
    plan = container_spec(_paper(), _paper().primary, "img:1")
    reordered = plan.model_copy(update={"labels": dict(reversed(list(plan.labels.items())))})
    ssh = {"a": "1", "b": "2"}
    assert spec_hash(plan, "i", ssh) == spec_hash(reordered, "i", dict(reversed(list(ssh.items()))))


@pytest.mark.parametrize(
    "change",
    [
        {"shm_size": "32g"},
        {"privileged": True},
        {"cap_add": ["SYS_NICE"]},
        {"mounts": []},
    ],
)
def test_spec_hash_changes_when_a_container_setting_changes(change: dict[str, object]) -> None:
    inv = _paper()
    changed = inv.model_copy(update={"container": inv.container.model_copy(update=change)})
    assert _hash(changed) != _hash(inv)


def test_a_nodes_cpuset_limits_its_container_and_changes_the_spec_hash() -> None:
    inv = _paper()
    pinned = inv.model_copy(update={"nodes": [inv.primary.model_copy(update={"cpuset": "2-3"})]})
    plan = container_spec(pinned, pinned.primary, "img:1")
    assert plan.cpuset == "2-3"
    assert docker_run_kwargs(plan)["cpuset_cpus"] == "2-3"
    assert "--cpuset-cpus=2-3" in docker_run_argv(plan)
    assert _hash(pinned) != _hash(inv)
    unpinned = container_spec(inv, inv.primary, "img:1")
    assert docker_run_kwargs(unpinned)["cpuset_cpus"] is None
    assert not any(a.startswith("--cpuset-cpus") for a in docker_run_argv(unpinned))


def test_spec_hash_changes_with_the_image_id_and_the_ssh_material() -> None:
    inv = _paper()
    assert _hash(inv, image_id="sha256:img2") != _hash(inv)
    assert _hash(inv, ssh={"known_hosts": "k2"}) != _hash(inv)


def test_ssh_material_is_public_only_and_per_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    inv = _paper()
    keys = ensure_cluster_keys(inv)
    primary, secondary = ssh_material(keys, inv.primary), ssh_material(keys, inv.secondaries[0])
    assert primary["host_key"].startswith("SHA256:") and primary["host_key"] != secondary["host_key"]
    assert primary["authorized_keys"].startswith("ssh-ed25519 ")
    private = [keys.client_key.read_text(), keys.host_key(inv.primary).read_text()]
    for value in primary.values():
        for secret in private:
            assert secret not in value and "PRIVATE KEY" not in value
    assert ssh_material(keys, inv.primary) == primary  # stable across calls


def test_difference_names_the_image_before_the_settings() -> None:
    assert difference("sha256:old", OTHER, "sha256:new", WANTED) == "image differs"
    assert difference("sha256:new", OTHER, "sha256:new", WANTED) == "settings differ"
    assert "older clusterctl" in difference("sha256:new", None, "sha256:new", WANTED)
    assert difference("sha256:new", WANTED, "sha256:new", WANTED) == ""


def test_user_processes_leaves_out_sshd_and_repeats() -> None:
    top: DockerTop = {
        "Titles": ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"],
        "Processes": [
            ["root", "1", "0", "0", "10:00", "?", "00:00:00", "sshd: /usr/sbin/sshd -D -e [listener]"],
            ["root", "7", "1", "0", "10:00", "?", "00:00:00", "sshd: root@notty"],
            ["root", "9", "7", "0", "10:00", "?", "00:00:00", "/usr/local/bin/mpirun -np 2 python3 x.py"],
            ["root", "12", "9", "0", "10:00", "?", "00:00:09", "python3 x.py"],
            ["root", "13", "9", "0", "10:00", "?", "00:00:09", "python3 x.py"],
        ],
    }
    assert user_processes(top) == ["mpirun", "python3"]
    assert user_processes({"Titles": ["PID"], "Processes": [["1"]]}) == []


def test_conflict_message_names_each_node_what_differs_what_runs_and_the_fix() -> None:
    conflicts = [
        Found("node1", Action.CONFLICT, WANTED, "clusterctl-c-node1", "id1", "running", "image differs", []),
        Found(
            "node2",
            Action.CONFLICT,
            WANTED,
            "clusterctl-c-node2",
            "id2",
            "running",
            "settings differ",
            ["python3"],
        ),
    ]
    message = conflict_message(conflicts)
    assert "node1, node2" in message and "nothing was changed" in message
    assert "clusterctl-c-node1 is running; image differs; only sshd running" in message
    assert "clusterctl-c-node2 is running; settings differ; running python3" in message
    assert "`clusterctl down`" in message and "`clusterctl up --force-recreate`" in message


def test_found_says_kept_replaced_or_started() -> None:
    assert (
        Found("n", Action.KEEP, WANTED, "c", "id", "running").summary() == "kept c (running, spec unchanged)"
    )
    assert Found("n", Action.REPLACE, WANTED, "c", "id", "exited").summary() == "replaced c (was exited)"
    assert Found("n", Action.REPLACE, WANTED, "c").summary() == "started c"
