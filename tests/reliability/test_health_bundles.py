"""Hostile health bundles (issue 37): `check health --from` either refuses the bundle (exit 2, one
paragraph) or judges it, and what it could not see is never OK.

Hypothesis draws, for one node of a healthy two-node bundle of real outputs, what to do to each
section (keep it, drop it from meta.json, drop its file, mark it failed, replace its text with lines
built from the pieces attackers use: Xid lines with odd prefixes, NUL and escape bytes, U+FFFE,
thousands of digits, saturated or vanished counters) and to its meta.json (nested past the parser's
depth, another node's name), and its collective's figures (NaN, infinities, 0, negative). The other
node stays healthy and must stay ``ok``; the command runs
in-process with ``CLUSTERCTL_DEBUG`` set, so a bug raises instead of printing "internal error".
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from xml.etree import ElementTree

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterctl.check.health_collective import save_collectives
from clusterctl.cli import DEBUG_ENV, main
from clusterctl.diagnostics.active import NodeCollective
from clusterctl.diagnostics.bundle import META, NodeBundle, write_bundle
from clusterctl.diagnostics.health import health_collectors, judge_health
from clusterctl.diagnostics.junit import Case, junit_xml
from clusterctl.diagnostics.parsers.kernel_log import parse_kernel_log
from clusterctl.inventory import load_inventory
from tests.helpers.health import HEALTHY, INVENTORY, health_bundle
from tests.helpers.hostile import reproducible
from tests.helpers.strictjson import strict_loads

INPUTS = int(os.environ.get("CLUSTERCTL_FUZZ_INPUTS", "100"))
KEYS = [c.key for c in health_collectors()]
# What a section can suffer; the first three take away what a check needs (the node must not be ok).
DEFECTS = ("drop-section", "drop-file", "failed")
ACTIONS = ("keep", "keep", "keep", *DEFECTS, "hostile")

# Pieces of hostile lines: prefixes real tools print and ones they do not, bytes that break a line.
PREFIXES = ["", "[ 12.5] ", "[ 12.5][  T77] ", "kern  :err   : ", "<3>", "{12.5} ", "\x00", "\x1b[31m",
            "Feb 23 16:24:18 h kernel: ", "\ufffe", "[" * 30, "NVRM: "]  # fmt: skip
BODIES = ["Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.", "Xid (PCI:0000:91:00): 7\x009, x",
          "SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48", "Xid (PCI:0000:91:00): " + "9" * 5000,
          "Xid (PCI:0000:91:00): 45, preemptive", "Xid (PCI:zz): 79,", "Xid (PCI:0000:91:00):"]  # fmt: skip
COUNTER = "/sys/class/infiniband/mlx5_{dev}/ports/1/counters/{name}:{value}"
NAMES = ["symbol_error", "link_downed", "port_xmit_data", "port_rcv_errors", "local_link_integrity_errors"]
VALUES = ["0", "1", "255", "65535", "4294967295", "9" * 25, "-1", "nan", "\x00"]

xid_lines = st.builds(lambda p, b: p + b, st.sampled_from(PREFIXES), st.sampled_from(BODIES))
counter_lines = st.builds(
    lambda d, n, v: COUNTER.format(dev=d, name=n, value=v),
    st.integers(0, 2),
    st.sampled_from(NAMES),
    st.sampled_from(VALUES),
)
hostile_text = st.lists(st.one_of(xid_lines, counter_lines, st.text(max_size=40)), max_size=12).map("\n".join)
sections = st.fixed_dictionaries({key: st.sampled_from(ACTIONS) for key in KEYS})
metas = st.sampled_from(["keep"] * 6 + ["nested", "other-node", "not-json"])
# hgx-02's collective figures (None: no collectives.json, a quick-level bundle); hgx-01's is 150 GB/s.
SAMPLES = [150.0, 0.0, float("nan"), float("inf"), float("-inf"), -1.0, 1e308]
collectives = st.one_of(st.none(), st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=3))


def _mutated(actions: dict[str, str], texts: list[str]) -> tuple[NodeBundle, bool]:
    """hgx-02's bundle with ``actions`` applied; whether a section it needs was taken away."""
    bundle = health_bundle("hgx-02", HEALTHY)
    defect = False
    for key, action in actions.items():
        if action == "drop-section":
            del bundle.meta.sections[key]
            bundle.outputs.pop(key, None)
        elif action == "drop-file":
            bundle.outputs.pop(key, None)
        elif action == "failed":
            bundle.meta.sections[key] = bundle.meta.sections[key].model_copy(
                update={"status": "failed", "exit_status": 1}
            )
        elif action == "hostile" and texts:
            bundle.outputs[key] = texts.pop()
        defect |= action in DEFECTS
    return bundle, defect


