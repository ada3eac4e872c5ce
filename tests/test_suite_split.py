"""scripts/test.sh's two sessions: every test runs in exactly one, and a ``beside`` test (second session)
never asks for the session sandbox, which only the first session brings up."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from _pytest.mark.expression import Expression, ExpressionMatcher

from tests.helpers.suite import beside_on_the_session_sandbox

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test.sh"


def _session_marks() -> list[str]:
    return re.findall(r'"\$\{pytest\[@\]\}" -m "([^"]+)"', SCRIPT.read_text())


def _marked(integration: bool, beside: bool) -> ExpressionMatcher:
    def matcher(name: str, /, **kwargs: str | int | bool | None) -> bool:
        return {"integration": integration, "beside": beside}.get(name, False)

    return matcher


def test_the_two_sessions_split_every_test_between_them_once() -> None:
    marks = _session_marks()
    assert len(marks) == 2, marks
    expressions = [Expression.compile(mark) for mark in marks]
    for integration in (False, True):
        for beside in (False, True):
            chosen = [e.evaluate(_marked(integration, beside)) for e in expressions]
            assert chosen.count(True) == 1, (integration, beside, marks)


@dataclass
class _Item:
    nodeid: str
    marks: set[str]
    fixturenames: list[str] = field(default_factory=list)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_a_beside_test_on_the_session_sandbox_is_named() -> None:
    items = [
        _Item("a.py::own", {"integration", "beside"}, ["sandbox1", "tmp_path"]),
        _Item("b.py::shared", {"integration"}, ["cluster"]),
        _Item("c.py::wrong", {"integration", "beside"}, ["cluster", "sandbox2"]),
    ]
    assert beside_on_the_session_sandbox(items) == ["c.py::wrong"]  # type: ignore[arg-type]
