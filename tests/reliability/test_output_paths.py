"""Output options never destroy or misplace files, and inputs that validate never crash (issue 26, 4 and 7).

`render dockerfile -o DIR` deleted DIR/config, DIR/payload and DIR/wheelhouse whatever they held;
`report --csv/--plot` crashed on a directory, /dev/full or a missing parent, and wrote DIR.png
elsewhere; a ~user path, a huge integer, an unknown state directory or a deleted working directory
ended in an internal error (the last two inside the crash handler). Each must exit 2 naming the
option, field or variable, with nothing written or deleted.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.image.render import CONTEXT_MANIFEST
from clusterctl.paths import STATE_DIR_ENV
from tests.helpers.hostile import BASE, assert_one_paragraph_refusal, validate

ROOT = Path(__file__).resolve().parents[2]
PAPER = str(ROOT / "inventories" / "paper-c4140.yml")


def _render(out: Path) -> int:
    return main(["render", "dockerfile", "-i", PAPER, "-o", str(out)])


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())


# --------------------------------------------------------------------------- 4. render -o


def test_render_into_a_directory_of_the_users_deletes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "project"
    for name in ("config/app.yml", "payload/data.bin", "wheelhouse/x.whl", "Dockerfile"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(f"the user's {name}")
    before = {p: p.read_text() for p in out.rglob("*") if p.is_file()}
    assert _render(out) == 2
    err = _err(capsys)
    assert "not a build context clusterctl wrote" in err and "Fix:" in err
    assert {p: p.read_text() for p in out.rglob("*") if p.is_file()} == before


def test_render_again_replaces_its_own_files_and_keeps_a_file_the_user_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ctx"
    assert _render(out) == 0
    assert (out / CONTEXT_MANIFEST).is_file() and (out / "Dockerfile").is_file()
    (out / "payload" / "resnet50_bench.py").write_text("stale")
    assert _render(out) == 0, capsys.readouterr().err
    assert (out / "payload" / "resnet50_bench.py").read_text() != "stale"
    (out / "config" / "notes.txt").write_text("mine")
    assert _render(out) == 2
    assert "config/notes.txt" in _err(capsys)
    assert (out / "config" / "notes.txt").read_text() == "mine"


def test_render_into_an_empty_directory_works(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert _render(tmp_path / "empty") == 0


@pytest.mark.parametrize("target", ["file", "devnull", "symlink"])
def test_render_to_a_file_a_device_or_a_symlink_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    if target == "file":
        out = tmp_path / "a-file"
        out.write_text("keep")
    elif target == "devnull":
        out = Path("/dev/null")
    else:
        (tmp_path / "real").mkdir()
        (tmp_path / "real" / "mine.txt").write_text("keep")
        out = tmp_path / "link"
        out.symlink_to(tmp_path / "real")
    assert _render(out) == 2
    assert "output directory" in _err(capsys)
    if target == "file":
        assert out.read_text() == "keep"
    if target == "symlink":
        assert (tmp_path / "real" / "mine.txt").read_text() == "keep"


# --------------------------------------------------------------------------- 7. report output files


@pytest.mark.parametrize(
    ("option", "name", "words"),
    [
        ("--csv", "{dir}", "is a directory"),
        ("--csv", "/dev/full", "not a regular file"),
        ("--csv", "{tmp}/missing/r.csv", "which is not a directory"),
        ("--plot", "{tmp}/x.txt", "does not end in .png"),
        ("--plot", "{dir}", "does not end in .png"),
        ("--plot", "/dev/full", "does not end in .png"),
        ("--plot", "{tmp}/scaling", "does not end in .png"),
        ("--plot", "{dir}.png", "is a directory"),
        ("--plot", "{tmp}/missing/p.png", "which is not a directory"),
    ],
)
def test_report_output_files_are_checked_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, name: str, words: str
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d.png").mkdir()
    path = name.format(tmp=tmp_path, dir=tmp_path / "d")
    assert main(["report", "--runs-dir", str(tmp_path / "runs"), option, path]) == 2
    err = _err(capsys)
    assert option in err and words in err and "Fix:" in err
    assert not (tmp_path / "d.png.png").exists() and not list((tmp_path / "d").iterdir())
    assert not (tmp_path / "scaling.png").exists()


# --------------------------------------------------------------------------- 7. inputs that validate


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  profile: paper-2020\n", "  profile: cpu\n  wheelhouse: ~nosuchuser/wheels\n", "image.wheelhouse"),
        (
            "      port: 22\n",
            "      port: 22\n      identity_file: ~nosuchuser/.ssh/id\n",
            "ssh.identity_file",
        ),
        ("      port: 22\n", "      port: 22\n      known_hosts: ~nosuchuser/kh\n", "ssh.known_hosts"),
    ],
)
def test_a_home_directory_that_does_not_exist_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, field: str
) -> None:
    path = tmp_path / "inv.yml"
    path.write_text(BASE.replace(old, new))
    outcome = validate(path, capsys)
    assert_one_paragraph_refusal(outcome, within_s=10.0)
    assert field in outcome.err and "~nosuchuser" in outcome.err


@pytest.mark.parametrize("where", ["  batch_size: 64\n", "  sshd_port: 50000\n"])
def test_an_integer_beyond_pythons_conversion_limit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    key = where.split(":")[0]
    path = tmp_path / "inv.yml"
    path.write_text(BASE.replace(where, f"{key}: {'9' * 5000}\n"))
    outcome = validate(path, capsys)
    assert_one_paragraph_refusal(outcome, within_s=10.0)
    assert "5000 digits" in outcome.err


def _clusterctl(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess (an environment the test process must not take)."""
    code = "import sys; from clusterctl.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120
    )


