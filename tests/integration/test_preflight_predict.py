"""`run --preflight` and the predicted throughput on the real 2-node sandbox: the CPU allreduce benchmark
runs first over Horovod's transport; a minimum the fabric cannot reach refuses the model run (exit 1,
nothing else runs); one it reaches lets it run, and `report` shows measured/predicted beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from clusterctl.results.history import load_runs
from tests.helpers.sandbox import Sandbox
from tests.helpers.strictjson import report_rows, strict_loads

pytestmark = pytest.mark.integration

SHORT = ["--warmup-steps", "1", "--steps", "4"]


def _with_minimum(sandbox: Sandbox, tmp_path: Path, gb_s: float) -> str:
    path = tmp_path / f"min-{gb_s:g}.yml"
    path.write_text(sandbox.inventory_path.read_text() + f"\npreflight:\n  min_bus_bandwidth_gb_s: {gb_s}\n")
    return str(path)


def test_preflight_refuses_a_slow_fabric_and_report_predicts(
    sandbox2: Sandbox, cluster: Inventory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    runs = ["--runs-dir", str(tmp_path / "runs")]

    # A bus bandwidth no 2-core sandbox reaches: refused after the allreduce, before the model.
    code = main(
        ["run", "resnet50", "-i", _with_minimum(sandbox2, tmp_path, 1000), "--preflight", *SHORT, *runs]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1
    assert "below preflight.min_bus_bandwidth_gb_s 1000 GB/s" in err and "not started" in err
    assert [r.config.workload for r in load_runs(tmp_path / "runs").runs] == ["allreduce"]

    # A minimum it reaches: the model runs after the allreduce; a 1-node run gives the baseline.
    assert main(["run", "resnet50", "-i", str(sandbox2.inventory_path), "--nodes", "1", *SHORT, *runs]) == 0
    low = _with_minimum(sandbox2, tmp_path, 0.001)
    assert main(["run", "resnet50", "-i", low, "--preflight", "--nodes", "2", *SHORT, *runs]) == 0
    recorded = [(r.config.workload, r.nodes) for r in load_runs(tmp_path / "runs").runs]
    assert recorded == [("allreduce", 2), ("resnet50", 1), ("allreduce", 2), ("resnet50", 2)]
    capsys.readouterr()

    assert main(["report", *runs, "--json"]) == 0
    rows = {(r["config"]["workload"], r["devices"]): r for r in report_rows(capsys.readouterr().out)}
    two = rows[("resnet50", 2)]
    predicted = two["predicted"]
    assert predicted is not None, two
    assert predicted["single_device"] == rows[("resnet50", 1)]["median"]
    assert predicted["gradient_bytes"] == 25_557_032 * 4
    assert 0 < predicted["no_overlap"] <= predicted["full_overlap"]
    assert two["fabric_gb_per_node"] > 0
    # POP across the rows: on 2 nodes each rank's compute shares its node's one core with the exchange
    # (Horovod's background thread, the network stack), so it computes slower than the 1-node run.
    one = rows[("resnet50", 1)]
    assert one["computation_scalability"] == 1.0 and one["scaling_reference"]["source"] == "breakdown"
    assert two["scaling_reference"] == one["scaling_reference"]
    assert two["computation_scalability"] == pytest.approx(one["compute_ms"] / two["compute_ms"])
    assert 0 < two["computation_scalability"] < 1
    assert two["global_efficiency"] == pytest.approx(
        two["parallel_efficiency"] * two["computation_scalability"]
    )
    assert main(["explain", *runs, "--json"]) == 0
    explained = strict_loads(capsys.readouterr().out)
    (scaling,) = [d for d in explained["diagnoses"] if d["code"] == "compute-scaling"]
    assert scaling["evidence"]["computation_scalability"] == pytest.approx(
        two["computation_scalability"], abs=1e-4
    )
    assert scaling["status"] == ("found" if two["computation_scalability"] < 0.8 else "clear")
    # the verdict never reads "balanced" beside a computation scalability the rule found wanting
    assert scaling["status"] == "clear" or explained["verdict"]["code"] != "balanced", explained["verdict"]
    print(
        f"measured {two['median']:.2f} img/s; predicted {predicted['no_overlap']:.2f}-{predicted['full_overlap']:.2f} "
        f"(compute {predicted['compute_s']:.3f} s, allreduce {predicted['allreduce_s']:.3f} s per step, "
        f"busbw {predicted['bus_bandwidth_gb_s']:.3f} GB/s)"
    )
