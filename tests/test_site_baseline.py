"""A site's own baselines: `baseline save` from a known-good collective run or `check pairs --json`, into the
file the inventory's ``baselines`` names; `check pairs` and `run --preflight`'s default minimum then find
it before the shipped figures; what is not known-good is refused, nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clusterctl.check.pairs import check_pairs, pairs_baseline
from clusterctl.cli import main
from clusterctl.inventory import load_inventory
from clusterctl.results.baselines import baselines_for, load_baselines
from clusterctl.results.record import RESULT_FILE, read_record
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import plan_run
from clusterctl.run.preflight import INVENTORY_MINIMUM, preflight_minimum, preflight_plans, refusal
from clusterctl.workloads import get_workload
from tests.fixtures import fixture_text
from tests.helpers.baselines import INVENTORIES, NCCL_TESTS, run_dir_of, with_baselines
from tests.helpers.pairs import Cluster, pairs_inventory


def test_a_good_run_becomes_the_baseline_preflight_and_pairs_judge_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = with_baselines(tmp_path, INVENTORIES / "modern-h100.yml")
    inventory = load_inventory(path)
    assert inventory.baselines == tmp_path / "site.yml"
    assert preflight_minimum(inventory, 2, baselines_for(inventory)) == (
        None,
        "",
    )  # no NDR H100 figure shipped
    run = run_dir_of(tmp_path, inventory)
    assert main(["baseline", "save", str(run), "-i", str(path)]) == 0
    assert "saved site-h100-pair-2n" in capsys.readouterr().out
    [saved] = load_baselines(tmp_path / "site.yml")
    assert saved.match == {"nodes": 2, "gpus_per_node": 8, "fabric": "infiniband", "gpu": "H100-SXM5-80GB",
                           "hca_rate_gbps": 400}  # fmt: skip
    assert (
        saved.value == read_record(run).metrics["bus_bandwidth_at_max_size"].value
        and "run good" in saved.source
    )

    inventory = load_inventory(path)
    minimum, source = preflight_minimum(inventory, 2, baselines_for(inventory))
    assert minimum == pytest.approx(saved.floor) and saved.name in source
    assert preflight_minimum(inventory, 1, baselines_for(inventory)) == (None, "")  # 1 node: another figure
    assert pairs_baseline(inventory, baselines_for(inventory)) == saved
    # The inventory's own minimum still wins.
    strict = load_inventory(
        with_baselines(tmp_path, INVENTORIES / "modern-h100.yml", "preflight:\n  min_bus_bandwidth_gb_s: 5\n")
    )
    assert preflight_minimum(strict, 2, baselines_for(strict)) == (5, INVENTORY_MINIMUM)


def test_saving_again_replaces_the_entry_of_that_name(tmp_path: Path) -> None:
    path = with_baselines(tmp_path, INVENTORIES / "modern-h100.yml")
    run = run_dir_of(tmp_path, load_inventory(path))
    for tolerance in ("0.1", "0.2"):
        assert main(["baseline", "save", str(run), "-i", str(path), "--tolerance", tolerance]) == 0
    assert [b.tolerance for b in load_baselines(tmp_path / "site.yml")] == [0.2]


def test_a_clean_check_pairs_becomes_the_pair_baseline(tmp_path: Path) -> None:
    check = tmp_path / "pairs.json"
    check.write_text(json.dumps(check_pairs(pairs_inventory(4), Cluster(slow=None)).to_json()))
    out = tmp_path / "mine.yml"
    sandbox = INVENTORIES / "sandbox-example.yml"
    assert (
        main(["baseline", "save", str(check), "-i", str(sandbox), "-o", str(out), "--name", "cpu-pair"]) == 0
    )
    [saved] = load_baselines(out)
    assert (saved.name, saved.value, saved.match["nodes"], saved.match["fabric"]) == (
        "cpu-pair",
        2.0,
        2,
        "ethernet",
    )


def test_what_is_not_known_good_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = with_baselines(tmp_path, INVENTORIES / "modern-h100.yml")
    named = tmp_path / "named.json"
    named.write_text(json.dumps(check_pairs(pairs_inventory(4), Cluster(slow="n02")).to_json()))
    resnet = tmp_path / "resnet"
    resnet.mkdir()
    (resnet / RESULT_FILE).write_text(
        (Path("tests/fixtures/runs/20261125T170753Z_resnet50_2n") / RESULT_FILE).read_text()
    )
    cases = [
        (named, "the check named n02: not known-good"),
        (resnet, "it ran resnet50, not a collective"),
        (tmp_path / "nothing", "neither a run directory"),
        (path, "not JSON"),
    ]
    for source, why in cases:
        assert main(["baseline", "save", str(source), "-i", str(path)]) == 2
        assert why in " ".join(capsys.readouterr().err.split())
    no_field = INVENTORIES / "modern-h100.yml"
    assert main(["baseline", "save", str(named), "-i", str(no_field)]) == 2
    assert "set `baselines: site-baselines.yml` in the inventory" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "site.yml").exists()


def test_a_broken_site_file_is_an_input_error_naming_it(tmp_path: Path) -> None:
    path = with_baselines(tmp_path, INVENTORIES / "modern-h100.yml")
    (tmp_path / "site.yml").write_text("baselines:\n  - name: x\n    metric: m\n")
    assert main(["check", "pairs", "-i", str(path), "--runs-dir", str(tmp_path / "runs")]) == 2
    assert not (tmp_path / "runs").exists()


def test_the_refusal_names_where_the_minimum_came_from() -> None:
    h100 = load_inventory(INVENTORIES / "modern-h100.yml")
    [plan] = preflight_plans(h100, plan_run(h100, "resnet50", nodes=2))
    record = judge_run(h100, plan, get_workload("nccl-tests"), fixture_text(NCCL_TESTS), 0, run_id="pre",
                       started_at=datetime.now(UTC))  # fmt: skip
    reason = refusal(record, 1000.0, "the floor of baseline site-x (1.2e+03 GB/s less 15%)")
    assert reason and "is below the floor of baseline site-x" in reason