def _env(**changes: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.mark.parametrize(
    "env",
    [{STATE_DIR_ENV: "~nosuchuser/state"}, {STATE_DIR_ENV: None, "XDG_STATE_HOME": "~nosuchuser"}],
    ids=["state-dir", "xdg"],
)
def test_a_state_directory_that_cannot_be_determined_is_exit_2(env: dict[str, str | None]) -> None:
    # Without a file and $CLUSTERCTL_INVENTORY, `inventory validate` looks for the sandbox's inventory
    # in the state directory.
    result = _clusterctl(["inventory", "validate"], _env(CLUSTERCTL_INVENTORY=None, **env))
    assert result.returncode == 2, result.stderr
    err = " ".join(result.stderr.split())
    assert "cannot determine its state directory" in err and STATE_DIR_ENV in err
    assert "Traceback" not in result.stderr and "internal error" not in err


def test_no_home_and_no_passwd_entry_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in (STATE_DIR_ENV, "XDG_STATE_HOME", "HOME", "CLUSTERCTL_INVENTORY"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid: int) -> None:  # what the C library answers for a UID /etc/passwd lacks
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert main(["inventory", "validate"]) == 2
    err = _err(capsys)
    assert "cannot determine its state directory: $HOME is unset" in err and STATE_DIR_ENV in err


def test_the_crash_handler_survives_a_state_directory_that_cannot_be_determined(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterctl.cli import inventory as inventory_cli

    def bug(path: Path | None) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(inventory_cli, "load", bug)
    monkeypatch.setenv(STATE_DIR_ENV, "~nosuchuser/state")
    assert main(["inventory", "validate", PAPER]) == 1
    err = _err(capsys)
    assert "internal error: RuntimeError: a bug" in err and "no crash log could be written" in err
    assert "cannot determine its state directory" in err


def test_a_deleted_working_directory_is_exit_2(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    # The child deletes its own working directory, then runs the CLI there.
    code = (
        "import os, sys; os.rmdir(os.getcwd()); from clusterctl.cli import main; "
        f"sys.exit(main(['render', 'dockerfile', '-i', {PAPER!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=_env(), cwd=gone, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "current directory no longer exists" in " ".join(result.stderr.split())
