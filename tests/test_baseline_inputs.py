"""`baseline save` on a clean install and with figures that are no measurement (issue 37 item 5): it
needs no package pyproject.toml does not declare (it imported PyYAML), and an infinite, NaN, zero or
negative figure (or tolerance) is refused with exit 2, nothing written, instead of an infinite floor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.check.pairs import check_pairs
from clusterctl.cli import main
from clusterctl.errors import InputError
from clusterctl.inventory import load_inventory
from clusterctl.results.baselines import load_baselines, site_baselines
from clusterctl.results.record import RESULT_FILE
from clusterctl.workloads.nccl_tests import LARGE_BUSBW
from tests.helpers.baselines import INVENTORIES, run_dir_of, with_baselines
from tests.helpers.pairs import Cluster, pairs_inventory

SANDBOX = INVENTORIES / "sandbox-example.yml"


def _pairs(tmp_path: Path, median: object) -> Path:
    """A clean `check pairs --json` document whose every pair's median is ``median`` (raw JSON text)."""
    document = check_pairs(pairs_inventory(4), Cluster(slow=None)).to_json()
    text = json.dumps(document)
    for group in document["groups"]:
        text = text.replace(f'"median_gb_s": {json.dumps(group["median_gb_s"])}', f'"median_gb_s": {median}')
    path = tmp_path / "pairs.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("median", ["Infinity", "1e999", "NaN", '"inf"', "0", "-2.5"])
def test_a_check_whose_figure_is_no_measurement_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], median: str
) -> None:
    out = tmp_path / "site.yml"
    assert main(["baseline", "save", str(_pairs(tmp_path, median)), "-i", str(SANDBOX), "-o", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "finite" in err and "above zero" in err and "Traceback" not in err
    assert not out.exists()


def test_a_run_whose_bus_bandwidth_is_infinite_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = with_baselines(tmp_path, INVENTORIES / "modern-h100.yml")
    run = run_dir_of(tmp_path, load_inventory(path))
    document = json.loads((run / RESULT_FILE).read_text())
    document["metrics"][LARGE_BUSBW]["value"] = 1.0
    (run / RESULT_FILE).write_text(
        json.dumps(document).replace(f'"{LARGE_BUSBW}": {{"value": 1.0', f'"{LARGE_BUSBW}": {{"value": 1e999')
    )
    assert main(["baseline", "save", str(run), "-i", str(path)]) == 2
    assert "not a finite figure above zero" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "site.yml").exists()


def test_a_tolerance_that_is_not_a_number_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check = _pairs(tmp_path, "2.0")
    out = tmp_path / "site.yml"
    assert (
        main(["baseline", "save", str(check), "-i", str(SANDBOX), "-o", str(out), "--tolerance", "nan"]) == 2
    )
    assert "--tolerance" in capsys.readouterr().err and not out.exists()


def test_an_infinite_figure_in_a_site_file_is_refused_on_load(tmp_path: Path) -> None:
    site = tmp_path / "site.yml"
    site.write_text(
        "baselines:\n  - name: x\n    metric: m\n    match: {nodes: 2}\n    value: .inf\n    unit: GB/s\n"
        "    tolerance: 0.1\n    source: this site, by hand\n"
    )
    with pytest.raises(InputError, match="value"):
        site_baselines(site)


def test_saving_needs_no_undeclared_package(tmp_path: Path) -> None:
    """As on a clean install: PyYAML (not in pyproject.toml's dependencies) cannot be imported."""
    check, out = _pairs(tmp_path, "2.0"), tmp_path / "site.yml"
    code = (
        "import sys; sys.modules['yaml'] = None\n"  # `import yaml` now raises ImportError
        "from clusterctl.cli import main\n"
        f"sys.exit(main(['baseline', 'save', {str(check)!r}, '-i', {str(SANDBOX)!r}, '-o', {str(out)!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [saved] = load_baselines(out)
    assert saved.value == 2.0 and out.read_text().startswith("# This site's own baselines")
