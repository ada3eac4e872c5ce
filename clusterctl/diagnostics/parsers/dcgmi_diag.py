"""`dcgmi diag -r 1|2|3`: DCGM's diagnostic table, one row per test.

The table (DCGM 2.x to 4.x) frames a name column and a result column between ``|``; category rows
(``|-----  Deployment  ---...``) head each group; DCGM 4 adds one ``GPUn: Pass`` row per GPU under a
test, and a failing test is followed by ``Warning`` (or ``Info``) rows whose text wraps over rows with an
empty name::

    |-----  Deployment  --------+------------------------------------------------|
    | Denylist                  | Pass                                           |
    +-----  Integration  -------+------------------------------------------------+
    | PCIe                      | Fail - All                                     |
    | Warning                   | GPU 0GPU 0's NvLink link 0 is currently down   |
    |                           | Run a field diagnostic on the GPU., GPU 0GPU   |

Shape::

    DcgmDiag(version="3.3.1", tests=[DcgmTest(category="Deployment", name="Denylist", result="Pass",
             detail="")])

The Metadata rows give ``version``; a row cut off by the page it was copied from (no right border)
still counts. What is neither a row nor a frame line goes to ``unparsed_lines``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed

_CATEGORY = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][\w ]*?)\s+-+\+")
_ROW = re.compile(r"^\|\s?(?P<name>[^|]*?)\s*\|\s?(?P<value>.*?)\s*\|?\s*$")
_FRAME = re.compile(r"^[+|][-=+|]*$|^Successfully ran diagnostic|^Executing in Pod|^\.\.\.$")
_RESULT = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)\b", re.I)
_NOTE_ROWS = ("Warning", "Info", "Error")
_GPU_ROW = re.compile(r"^GPU\d+:\s*(?P<result>.*)$")


class DcgmTest(BaseModel):
    """One test's row: its category, name, result word and the warning text under it."""

    category: str = Field(description='The group it is listed under, e.g. "Deployment" or "Hardware".')
    name: str = Field(description='The test, e.g. "PCIe", "Denylist" or DCGM 4\'s "memory".')
    result: str = Field(description='The result as printed, e.g. "Pass", "Fail - All", "Skip".')
    detail: str = Field("", description="The Warning/Info rows under it, joined.")

    @property
    def failed(self) -> bool:
        """A result of Fail (on all GPUs or some)."""
        return self.result.lower().startswith("fail")

    @property
    def skipped(self) -> bool:
        """A result of Skip or Not Run: the test measured nothing."""
        return self.result.lower().startswith(("skip", "not run"))


class DcgmDiag(Parsed):
    """The tests of a `dcgmi diag` table and the DCGM version its Metadata rows name."""

    version: str | None = None
    tests: list[DcgmTest] = Field(default_factory=list)


def parse_dcgmi_diag(text: str) -> DcgmDiag:
    """Parse `dcgmi diag` output (any run level). Never raises."""
    diag = DcgmDiag()
    category = ""
    note = False  # inside the Warning/Info rows of the last test
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if match := _CATEGORY.match(line):
            category, note = match["name"].strip(), False
            continue
        if _FRAME.match(line.strip()):
            continue
        row = _ROW.match(line)
        if row is None:
            diag.unparsed_lines.append(raw)
            continue
        name, value = row["name"].strip(), row["value"].strip()
        if name == "Diagnostic" and value == "Result":
            continue
        if category == "Metadata":
            if name == "DCGM Version":
                diag.version = value
            continue
        if name in _NOTE_ROWS and diag.tests:
            diag.tests[-1].detail = " ".join(filter(None, (diag.tests[-1].detail, value)))
            note = True
        elif not name and diag.tests and note:  # a Warning row wrapped at the column's edge, mid-word
            diag.tests[-1].detail += value
        elif not name and diag.tests and (gpu := _GPU_ROW.match(value)):
            if gpu["result"].lower().startswith("fail"):  # DCGM 4: which GPU failed the test above
                diag.tests[-1].detail = " ".join(filter(None, (diag.tests[-1].detail, value)))
        elif name and _RESULT.match(value):
            diag.tests.append(DcgmTest(category=category, name=name, result=value))
            note = False
        else:
            diag.unparsed_lines.append(raw)
    return diag
