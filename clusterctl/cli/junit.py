"""`--junit FILE` of the checks: the option, checked before anything runs, and the file written."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import output_file, writing

if TYPE_CHECKING:
    from clusterctl.diagnostics.health import HealthReport
    from clusterctl.diagnostics.junit import Case
    from clusterctl.diagnostics.rules_cluster import TopologyReport

JunitOption = typer.Option(
    None,
    "--junit",
    help="Also write the result as JUnit XML to this file (one testcase per node and per finding) for CI.",
    show_default=False,
)


def checked_junit(path: Path | None) -> Path | None:
    """``path`` checked as the file ``--junit`` writes (None: not asked for).

    Raises:
        InputError: it cannot be such a file (``output_file``).
    """
    return output_file(path, "--junit", suffix=".xml") if path is not None else None


def write_junit(path: Path | None, suite: str, cases: list[Case]) -> None:
    """Write ``cases`` as the JUnit XML testsuite ``suite`` to ``path`` (None: nothing).

    Raises:
        InputError: the file cannot be written.
    """
    from clusterctl.diagnostics.junit import junit_xml

    if path is not None:
        with writing(path, "--junit"):
            path.write_text(junit_xml(suite, cases), encoding="utf-8")


def health_cases(report: HealthReport) -> list[Case]:
    """`check health`'s testcases: a node fails with a fail or unknown verdict (its summary the reason)."""
    from clusterctl.diagnostics.junit import check_cases

    failed = {n: f"{h.verdict.upper()} {h.summary()}" if h.verdict in ("fail", "unknown") else None
              for n, h in report.nodes.items()}  # fmt: skip
    return check_cases("check-health", failed, report.findings)


def topology_cases(report: TopologyReport, *, strict: bool) -> list[Case]:
    """`check topology`'s testcases: a node fails with an error finding (or, ``strict``, a warning); the
    reason is its worst finding."""
    from clusterctl.diagnostics.junit import check_cases
    from clusterctl.findings import exit_code, worst

    failed: dict[str, str | None] = {}
    for name, r in report.nodes.items():
        head = next((f for f in r.findings if f.severity == worst(r.findings)), None)
        failed[name] = f"{head.code}: {head.message}" if head and exit_code(r.findings, strict) else None
    return check_cases("check-topology", failed, report.findings)
