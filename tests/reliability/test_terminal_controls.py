"""Control characters from node output, records and file paths never reach the terminal raw (issue 26, 9).

An HCA name holding ``ESC]0;...BEL ESC[2J`` retitled the terminal and cleared the screen when
`inspect` printed it; OSC 52 would write the clipboard. C0 and C1 controls (but tab and newline) are
shown as ``\\xNN`` at every print site, as markup already is escaped. Output is captured (not a
terminal), so rich adds no escape sequences of its own: any ESC in it came from the data.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterctl.cli import main
from clusterctl.terminal import safe_text
from tests.helpers.hostile import BASE, reproducible
from tests.helpers.records import SOCKET, cpu_config
from tests.helpers.records import record as record_of
from tests.helpers.rundirs import record_run
from tests.helpers.strictjson import report_rows

FIXTURES = Path(__file__).parents[1] / "fixtures"
IBSTAT = FIXTURES / "ibstat" / "gpud-h100-12ca-roce-two-cx7-down-disabled.txt"
RETITLE_AND_CLEAR = "\x1b]0;owned\x07\x1b[2J"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
C1_CSI = "\x9b2J"
CONTROLS = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]]


def _no_raw_controls(text: str) -> None:
    raw = [c for c in text if c in CONTROLS]
    assert not raw, f"raw control characters reached the terminal: {raw!r}"


def _ibstat_with(payload: str, tmp_path: Path) -> Path:
    """The real ibstat capture with ``payload`` after every HCA name, in a file whose name holds it too."""
    lines = IBSTAT.read_text().splitlines()[2:]  # the fixture's source lines
    path = tmp_path / f"ibstat{payload}.txt"
    path.write_text("\n".join(line.replace("mlx5_", f"mlx5{payload}_") for line in lines) + "\n")
    return path


@pytest.mark.parametrize("payload", [RETITLE_AND_CLEAR, CLIPBOARD, C1_CSI, "\r\x1b[1A"])
def test_inspect_shows_control_characters_from_node_output_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], payload: str
) -> None:
    path = _ibstat_with(payload, tmp_path)
    main(["inspect", str(path)])
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    header = out.splitlines()[0]  # printed unwrapped; the findings table folds its cells
    assert f"ibstat{safe_text(payload)}.txt" in header  # shown, escaped, not dropped
    if "\r" not in payload:  # a CR ends the line for the parser: those names never reach a finding
        assert "\\x" in out.split("\n", 1)[1], "the HCA names in the findings are shown escaped"


def test_a_file_path_with_controls_is_escaped_in_errors_and_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / f"inv{RETITLE_AND_CLEAR}.yml"
    bad.write_text(BASE.replace("  sshd_port: 50000\n", "  sshd_port: 0\n"))
    assert main(["inventory", "validate", str(bad)]) == 2
    good = tmp_path / f"ok{CLIPBOARD}.yml"
    good.write_text(BASE)
    assert main(["inventory", "validate", str(good)]) == 0
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    assert "\\x1b]0;owned\\x07" in err and "\\x1b]52;" in out


def test_report_wide_shows_a_records_controls_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = record_of(
        "r", 1, 3.0, config=cpu_config(8, f"cpu{RETITLE_AND_CLEAR}"), fabric=SOCKET, unit=f"img/s{C1_CSI}"
    )
    record_run(tmp_path, record)
    for argv in (["--wide"], [], ["--json"]):
        assert main(["report", "--runs-dir", str(tmp_path), *argv]) == 0
        out, err = capsys.readouterr()
        if argv == ["--json"]:  # JSON escapes controls itself (\u001b), and keeps the value exact
            assert report_rows(out)[0]["config"]["device"] == f"cpu{RETITLE_AND_CLEAR}"
        _no_raw_controls(out + err)


@reproducible(200)
@given(st.text(alphabet=st.sampled_from([*CONTROLS, "a", "[", "]", "\t", "\n", ";"]), max_size=12))
def test_safe_text_leaves_no_control_and_keeps_everything_else(text: str) -> None:
    shown = safe_text(text)
    _no_raw_controls(shown)
    assert shown.replace("\\x", "").count("\n") == text.count("\n")
    assert [c for c in shown if c not in "\\x0123456789abcdef"] == [
        c for c in text if c not in CONTROLS and c not in "\\x0123456789abcdef"
    ]
