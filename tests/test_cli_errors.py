"""The CLI's last line of defence: an unexpected exception (a bug) becomes one line and a crash log."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.cli import DEBUG_ENV, main
from clusterctl.cli import inventory as inventory_cli


def _raise_bug(_: object) -> None:
    raise RuntimeError("simulated bug in a command")


def test_unexpected_exception_prints_one_line_and_writes_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    monkeypatch.setattr(inventory_cli, "load", _raise_bug)

    code = main(["inventory", "validate", "inventories/paper-c4140.yml"])

    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert "internal error: RuntimeError: simulated bug in a command" in err
    logs = list((tmp_path / "logs").glob("crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in err.replace("\n", "")
    text = logs[0].read_text()
    assert "Traceback (most recent call last)" in text and "_raise_bug" in text
    assert "'inventory', 'validate'" in text


def test_debug_variable_lets_the_traceback_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    monkeypatch.setenv(DEBUG_ENV, "1")
    monkeypatch.setattr(inventory_cli, "load", _raise_bug)
    with pytest.raises(RuntimeError, match="simulated bug"):
        main(["inventory", "validate", "inventories/paper-c4140.yml"])
    assert not (tmp_path / "logs").exists()


def test_user_errors_still_exit_2_without_a_crash_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    assert main(["inventory", "validate", str(tmp_path / "absent.yml")]) == 2
    assert "internal error" not in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()
