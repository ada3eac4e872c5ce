"""Playbooks: ordered host-setup steps kept as YAML data, and the pure half that renders them.

A step has a name, a condition over the inventory (``when``), a read-only probe (``check``), the
change (``apply``), an optional ``verify`` (default: the probe again), files to upload (each with
its own optional ``when``) and a timeout.
Commands are Jinja2 templates whose every ``{{ value }}`` is passed through ``shlex.quote`` by the
environment's ``finalize`` hook: a value from the inventory cannot reach a shell unquoted, whatever
the playbook author writes. ``{{ items | qjoin }}`` quotes each list item and joins them with spaces.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import jinja2
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, Node, format_loc
from clusterctl.yamlio import line_of, load_yaml


class Quoted(str):
    """Shell text already quoted item by item; ``finalize`` lets it through unchanged."""


def _finalize(value: Any) -> str:
    if isinstance(value, Quoted):
        return str(value)
    return shlex.quote(str(value))


def _qjoin(values: Iterable[Any]) -> Quoted:
    return Quoted(" ".join(shlex.quote(str(v)) for v in values))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, finalize=_finalize, autoescape=False)
    env.filters["qjoin"] = _qjoin
    return env


_plain = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)


def _check_expression(value: str) -> str:
    """A ``when`` expression, unchanged; ValueError when Jinja2 cannot compile it."""
    try:
        _environment().compile_expression(value)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"'when' is not a valid expression ({exc.message})") from None
    return value


Expression = Annotated[str, AfterValidator(_check_expression)]


class Upload(BaseModel):
    """A file the executor writes over SFTP before ``apply`` runs (never through a command line)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="Name of a file the controller provides (see ``step_files``).")
    dest: str = Field(description="Path on the node (a template).")
    mode: int = Field(0o600, description="File mode, set before any byte is written.")
    when: Expression = Field(
        "true", description="Jinja2 expression over node, inv, cluster; false: not uploaded."
    )


class Step(BaseModel):
    """One idempotent host-setup step."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str
    when: Expression = Field(
        "true", description="Jinja2 expression over node, inv, cluster; false skips the step."
    )
    when_reason: str = Field("", description="Why the step is skipped when ``when`` is false.")
    depends_on: list[str] = Field(
        default_factory=list, description="Steps that must not have failed on the host."
    )
    check: str = Field(description="Read-only probe; exit 0 means the host is already as wanted.")
    apply: str = Field(description="The change, run only where the probe failed.")
    verify: str | None = Field(None, description="Probe after apply; default: ``check`` again.")
    upload: list[Upload] = Field(default_factory=list)
    timeout_s: float = Field(300, gt=0, le=7200)


class Playbook(BaseModel):
    """An ordered list of steps."""

    model_config = ConfigDict(extra="forbid")

    name: str
    steps: list[Step] = Field(min_length=1)


def load_playbook(path: Path) -> Playbook:
    """Read and validate a playbook file.

    Raises:
        InputError: naming the file, line and field of each problem; or an unknown ``depends_on``.
    """
    document = load_yaml(path)
    try:
        playbook = Playbook.model_validate(document)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            line = line_of(document, err["loc"])
            where = f"{path}, line {line}" if line else str(path)
            lines.append(f"{where}, field {format_loc(err['loc'])}: {err['msg']}.")
        raise InputError("\n".join(lines)) from None
    names = [s.name for s in playbook.steps]
    for i, step in enumerate(playbook.steps):
        for dep in step.depends_on:
            if dep not in names[:i]:
                raise InputError(
                    f"{path}, step {step.name}: depends_on {dep!r} is not an earlier step. Fix: list only "
                    f"steps above it ({', '.join(names[:i]) or 'none'})."
                )
    return playbook


@dataclass(frozen=True)
class RenderedStep:
    """A step's commands for one node, quoted and ready for the shell; or the reason it is skipped.

    ``uploads`` holds (source, dest, mode) for each upload whose ``when`` holds on the node.
    """

    step: Step
    node: str
    skip_reason: str | None
    check: str = ""
    apply: str = ""
    verify: str = ""
    uploads: tuple[tuple[str, str, int], ...] = ()


def render_step(step: Step, node: Node, context: dict[str, Any]) -> RenderedStep:
    """Evaluate ``when`` and render the step's commands for ``node`` (pure).

    ``context`` holds ``inv`` and ``cluster`` (see ``clusterctl.provision.plan.step_context``).
    """
    env = _environment()
    values = {**context, "node": node}
    if not env.compile_expression(step.when)(**values):
        reason = step.when_reason or f"condition not met: {step.when}"
        return RenderedStep(step, node.name, skip_reason=reason)

    def render(text: str) -> str:
        return env.from_string(text).render(**values).strip()

    return RenderedStep(
        step,
        node.name,
        skip_reason=None,
        check=render(step.check),
        apply=render(step.apply),
        verify=render(step.verify or step.check),
        # Upload paths go to SFTP, not to a shell: rendered without shell quoting.
        uploads=tuple(
            (u.source, _plain.from_string(u.dest).render(**values), u.mode)
            for u in step.upload
            if env.compile_expression(u.when)(**values)
        ),
    )


def select_steps(playbook: Playbook, wanted: list[str]) -> list[Step]:
    """The steps named in ``wanted`` (all when empty), in playbook order.

    Raises:
        InputError: a name that is not a step of the playbook.
    """
    names = [s.name for s in playbook.steps]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise InputError(
            f"--step {', '.join(unknown)}: no such step in playbook {playbook.name} (steps: {', '.join(names)})."
        )
    return [s for s in playbook.steps if not wanted or s.name in wanted]


def nodes_in_limit(inventory: Inventory, limit: str | None) -> list[Node]:
    """The nodes named in ``--limit`` (comma-separated), or all.

    Raises:
        InputError: a name not in the inventory, or no name at all; the message names ``--limit``.
    """
    if limit is None:
        return list(inventory.nodes)
    names = [n for n in re.split(r"[,\s]+", limit.strip()) if n]
    known = [n.name for n in inventory.nodes]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        problem = f"no node named {', '.join(unknown)} in the inventory" if unknown else "names no node"
        raise InputError(
            f"--limit {limit!r}: {problem}. Fix: name nodes of the inventory, comma-separated "
            f"({', '.join(known)})."
        )
    return [inventory.node(name) for name in names]
