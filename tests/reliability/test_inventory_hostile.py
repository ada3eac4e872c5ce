"""Hostile inventories: every one ends in exit 2 with a one-paragraph error (or loads, when valid), fast,
and reaches no host (SSH and Docker transports fail the test, see conftest.py).

Generators, 1,066 inventories per run in all (``EXAMPLES``):

- mutations of a valid inventory at a random field: wrong types, missing and unknown keys, huge values,
  shell metacharacters, line breaks, look-alike and invisible characters;
- random YAML documents and random text;
- anchors, aliases, merge keys (also self-referencing), deep nesting and long collections;
- other encodings: UTF-16/32 with and without BOM, Latin-1, random bytes spliced in.
"""

from __future__ import annotations

import codecs
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterctl.inventory.location import MAX_PROBLEMS_SHOWN
from tests.helpers.hostile import BASE, Outcome, assert_one_paragraph_refusal, reproducible, validate

# The structural generator picks one of 11 shapes and sizes it (nesting to 200, lists to 20,000 items):
# 66 draws give each shape about 6 sizes. A long list costs ~0.5 s to parse (ruamel.yaml's round-trip
# loader, pure Python, keeps the line numbers the errors cite), so 250 draws were 30 s of the suite.
EXAMPLES = {"mutation": 500, "random": 250, "structure": 66, "encoding": 250}
BOUND_S = 5.0  # per inventory; the valid ones take milliseconds
SHELL = [
    "$(touch /tmp/pwned)",
    "`id`",
    "; rm -rf /",
    "a|b",
    "a&&b",
    "'\"",
    "\\",
    "*",
    "../../etc/passwd",
    "-o ProxyCommand=x",
]
LINES = ["a\nb", "a\r\nb", "a\x00b", "a\u2028b", "a\x85b", "a\tb", "a\x1b[31mb"]
LOOK_ALIKE = ["nоde1", "node１", "gpu\u200b01", "\u202enode1", "\ufeffnode1", "10.0.0.1\u00a0", "ＩＰＣ_LOCK"]  # noqa: RUF001


def _yaml(document: Any) -> str:
    stream = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(document, stream)
    return stream.getvalue()


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a mapping entry or list item of ``node`` (containers included)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    out = []
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


BASE_DOCUMENT = YAML(typ="safe").load(BASE)
PATHS = _paths(BASE_DOCUMENT)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**30, max_value=10**60),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(SHELL + LINES + LOOK_ALIKE), st.integers(1_000, 200_000).map(lambda n: "x" * n),
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _holds(parent: Any, key: Any) -> bool:
    """Whether ``parent`` (a mapping or a list) has ``key``."""
    if isinstance(parent, dict):
        return key in parent
    return isinstance(parent, list) and isinstance(key, int) and key < len(parent)


@st.composite
def mutated_inventory(draw: st.DrawFn) -> str:
    """The base inventory with one to three fields replaced, removed, or given an unknown sibling."""
    document = YAML(typ="safe").load(BASE)
    for _ in range(draw(st.integers(1, 3))):
        *parents, key = draw(st.sampled_from(PATHS))
        parent = document
        for step in parents:
            parent = parent[step] if _holds(parent, step) else None
        if not _holds(parent, key):
            continue  # an earlier mutation removed or replaced this part
        operation = draw(st.sampled_from(["replace", "remove", "unknown"]))
        if operation == "remove":
            del parent[key]
        elif operation == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "adress", "Name", "ssh ", "node s"]))] = draw(values)
        else:
            parent[key] = draw(values)
    return _yaml(document)


random_documents = st.one_of(values.map(_yaml), st.text(max_size=2000))


@st.composite
def structural(draw: st.DrawFn) -> str:
    """Anchors, aliases and merge keys (some referring to themselves), deep nesting, long collections."""
    depth, length = draw(st.integers(1, 200)), draw(st.integers(1, 20_000))
    choices = [
        "defaults: &d {user: root, port: 22}\n" + BASE.replace("    ssh:\n      user: root\n      port: 22\n", "    ssh: *d\n"),
        "x: &n\n  name: c\n  defaults: *n\n" + BASE.replace("cluster:\n", "cluster_: \n"),
        BASE.replace("  name: testcluster\n", "  <<: &c {name: testcluster}\n  <<: *c\n"),
        BASE.replace("run:\n", "run: &r\n  <<: *r\n"),
        BASE + "extra: " + "[" * depth + "]" * depth + "\n",
        BASE + "extra:\n" + "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "v: 1\n",
        BASE.replace("  cap_add: [IPC_LOCK]\n", "  cap_add:\n" + "    - IPC_LOCK\n" * length),
        BASE.replace("  mounts:\n", "  mounts:\n" + "".join(f"    - {{source: /s/{i}, target: /t/{i}}}\n" for i in range(min(length, 3000)))),
        "a: &a [x, x, x, x, x, x, x, x]\n" + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else '*a'] * 8)}]\n" for i in range(depth % 12)) + BASE,
        BASE + "extra: [" + ",".join(["1"] * length) + "\n",
        BASE.replace("  name: testcluster\n", "  name: &n testcluster\n") + "again: *n\nmissing: *nothere\n",
    ]  # fmt: skip
    return draw(st.sampled_from(choices))


@st.composite
def encoded(draw: st.DrawFn) -> bytes:
    """The base inventory (or a mutated one) in another encoding, with a BOM, or with random bytes spliced in."""
    text = draw(st.one_of(st.just(BASE), mutated_inventory()))
    how = draw(
        st.sampled_from(
            ["utf-16", "utf-16-le", "utf-32", "utf-32-be", "latin-1", "bom8", "splice", "bom16-utf8"]
        )
    )
    if how == "bom8":
        return codecs.BOM_UTF8 + text.encode()
    if how == "bom16-utf8":
        return codecs.BOM_UTF16_LE + text.encode()
    if how == "splice":
        data = text.encode("utf-8", "surrogatepass")
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=64)) + data[at:]
    return text.replace("testcluster", "tést").encode(how, "replace")


def _judge(outcome: Outcome) -> None:
    if outcome.code == 0:
        assert outcome.out.startswith("ok: "), outcome.out
        event("loaded (valid)")
        return
    assert_one_paragraph_refusal(outcome, within_s=BOUND_S)
    assert len(outcome.err.splitlines()) <= MAX_PROBLEMS_SHOWN + 1
    event("exit 2: limit" if "limit" in outcome.err else "exit 2: validation or syntax")


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    path = tmp_path / "inventory.yml"
    path.write_bytes(data)
    _judge(validate(path, capsys))


@reproducible(EXAMPLES["mutation"])
@given(text=mutated_inventory())
def test_mutated_inventories(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    _run(tmp_path, capsys, text.encode("utf-8", "surrogatepass"))


@reproducible(EXAMPLES["random"])
@given(text=random_documents)
def test_random_yaml_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    _run(tmp_path, capsys, text.encode("utf-8", "surrogatepass"))


@reproducible(EXAMPLES["structure"])
@given(text=structural())
def test_anchors_nesting_and_long_collections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    _run(tmp_path, capsys, text.encode())


@reproducible(EXAMPLES["encoding"])
@given(data=encoded())
def test_other_encodings_and_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    _run(tmp_path, capsys, data)
