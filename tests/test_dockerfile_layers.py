"""The Dockerfile's layer order: what changes often (payload, configs) in the last small layers, every
version ARG just before the step that uses it, and no wheelhouse kept in the cpu image.

A registry moves only the layers a node lacks, so a payload-only rebuild must change only the last ones;
and a version ARG in scope enters every later RUN's cache key, so one declared early rebuilds (and moves)
every layer after it when it changes.
"""

from __future__ import annotations

import re

import pytest

from clusterctl.image.render import render_dockerfile
from tests.helpers.examples import EXAMPLES, example_inventory


def _instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", dockerfile)
    return [
        line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def _final_stage(instructions: list[str]) -> list[str]:
    start = max(i for i, line in enumerate(instructions) if line.startswith("FROM "))
    return instructions[start:]


@pytest.mark.parametrize("profile", sorted(EXAMPLES))
def test_payload_and_configs_are_the_last_layers(profile: str) -> None:
    final = _final_stage(_instructions(render_dockerfile(example_inventory(profile))))
    layers = [line for line in final if line.split()[0] in ("RUN", "COPY", "ADD")]
    assert layers[-1].startswith("COPY payload/")
    assert [line.split()[1] for line in layers[-3:-1]] == ["config/sshd_config", "config/ssh_config"]
    assert not any(line.startswith("RUN") for line in layers[-3:])


@pytest.mark.parametrize("profile", sorted(EXAMPLES))
def test_every_version_arg_is_declared_just_before_its_first_use(profile: str) -> None:
    instructions = _instructions(render_dockerfile(example_inventory(profile)))
    for i, line in enumerate(instructions):
        if not line.startswith("ARG "):
            continue
        name = line.split()[1].split("=")[0]
        users = [j for j in range(i + 1, len(instructions)) if f"${{{name}}}" in instructions[j]]
        if not users:
            continue  # informational (the image's history shows it), in no cache key that matters
        between = instructions[i + 1 : users[0]]
        assert not [step for step in between if step.startswith("RUN")], f"ARG {name} is declared too early"


def test_cpu_image_keeps_no_wheelhouse_layer() -> None:
    instructions = _instructions(render_dockerfile(example_inventory("cpu")))
    final = _final_stage(instructions)
    assert "COPY --from=wheels /usr/local/ /usr/local/" in final
    assert not [line for line in final if "wheelhouse" in line]
    wheels = instructions[instructions.index("FROM system AS wheels") : instructions.index("FROM system")]
    assert "COPY wheelhouse/ /tmp/wheelhouse/" in wheels
