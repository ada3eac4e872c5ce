"""Every fixture is detected as the kind of its folder and parses without raising, also when cut or
re-spaced at random."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.diagnostics import PARSERS, detect_kind, parse
from clusterctl.errors import InputError
from tests.fixtures import FOLDER_KIND, all_fixtures, fixture_text

FIXTURES = all_fixtures()


def _relative(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def test_every_kind_has_a_parser_and_a_fixture() -> None:
    assert set(FOLDER_KIND.values()) == set(PARSERS)
    assert {path.parent.name for path in FIXTURES} == set(FOLDER_KIND)


@pytest.mark.parametrize("path", FIXTURES, ids=_relative)
def test_fixture_kind_detected_and_parsed(path: Path) -> None:
    text = fixture_text(_relative(path))
    kind = detect_kind(text)
    assert kind == FOLDER_KIND[path.parent.name]
    assert isinstance(parse(kind, text).model_dump(), dict)


def test_unknown_kind_is_input_error() -> None:
    with pytest.raises(InputError):
        parse("no-such-kind", "")


def test_detect_returns_none_for_unrelated_text() -> None:
    assert detect_kind("hello world\n") is None


_TEXTS = [(FOLDER_KIND[p.parent.name], fixture_text(_relative(p))) for p in FIXTURES]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(min_value=0, max_value=len(_TEXTS) - 1),
    cut=st.floats(min_value=0, max_value=1),
    tabs=st.booleans(),
    pad=st.text(alphabet=" \t", max_size=3),
)
def test_truncated_and_respaced_fixtures_never_raise(index: int, cut: float, tabs: bool, pad: str) -> None:
    kind, text = _TEXTS[index]
    text = text[: int(len(text) * cut)]
    if tabs:
        text = text.replace("    ", "\t")
    text = "\n".join(line + pad for line in text.splitlines())
    for any_kind in (kind, detect_kind(text)):
        if any_kind is not None:
            assert isinstance(parse(any_kind, text).model_dump(), dict)


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(sorted(PARSERS)), text=st.text(max_size=300))
def test_arbitrary_text_never_raises(kind: str, text: str) -> None:
    assert isinstance(parse(kind, text).model_dump(), dict)