@given(
    actions=sections, texts=st.lists(hostile_text, min_size=6, max_size=6), meta=metas, samples=collectives
)
@reproducible(INPUTS)
def test_a_hostile_health_bundle_is_refused_or_judged_and_what_is_missing_is_never_ok(
    actions: dict[str, str],
    texts: list[str],
    meta: str,
    samples: list[float] | None,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(DEBUG_ENV, "1")
    directory = tmp_path_factory.mktemp("bundle")
    bundle, defect = _mutated(actions, list(texts))
    write_bundle(directory, {"hgx-01": health_bundle("hgx-01", HEALTHY), "hgx-02": bundle})
    if samples is not None:
        save_collectives(directory, [NodeCollective("hgx-01", (150.0,), (), ("r1",)),
                                     NodeCollective("hgx-02", tuple(samples), (), ("r2",))])  # fmt: skip
    meta_file = directory / "hgx-02" / META
    if meta == "nested":
        meta_file.write_text("[" * 50_000 + "]" * 50_000)
    elif meta == "other-node":
        meta_file.write_text(meta_file.read_text().replace('"hgx-02"', '"hgx-01"'))
    elif meta == "not-json":
        meta_file.write_text('{"node": "hgx-02", "collected_at": 1e999999}')
    junit = directory / "junit.xml"
    capsys.readouterr()
    code = main(
        ["check", "health", "-i", str(INVENTORY), "--from", str(directory), "--json", "--junit", str(junit)]
    )
    out, err = capsys.readouterr()
    if meta != "keep":
        assert code == 2 and err.startswith("error: ") and "Fix" in err and "\n\n" not in err.strip(), err
        return
    assert code in (0, 1), err
    report = strict_loads(out)
    assert report["nodes"]["hgx-01"]["verdict"] == "ok"
    verdict = report["nodes"]["hgx-02"]["verdict"]
    if defect or (samples is not None and not all(math.isfinite(x) for x in samples)):
        assert verdict in ("unknown", "fail"), (actions, samples, report["nodes"]["hgx-02"])
    assert verdict != "ok" or code == 0
    ElementTree.fromstring(junit.read_bytes())  # well-formed whatever the nodes printed
    assert "\x1b" not in out + err


@given(text=st.lists(st.one_of(xid_lines, st.text(max_size=30)), max_size=20).map("\n".join))
@reproducible(INPUTS)
def test_every_line_naming_an_xid_is_read_or_counted_unreadable(text: str) -> None:
    log = parse_kernel_log(text)
    naming = [line for line in text.splitlines() if "Xid (PCI" in line]
    assert len(log.events) + len(log.unparsed_lines) >= len(naming)
    for event in log.events:
        assert 0 <= event.code < 100_000 and "\x00" not in event.detail


def test_each_defect_alone_makes_the_node_unknown(tmp_path: Path) -> None:
    """The defects the property relies on really take away what a check needs: each alone, on any
    section, leaves hgx-02 unknown with that section named, and hgx-01 ok."""
    inventory = load_inventory(INVENTORY)
    for key in KEYS:
        for action in DEFECTS:
            bundle, defect = _mutated({key: action}, [])
            report = judge_health(
                {"hgx-01": health_bundle("hgx-01", HEALTHY), "hgx-02": bundle}, inventory, tmp_path, 5
            )
            health = report.nodes["hgx-02"]
            assert defect and health.verdict == "unknown" and key in health.unknown, (
                key,
                action,
                health.unknown,
            )
            assert report.nodes["hgx-01"].verdict == "ok"


@given(texts=st.lists(st.text(), min_size=4, max_size=4))
@reproducible(INPUTS)
def test_junit_is_well_formed_for_any_text(texts: list[str]) -> None:
    name, failure, details, suite = texts
    cases = [Case(name, "clusterctl.check-health", failure, details), Case(name, "c", None, details)]
    root = ElementTree.fromstring(junit_xml(suite, cases).encode("utf-8"))
    assert len(root.findall(".//testcase")) == 2
