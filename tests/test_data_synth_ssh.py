"""`data synth` end to end through clusterctl's own SSH and SFTP code, against a real SSH server on
loopback that runs its commands on this machine (``tests.helpers.sshserver``): written, re-run with another spec
over TFRecords, skipped when the same, and refused (exit 2, naming the node) when the node's listing
names a path outside the dataset, with nothing removed (issue 37 item 3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.data.deliver import probe_nodes, synth_on_nodes
from clusterctl.data.synth import LISTING_NAME, SynthSpec
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from tests.helpers.sshserver import Keys, SshServer, one_node_inventory

A = SynthSpec(classes=2, train_per_class=3, val_per_class=1, width=16, height=16, seed=1, tfrecord_shards=2)
B = SynthSpec(classes=3, train_per_class=3, val_per_class=1, width=16, height=16, seed=2, tfrecord_shards=8)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Inventory]:
    keys = Keys(tmp_path / "keys")
    server = SshServer(keys.new(), "127.0.0.1", sftp_root=Path("/"), exec_commands=True)
    yield one_node_inventory(tmp_path, keys, server, "127.0.0.1", "c")
    server.close()


def _jpegs(dataset: Path) -> int:
    return len(list(dataset.rglob("*.JPEG")))


def test_synth_rewrites_a_tfrecord_dataset_with_another_spec_and_skips_the_same(
    node: Inventory, tmp_path: Path
) -> None:
    dataset = tmp_path / "data"
    first = synth_on_nodes(node, list(node.nodes), str(dataset), A)
    assert [n.outcome for n in first.nodes] == ["written"] and _jpegs(dataset) == A.count()
    second = synth_on_nodes(node, list(node.nodes), str(dataset), B)
    assert [n.outcome for n in second.nodes] == ["written"] and _jpegs(dataset) == B.count()
    assert sorted(p.name for p in (dataset / "tfrecords").iterdir()) == sorted(
        [f"train-{i:05d}-of-00008" for i in range(8)] + ["validation-00000-of-00001"]
    )
    [answer] = probe_nodes(node, list(node.nodes), str(dataset)).values()
    assert answer.usable and answer.manifest == second.manifest
    again = synth_on_nodes(node, list(node.nodes), str(dataset), B)
    assert [n.outcome for n in again.nodes] == ["skipped"]


def test_a_listing_naming_a_path_outside_is_refused_naming_the_node(node: Inventory, tmp_path: Path) -> None:
    dataset = tmp_path / "data"
    synth_on_nodes(node, list(node.nodes), str(dataset), A)
    victim = tmp_path / "victim"
    victim.write_text("the user's")
    with (dataset / LISTING_NAME).open("a") as listing:
        listing.write("../victim\n")
    with pytest.raises(InputError, match=r"n1: .*names '\.\./victim', which is no path data synth writes"):
        synth_on_nodes(node, list(node.nodes), str(dataset), B)
    assert victim.read_text() == "the user's" and _jpegs(dataset) == A.count()
