"""`clusterctl accept`: one command from a running cluster to a verdict, a pass/fail per criterion.

The steps (``clusterctl.accept.plan``) run through ``clusterctl.accept.conduct``; this module reads the
options and the criteria file, prints the plan (``--plan``) or the verdict first, then each criterion
with its evidence, and writes ``--json``, ``--junit`` and the report page."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import (
    InventoryOption,
    console,
    err_console,
    finite_seconds,
    load,
    output_dir,
    print_json,
    writing,
)
from clusterctl.cli.junit import JunitOption, checked_junit, write_junit
from clusterctl.errors import InputError
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from clusterctl.accept.plan import AcceptPlan
    from clusterctl.accept.verdict import AcceptResult
    from clusterctl.diagnostics.junit import Case

# The version of `accept --plan --json`'s shape.
PLAN_SCHEMA = "clusterctl.accept-plan/1"
WIDTH = 80
_STYLE = {"pass": "green", "fail": "bold red", "no-threshold": "yellow", "skipped": "yellow"}


def accept(
    inventory_path: Path | None = InventoryOption,
    criteria_file: Path | None = typer.Option(
        None,
        "--criteria",
        help="A YAML file of thresholds (health, topology, pairs, collective, scaling, balance; docs/accept.md). "
        "Default: the baselines shipped for this hardware.",
    ),
    level: str = typer.Option(
        "quick", "--level", help="Health level after the passive checks: quick, standard or burn-in."
    ),
    on_bad_node: str = typer.Option(
        "exclude",
        "--on-bad-node",
        help="A node a check fails: exclude (named, left out of the later steps) or stop (end there).",
    ),
    workload: str = typer.Option("resnet50", "--workload", help="What the scaling runs run."),
    repeats: int = typer.Option(1, "--repeats", min=1, max=10, help="Runs per scaling run and per pair."),
    steps: int | None = typer.Option(None, "--steps", min=1, help="Measured steps per run."),
    warmup_steps: int | None = typer.Option(None, "--warmup-steps", min=0, help="Steps before measuring."),
    image_size: int | None = typer.Option(None, "--image-size", min=8, help="Synthetic image side."),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Per device."),
    timeout: float = typer.Option(
        600.0, "--timeout", min=1, callback=finite_seconds, help="Seconds each run may take."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Where the bundles, runs and page go. Default: runs/accept/<UTC time>/."
    ),
    html_dir: Path | None = typer.Option(
        None, "--html", help="The report page's directory. Default: OUT/report/."
    ),
    plan_only: bool = typer.Option(
        False,
        "--plan",
        help="Print the steps and each one's bound in seconds, then stop (no host contacted).",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the result as JSON (schema clusterctl.accept/1)."
    ),
    junit: Path | None = JunitOption,
) -> int:
    """Accept a running cluster: health, topology, pairs, the collective, the workload on 1 node then on
    all, report and explain; a pass/fail per criterion; exit 1 when one fails. Needs `clusterctl up`."""
    from clusterctl.accept.criteria import load_criteria
    from clusterctl.accept.plan import AcceptOptions, plan_accept
    from clusterctl.diagnostics.active import LEVELS
    from clusterctl.workloads import NAMES

    if level not in LEVELS:
        raise InputError(
            f"--level {level!r}: use {', '.join(LEVELS)} (`check health --help` says what each runs)."
        )
    if on_bad_node not in ("exclude", "stop"):
        raise InputError(f"--on-bad-node {on_bad_node!r}: use exclude or stop.")
    if workload not in NAMES:
        raise InputError(f"--workload {workload!r}: use one of {', '.join(NAMES)}.")
    junit = checked_junit(junit)
    criteria = load_criteria(criteria_file)
    inventory = load(inventory_path)
    options = AcceptOptions(
        level=level,  # checked above
        on_bad_node=on_bad_node,  # type: ignore[arg-type]
        workload=workload,
        repeats=repeats,
        pairs_repeats=repeats,
        run_timeout_s=timeout,
        steps=steps,
        warmup_steps=warmup_steps,
        image_size=image_size,
        batch_size=batch_size,
    )
    plan = plan_accept([n.name for n in inventory.nodes], options)
    if plan_only:
        from clusterctl.accept.conduct import collective_threshold
        from clusterctl.accept.verdict import criteria_lines

        lines = criteria_lines(
            criteria.health.max_severity,
            criteria.topology.max_severity,
            criteria.pairs.tolerance,
            collective_threshold(inventory, criteria, len(inventory.nodes)),
            criteria.scaling.min_efficiency,
            criteria.balance.max_compute_ratio,
        )
        if as_json:
            print_json(
                {
                    "schema": PLAN_SCHEMA,
                    **plan.to_json(),
                    "criteria": criteria.model_dump(),
                    "thresholds": lines,
                }
            )
        else:
            print_plan(plan, lines)
        return 0
    directory = out or Path("runs") / "accept" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    with writing(directory, "--out"):
        directory.mkdir(parents=True, exist_ok=True)
    page_dir = output_dir(html_dir or directory / "report", "--html")
    from clusterctl.accept.conduct import run_acceptance

    def say(line: str) -> None:
        err_console.print(safe_text(line), markup=False, highlight=False)

    result = run_acceptance(inventory, plan, criteria, directory, say)
    _write_page(Path(result.runs_dir), page_dir)
    write_junit(junit, "accept", junit_cases(result))
    if as_json:
        print_json({**result.to_json(), "page": str(page_dir / "index.html")})
    else:
        print_result(result)
        say(f"runs: {result.runs_dir}; page: {page_dir / 'index.html'}")
    return 0 if result.verdict == "pass" else 1


def _write_page(runs_dir: Path, page_dir: Path) -> None:
    """The report page (`report --html`'s writer) of the acceptance's runs, when it made any, with the
    verdict sections `report --html` gives them (the page shows why, as the table's verdicts say)."""
    from clusterctl.explain.gather import explained_report, page_explanations
    from clusterctl.results.history import load_runs
    from clusterctl.results.html import write_html

    if not runs_dir.is_dir():
        return
    rows, _ = explained_report(runs_dir)
    history = load_runs(runs_dir)
    with writing(page_dir, "--html"):
        write_html(rows, history, runs_dir, page_dir, page_explanations(rows, history, runs_dir))


def _wrapped(text: str, indent: str) -> str:
    return "\n".join(textwrap.wrap(safe_text(text), WIDTH, initial_indent=indent, subsequent_indent=indent))


def print_plan(plan: AcceptPlan, thresholds: list[str]) -> None:
    """The steps in order with their bounds, the total, then the criteria (80 columns)."""
    total = plan.bound_s
    console.print(
        f"accept plan: {len(plan.steps)} steps on {', '.join(plan.nodes)}; at most {total:,.0f} s on the hosts",
        markup=False, highlight=False,
    )  # fmt: skip
    for i, step in enumerate(plan.steps, 1):
        bound = f"{step.bound_s:>7,.0f} s" if step.bound_s is not None else "  local  "
        head = f"{i:>2}. {step.key:<16} {bound}  "
        console.print(_wrapped(step.what, " " * len(head)).replace(" " * len(head), head, 1), markup=False,
                      highlight=False)  # fmt: skip
    console.print(f"criteria (a node that fails one: {plan.options.on_bad_node}):", highlight=False)
    for line in thresholds:
        console.print(_wrapped(line, "  ").replace("  ", "  ", 1), markup=False, highlight=False)


def print_result(result: AcceptResult) -> None:
    """The verdict first, then each criterion (status, threshold) with its evidence under it."""
    criteria = result.completed()
    passed = sum(c.status == "pass" for c in criteria)
    if result.verdict == "pass":
        head = f"[green]ACCEPT PASS[/]: {passed} of {len(criteria)} criteria passed"
    else:
        named = f"; named: {', '.join(result.named)}" if result.named else ""
        failed = sum(c.status == "fail" for c in criteria)
        head = (
            f"[bold red]ACCEPT FAIL[/]: {failed} {'criterion' if failed == 1 else 'criteria'} failed{named}"
        )
    console.print(head, highlight=False)
    if result.stopped:
        console.print(_wrapped(f"stopped: {result.stopped}", ""), markup=False, highlight=False)
    if result.excluded:
        console.print(_wrapped(f"left out: {', '.join(result.excluded)}", ""), markup=False, highlight=False)
    for c in criteria:
        # the longest status, NO-THRESHOLD, is 12 characters: one space always parts it from the threshold
        console.print(f"{c.name:<11} [{_STYLE[c.status]}]{c.status.upper():<13}[/]", end="", highlight=False)
        console.print(safe_text(c.threshold[: WIDTH - 26]), markup=False, highlight=False)
        console.print(_wrapped(c.evidence, "    "), markup=False, highlight=False)
    if result.explanation:
        console.print(_wrapped(f"explain: {result.explanation}", ""), markup=False, highlight=False)


def junit_cases(result: AcceptResult) -> list[Case]:
    """One testcase per criterion: failed when it failed, or was not reached because the run stopped."""
    from clusterctl.diagnostics.junit import Case

    cases = []
    for c in result.completed():
        failed = c.status == "fail" or (c.status == "skipped" and result.stopped is not None)
        line = f"{c.status.upper()} {c.threshold}: {c.evidence}"
        cases.append(Case(c.name, "clusterctl.accept", line if failed else None, line))
    return cases
