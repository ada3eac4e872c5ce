"""Values that validate must stay inside the syntax of the field they are rendered into (issue 26, 1-3).

A mount path lands in comma-separated ``src:dst[:flags]`` lists (``docker -v``, pyxis
``--container-mounts``, apptainer ``--bind``), an extra sbatch option in getopt's prefix matching, an
address in inet_aton and in /etc/hosts. Each case below was accepted and rendered into something else
before; the property tests check every validating value against every place it is rendered into.
"""

from __future__ import annotations

import copy
import shlex
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterctl.containers.plan import container_flags, container_spec, docker_run_kwargs
from clusterctl.errors import InventoryError
from clusterctl.inventory import validate_document
from clusterctl.inventory.types import sbatch_option_problem
from clusterctl.provision.plan import hosts_lines
from clusterctl.run.plan import plan_run
from clusterctl.run.slurm.script import plan_batch
from tests.helpers.hostile import BASE, assert_one_paragraph_refusal, reproducible, validate

BOUND_S = 10.0
SLURM = {"login": {"address": "10.0.0.9"}, "run_dir": "/shared/clusterctl", "runtime": "pyxis",
         "image": "nvcr.io#nvidia/pytorch:24.01-py3"}  # fmt: skip
EXAMPLES = 300
STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _document() -> dict[str, Any]:
    document: dict[str, Any] = YAML(typ="safe").load(BASE)
    return document


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "inv.yml"
    with path.open("w", encoding="utf-8") as fh:
        YAML(typ="safe", pure=True).dump(document, fh)
    return path


def _with_mount(source: str, target: str, read_only: bool = True) -> dict[str, Any]:
    document = _document()
    document["container"]["mounts"] = [{"source": source, "target": target, "read_only": read_only}]
    return document


# --------------------------------------------------------------------------- 1. a mount that becomes two


