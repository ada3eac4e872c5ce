"""User text is never interpreted as rich markup: values, paths, inspected output, crash messages.

Each of these printed a raw traceback (rich.errors.MarkupError) or restyled the output before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from clusterctl.cli import inventory as inventory_cli
from clusterctl.cli import main
from clusterctl.cli.check import findings_table
from clusterctl.findings import Finding
from tests.helpers.hostile import BASE

MARKUP = ["[/x]", "[/]", "[bold]", "[link=file:///etc/passwd]"]
FIXTURES = Path(__file__).parents[1] / "fixtures"


def _flat(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("value", MARKUP)
def test_a_value_in_an_error_is_printed_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    path = tmp_path / "inv.yml"
    path.write_text(BASE.replace("  name: testcluster\n", f'  name: "{value}"\n'))
    assert main(["inventory", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and _flat(f"'{value}'") in _flat(err)


def test_paths_with_markup_are_printed_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "[" / "y]"
    directory.mkdir(parents=True)
    good, bad = directory / "[bold]good.yml", directory / "bad[red].yml"
    good.write_text(BASE)
    bad.write_text(BASE.replace("  sshd_port: 50000\n", "  sshd_port: 0\n"))
    assert main(["inventory", "validate", str(good)]) == 0
    assert _flat(str(good)) in _flat(capsys.readouterr().out)
    assert main(["inventory", "validate", str(bad)]) == 2
    assert _flat(str(bad)) in _flat(capsys.readouterr().err)
    assert main(["inventory", "show", str(good)]) == 0
    assert "[bold]good.yml" in _flat(capsys.readouterr().out)


def test_inspected_output_with_markup_is_printed_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = FIXTURES / "ibstat" / "gpud-h100-12ca-roce-two-cx7-down-disabled.txt"
    lines = source.read_text().splitlines()[2:]
    hostile = [line.replace("mlx5_", "mlx5_[/x]") for line in lines]
    directory = tmp_path / "[" / "y]"
    directory.mkdir(parents=True)
    path = directory / "ibstat[bold].txt"
    path.write_text("\n".join(hostile) + "\n")
    unknown = directory / "unknown.txt"
    unknown.write_text("[/x] nothing any tool prints [bold]\n")
    code = main(["inspect", str(path), str(unknown), "--hca", "mlx5_[/x]0"])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert _flat(str(path)) in _flat(out) and "mlx5_[/x]" in _flat(out)


def test_the_crash_handler_prints_the_exception_as_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def bug(_: object) -> None:
        raise RuntimeError("bad [/x] value [bold]")

    monkeypatch.delenv("CLUSTERCTL_DEBUG", raising=False)
    monkeypatch.setattr(inventory_cli, "load", bug)
    assert main(["inventory", "validate", "x.yml"]) == 1
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: bad [/x] value [bold]" in " ".join(err.split())


def test_findings_from_node_output_render_as_written() -> None:
    console = Console(record=True, width=400)
    finding = Finding(severity="error", code="ib-port-down", message="mlx5_[/x] is [bold]down", advice="[/]")
    console.print(findings_table([finding.model_copy(update={"node": "n[/x]"})]))
    text = console.export_text()
    assert "mlx5_[/x] is [bold]down" in text and "n[/x]" in text and "[/]" in text
