"""Regression tests for the inventory defects of issue 15: each input once crashed, hung or was accepted.

Every case must end in exit 2 with a one-paragraph message naming the file and the fix, quickly.
"""

from __future__ import annotations

import codecs
import os
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterctl.errors import InputError, InventoryError
from clusterctl.inventory import load_inventory, validate_document
from clusterctl.yamlio import LIMITS
from tests.helpers.hostile import BASE, assert_one_paragraph_refusal, validate

# Every bound below is far above what the fixed code needs (milliseconds) and far below what the
# defect took (minutes, or forever).
BOUND_S = 10.0

ZONE_ID_ATTACK = "fe80::2%a\\n10.6.6.6 node1\\nHost *\\n ProxyCommand touch PWNED"


def _inventory(tmp_path: Path, text: str, name: str = "inv.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (f'"{ZONE_ID_ATTACK}"', "control character"),  # newline smuggled in a zone id
        ('"fe80::3%x,6.6.6.6"', "IPv6"),  # a second host for mpirun -H
        ('"fe80::1%eth0"', "IPv6"),
        ('"2001:db8::1"', "IPv6"),  # Open MPI cuts -H names at the first ':'
        ('"::ffff:10.0.0.9"', "IPv6"),
        ('"10.0.0.9 node9"', "neither an IPv4 address nor a hostname"),
        ('"gpu\\u200b02"', "invisible formatting character"),  # a look-alike of gpu02
        ('"gpu０2"', "neither an IPv4 address nor a hostname"),  # fullwidth digit  # noqa: RUF001
    ],
)
def test_address_that_could_inject_lines_or_hosts_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], address: str, expected: str
) -> None:
    text = BASE.replace("    address: 10.0.0.1\n", f"    address: {address}\n")
    outcome = validate(_inventory(tmp_path, text), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert "nodes[0].address" in outcome.err
    assert expected in " ".join(outcome.err.split())


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("    gpus:\n      count: 4\n      model: V100-SXM2-16GB\n",
         '    gpus:\n      count: 4\n      model: "V100\\nHost *"\n', "cluster.defaults.gpus.model"),
        ("  batch_size: 64\n", '  batch_size: 64\n  data_dir: "/data\\u2028x"\n', "run.data_dir"),
        ("  cap_add: [IPC_LOCK]\n", '  cap_add: [IPC_LOCK, "SYS\\tADMIN"]\n', "container.cap_add"),
        ("run:\n", 'provision:\n  mofed_url: "https://mirror/x.tgz\\r\\nevil"\nrun:\n', "provision.mofed_url"),
    ],
)  # fmt: skip
def test_every_string_field_must_be_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, field: str
) -> None:
    assert old in BASE
    outcome = validate(_inventory(tmp_path, BASE.replace(old, new)), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert field in outcome.err


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("      port: 22\n", "      port: true\n", "port"),  # was read as port 1
        ("      port: 22\n", '      port: "22"\n', "port"),
        ("  batch_size: 64\n", "  batch_size: 64.0\n", "batch_size"),
        ("  batch_size: 64\n", "  batch_size: 64\n  xla: 1\n", "xla"),
        ("      rate_gbps: 100\n", "      rate_gbps: .nan\n", "rate_gbps"),
        ("      address: 192.168.11.1/24\n", "      address: 3232238337\n", "fabric.address"),
        ("  name: testcluster\n", "  name: 12\n", "cluster.name"),
    ],
)
def test_values_are_not_coerced_and_every_message_has_a_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, field: str
) -> None:
    assert old in BASE
    outcome = validate(_inventory(tmp_path, BASE.replace(old, new)), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert field in outcome.err and "Fix: " in outcome.err


def test_a_bad_inherited_default_is_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = validate(_inventory(tmp_path, BASE.replace("      port: 22\n", "      port: 0\n")), capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert outcome.err.count("cluster.defaults.ssh.port") == 1


SELF_REFERENCE = "cluster: &c\n  name: x\n  defaults: *c\nnodes: []\n"
SELF_MERGE = "cluster: &c\n  <<: *c\n  name: x\nnodes: []\n"
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9)
)
MERGED_KEY_ERROR = (
    "d: &d {name: c1, nme: 3}\ncluster:\n  <<: *d\nnodes: [{name: n1, address: 10.0.0.1, role: primary}]\n"
)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (SELF_REFERENCE, "contains it"),  # RecursionError
        (SELF_MERGE, "contains it"),  # RecursionError through a merge key
        (LAUGHS, "alias expansion limit"),
        ("a: " + "[" * 40 + "]" * 40 + "\n", "nesting limit"),
        ("# " + "x" * (LIMITS.max_line_chars + 1) + "\n", "line length limit"),  # quadratic scanner
        (
            "nodes: [" + ",\n".join(["1"] * (LIMITS.max_collection_items + 1)) + "]\n",
            "collection length limit",
        ),
        ("nodes: [" + ",".join(["1"] * 3000) + "\n", "not valid YAML"),  # unclosed flow sequence
        (MERGED_KEY_ERROR, "cluster.nme"),  # KeyError in the line lookup of a merged key
        (
            'cluster: {name: "\\ud800"}\nnodes: [{name: n1, address: 10.0.0.1, role: primary}]\n',
            "lone surrogate",
        ),
        ("cluster: {name: x}\nimage: {profile: {a: 1}}\nnodes: []\n", "image.profile"),  # unhashable mapping
        ("provision: {mofed_tarball_path: ~nosuchuser/x.tgz}\ncluster: {name: x}\nnodes: []\n", "~user"),
        (f"provision: {{mofed_tarball_path: {'a' * 5000}}}\ncluster: {{name: x}}\nnodes: []\n", "too long"),
    ],
)
def test_hostile_documents_exit_2_naming_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    path = _inventory(tmp_path, content)
    outcome = validate(path, capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert str(path) in outcome.err
    assert expected in outcome.err


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        (codecs.BOM_UTF16_LE + BASE.encode("utf-16-le"), "UTF-16"),
        (codecs.BOM_UTF32_BE + BASE.encode("utf-32-be"), "UTF-32"),
        (BASE.replace("testcluster", "caf\xe9").encode("latin-1"), "line 2: not UTF-8"),
        (b"cluster: {name: \xed\xa0\x80}\n", "not UTF-8"),  # a lone surrogate, UTF-8 encoded
    ],
)
def test_encodings_other_than_utf8_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], encoded: bytes, expected: str
) -> None:
    path = tmp_path / "inv.yml"
    path.write_bytes(encoded)
    outcome = validate(path, capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert expected in outcome.err


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "inv.yml"
    path.write_bytes(codecs.BOM_UTF8 + BASE.encode())
    assert load_inventory(path).cluster.name == "testcluster"


def test_devices_fifos_directories_and_huge_files_are_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.yml"
    os.mkfifo(fifo)  # opening it for reading blocked forever
    huge = tmp_path / "huge.yml"
    huge.write_bytes(b"#" * (LIMITS.max_bytes + 1))
    for path, expected in [
        (Path("/dev/zero"), "not a regular file"),  # read until memory ran out
        (fifo, "not a regular file"),
        (tmp_path, "is a directory"),
        (huge, f"limit of {LIMITS.max_bytes} bytes"),
        (tmp_path / ("n" * 300), "file name too long"),
    ]:
        outcome = validate(path, capsys)
        assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
        assert expected in outcome.err


def test_thirty_thousand_mounts_are_refused_quickly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mounts = "".join(f"    - {{source: /s/{i}, target: /t/{i}}}\n" for i in range(30_000))
    path = tmp_path / "inv.yml"
    path.write_text(BASE.replace("  mounts:\n", "  mounts:\n" + mounts))
    outcome = validate(path, capsys)
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert "limit" in outcome.err


def test_the_duplicate_mount_check_is_linear() -> None:
    """30,000 mounts passed to the model directly (a library caller; no YAML limit applies) took 25 s."""
    document = YAML(typ="safe").load(BASE)
    document["container"]["mounts"] = [{"source": f"/s/{i}", "target": f"/t/{i}"} for i in range(30_000)]
    document["container"]["mounts"].append({"source": "/s/again", "target": "/t/7"})
    start = time.process_time()  # CPU time: other work on the machine must not fail a linear check
    with pytest.raises(InventoryError) as raised:
        validate_document(document, Path("inv.yml"))
    assert time.process_time() - start < BOUND_S
    assert "container.mounts[30000].target" in str(raised.value)
    assert "share the target /t/7" in str(raised.value)


def test_limits_raise_input_error_for_library_callers(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="alias expansion limit"):
        load_inventory(_inventory(tmp_path, LAUGHS))