@pytest.mark.parametrize(
    ("source", "target", "field", "words"),
    [
        ("/srv/data:/data:ro,/", "/data", "source", "separates two mounts"),  # ',' starts a second mount
        ("/srv/data", "/data:rw,/:/host", "target", "separates two mounts"),
        ("/srv/data:/x", "/data", "source", "separates a mount's source"),  # ':' starts another field
        ("/srv/data", "/data:rw", "target", "separates a mount's source"),
        ("srv/data", "/data", "source", "named volume"),  # docker reads it as a named volume
        ("datavol", "/data", "source", "named volume"),
        ("/srv/data", "data", "target", "not an absolute path"),
    ],
)
def test_a_mount_path_that_would_split_or_be_a_volume_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, target: str, field: str, words: str
) -> None:
    outcome = validate(_write(tmp_path, _with_mount(source, target)), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert f"container.mounts[0].{field}" in outcome.err
    assert words in " ".join(outcome.err.split())


@pytest.mark.parametrize("device", ["/dev/infiniband:/dev/sda", "/dev/a,/dev/b", "dev/infiniband"])
def test_a_device_path_that_would_split_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], device: str
) -> None:
    document = _document()
    document["container"]["devices"] = [device]
    outcome = validate(_write(tmp_path, document), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert "container.devices[0]" in outcome.err


def _rendered_mount_lists(document: dict[str, Any]) -> dict[str, list[str]]:
    """Every place a mount is rendered as a ``src:dst[:ro]`` entry, split the way its reader splits it."""
    inventory = validate_document(copy.deepcopy(document), Path("inv.yml"))
    flags = container_flags(container_spec(inventory, inventory.primary, "img:1"))
    docker_v = [flags[i + 1] for i, flag in enumerate(flags) if flag == "-v"]
    lists = {"docker -v": docker_v}
    for runtime, image in (("pyxis", "nvcr.io#nvidia/pytorch:24.01-py3"), ("apptainer", "/shared/b.sif")):
        with_slurm = {**copy.deepcopy(document), "slurm": {**SLURM, "runtime": runtime, "image": image}}
        slurm_inventory = validate_document(with_slurm, Path("inv.yml"))
        plan = plan_run(slurm_inventory, "tf_cnn_benchmarks")
        words = [shlex.split(line) for line in plan_batch(slurm_inventory, plan, STARTED, "abc").script.splitlines()
                 if "--container-mounts=" in line or "--bind=" in line]  # fmt: skip
        flag = "--container-mounts=" if runtime == "pyxis" else "--bind="
        values = [w.removeprefix(flag) for line in words for w in line if w.startswith(flag)]
        lists[runtime] = [entry for value in values for entry in value.split(",")]
    return lists


mount_path = st.text(alphabet=st.sampled_from("/ab9._-,:=@+ ~"), min_size=1, max_size=16)


@reproducible(EXAMPLES)
@given(st.lists(st.tuples(mount_path, mount_path, st.booleans()), min_size=1, max_size=3))
def test_every_mount_that_validates_renders_as_exactly_one_entry(
    mounts: list[tuple[str, str, bool]],
) -> None:
    document = _document()
    document["container"]["mounts"] = [{"source": s, "target": t, "read_only": ro} for s, t, ro in mounts]
    try:
        inventory = validate_document(document, Path("inv.yml"))
    except InventoryError as refused:
        assert "Fix: " in str(refused)
        event("refused")
        return
    event("valid")
    wanted = {(s, t, ro) for s, t, ro in mounts}
    for reader, entries in _rendered_mount_lists(document).items():
        read = set()
        for entry in entries:
            source, target, *flags = entry.split(":")
            assert source.startswith("/") and flags in ([], ["ro"]), (reader, entry)
            read.add((source, target, flags == ["ro"]))
        assert wanted <= read, (reader, entries)
        assert len(entries) == len(set(entries)), reader
    api_mounts = docker_run_kwargs(container_spec(inventory, inventory.primary, "img:1"))["mounts"]
    assert {(m["Source"], m["Target"], m["ReadOnly"]) for m in api_mounts} >= wanted


# --------------------------------------------------------------------------- 2. extra_sbatch prefixes


@pytest.mark.parametrize(
    ("option", "meant"),
    [
        ("--out=/tmp/x", "--output"),
        ("--chd=/", "--chdir"),
        ("--partit=debug", "--partition"),
        ("--nodel=gpu01", "--nodelist"),
        ("--ntasks-per-n=9", "--ntasks-per-node"),
        ("--exclusive=user", "--exclusive"),
        ("--oversubscribe", "--oversubscribe"),
        ("--overs", "--oversubscribe"),
        ("--nodefile=/tmp/nodes", "--nodefile"),
        ("--gpus=8", "--gpus"),
        ("--array=1-10", "--array"),
        ("--wrap=hostname", "--wrap"),
    ],
)
def test_an_sbatch_option_that_overrides_or_contradicts_clusterctls_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, meant: str
) -> None:
    document = _document()
    document["slurm"] = {**SLURM, "extra_sbatch": ["--mail-type=END", option]}
    outcome = validate(_write(tmp_path, document), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert "slurm.extra_sbatch" in outcome.err and meant in outcome.err


@pytest.mark.parametrize(
    "option", ["--mail-type=END", "--comment=x", "--gres=nic:1", "--wait-all-nodes=1", "--export=ALL"]
)
def test_an_sbatch_option_clusterctl_does_not_set_is_kept(option: str) -> None:
    assert sbatch_option_problem(option) is None


# --------------------------------------------------------------------------- 3. addresses


@pytest.mark.parametrize(
    ("address", "reads_as"),
    [("010.0.0.2", "8.0.0.2"), ("167772163", "10.0.0.3"), ("0x0a.0.0.1", "10.0.0.1"), ("10.1", "10.0.0.1"),
     ("10.0.0.01", "10.0.0.1")],
)  # fmt: skip
def test_an_address_inet_aton_reads_as_another_ipv4_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], address: str, reads_as: str
) -> None:
    document = _document()
    document["nodes"][1]["address"] = address
    outcome = validate(_write(tmp_path, document), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert "nodes[1].address" in outcome.err and reads_as in outcome.err
    assert socket.inet_ntoa(socket.inet_aton(address)) == reads_as


def test_addresses_that_differ_only_in_case_are_one_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _document()
    document["nodes"][0]["address"] = "gpu02.example.org"
    document["nodes"][1]["address"] = "GPU02.Example.org"
    outcome = validate(_write(tmp_path, document), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert "nodes[1].address" in outcome.err and "duplicate address" in outcome.err


def test_etc_hosts_gets_address_lines_only() -> None:
    document = _document()
    for node in document["nodes"]:
        node["fabric"] = {"kind": "ethernet", "interface": "eth0"}
    document["cluster"]["defaults"]["fabric"] = {"kind": "ethernet", "interface": "eth0"}
    inventory = validate_document(copy.deepcopy(document), Path("inv.yml"))
    # node1 is reached at 10.0.0.1, node2 by the DNS name gpu02.example.org (no fabric address).
    assert hosts_lines(inventory) == ["10.0.0.1 node1"]
