"""What the bench scripts share: a private sandbox of N nodes, timed CLI commands, the table and the JSON.

Each sandbox gets a unique name and a free 10.213.X.0/24 subnet and its own state directory, so a bench
run never touches the user's sandbox or another session's; it is removed at the end (also on Ctrl-C).
The CLI is run as a fresh process (``python -m clusterctl``), as a user would run it: its start-up is
part of every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from clusterctl.sandbox.scratch import scratch_sandbox

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Bench:
    """A running sandbox for one measurement: its name, state directory and environment."""

    name: str
    nodes: int
    state_dir: Path

    @property
    def env(self) -> dict[str, str]:
        """The environment every command of this sandbox runs with."""
        env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_INVENTORY"}
        return {**env, "CLUSTERCTL_STATE_DIR": str(self.state_dir)}

    @property
    def inventory_path(self) -> Path:
        """The sandbox's generated inventory."""
        return self.state_dir / "sandbox" / "inventory.yml"

    def _run(self, args: Sequence[str], timeout_s: float) -> tuple[float, subprocess.CompletedProcess[str]]:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "clusterctl", *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        return time.perf_counter() - start, done

    def clusterctl(self, *args: str, timeout_s: float = 1800) -> float:
        """Run ``clusterctl ARGS`` as a fresh process; return its wall time. Raises when it fails."""
        took, done = self._run(args, timeout_s)
        if done.returncode != 0:
            raise RuntimeError(
                f"clusterctl {' '.join(args)} exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        return took

    def json(self, *args: str, timeout_s: float = 1800) -> tuple[float, dict]:
        """Run ``clusterctl ARGS --json``; return its wall time and parsed output (any exit code)."""
        took, done = self._run([*args, "--json"], timeout_s)
        try:
            return took, json.loads(done.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(
                f"clusterctl {' '.join(args)} --json exited {done.returncode}: {done.stderr[-2000:]}"
            ) from None


def arguments(doc: str, nodes: str, *, repeats: bool = True) -> argparse.ArgumentParser:
    """The options every bench script takes: --nodes, --json, --sandbox-state, and (when timed
    repeatedly) --repeats, --transport (of the untimed image push)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--nodes", default=nodes, help=f"Node counts, comma-separated (default {nodes}).")
    parser.add_argument("--json", type=Path, help="Also write the figures as JSON to this file.")
    if repeats:
        parser.add_argument(
            "--repeats", type=int, default=3, help="Runs of each command per count (default 3)."
        )
        parser.add_argument("--transport", choices=["registry", "stream"], help="For the untimed image push.")
    parser.add_argument(
        "--sandbox-state",
        type=Path,
        help="Measure on the running sandbox of this state directory (its CLUSTERCTL_STATE_DIR) instead "
        "of a fresh one; it is left up, with its image and tags (the tests' short forms share one).",
    )
    return parser


@contextlib.contextmanager
def sandbox(nodes: int, prefix: str, existing: Path | None = None, *, exact: bool = True) -> Iterator[Bench]:
    """A fresh sandbox of ``nodes`` nodes in a private state directory, removed (with its state and
    image tags) on the way out; or, with ``existing``, the running sandbox of that state directory, left
    as it is (it must have ``nodes`` nodes, or at least that many when not ``exact``)."""
    if existing is not None:
        with _state_dir(existing):
            yield _running(existing, nodes, exact)
        return
    with (
        tempfile.TemporaryDirectory(prefix="clusterctl-bench-") as state,
        _state_dir(Path(state)),
        scratch_sandbox(prefix, nodes) as status,
    ):
        assert status.name is not None
        yield Bench(status.name, nodes, Path(state))


def _running(state_dir: Path, nodes: int, exact: bool) -> Bench:
    """The running sandbox of ``state_dir`` (in CLUSTERCTL_STATE_DIR now); exits when it cannot serve."""
    from clusterctl.sandbox.cluster import status

    found = status()
    count = len(found.nodes)
    if found.state != "up" or found.name is None:
        raise SystemExit(f"--sandbox-state {state_dir}: no sandbox is up there ({found.state}).")
    if count < nodes or (exact and count != nodes):
        raise SystemExit(
            f"--sandbox-state {state_dir}: its sandbox has {count} node(s); this measures {nodes}. "
            f"Fix: pass --nodes {count}, or another sandbox."
        )
    return Bench(found.name, count, state_dir)


@contextlib.contextmanager
def _state_dir(path: Path) -> Iterator[None]:
    """``CLUSTERCTL_STATE_DIR`` set to ``path`` in this process for the block (the library calls)."""
    previous = os.environ.get("CLUSTERCTL_STATE_DIR")
    os.environ["CLUSTERCTL_STATE_DIR"] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("CLUSTERCTL_STATE_DIR", None)
        else:
            os.environ["CLUSTERCTL_STATE_DIR"] = previous


def machine() -> dict[str, object]:
    """Where and when the figures were taken."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain aligned table on stdout (pasteable into bench/README.md as Markdown)."""
    cells = [[str(h) for h in header]] + [
        [f"{c:.2f}" if isinstance(c, float) else str(c) for c in r] for r in rows
    ]
    cells = [[c.replace("|", "\\|") for c in row] for row in cells]  # a literal | inside a Markdown cell
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        print("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def write_json(path: Path | None, figures: dict[str, object]) -> None:
    """Write ``figures`` with the machine's description to ``path`` (when given)."""
    if path is not None:
        path.write_text(json.dumps({"machine": machine(), **figures}, indent=2) + "\n")
