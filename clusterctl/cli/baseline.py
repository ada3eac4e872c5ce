"""`clusterctl baseline save`: record this site's own baseline from a known-good run or `check pairs`."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from clusterctl.cli.common import InventoryOption, console, load, markup_safe, output_file, writing
from clusterctl.errors import InputError

app = typer.Typer(help="This site's own expected figures (baselines).", no_args_is_help=True)


@app.command("save")
def save(
    source: Path = typer.Argument(
        ...,
        help="A run directory of a good nccl-tests/allreduce run, or a file of `check pairs --json` output.",
    ),
    inventory_path: Path | None = InventoryOption,
    output: Path | None = typer.Option(
        None, "--output", "-o", help="The baselines file to add it to. Default: the inventory's `baselines`."
    ),
    name: str | None = typer.Option(
        None, "--name", help="The entry's name. Default: site-<cluster>-<nodes>n."
    ),
    tolerance: float = typer.Option(
        0.15, "--tolerance", min=0.0, max=0.95, help="Fraction below the figure still healthy."
    ),
) -> int:
    """Save the collective's bus bandwidth as this hardware's baseline: `check pairs` and `run --preflight`
    (its default minimum) then judge against it before the shipped figures."""
    from clusterctl.check.site_baseline import baseline_from
    from clusterctl.results.baselines import save_baseline

    if not math.isfinite(tolerance):
        raise typer.BadParameter(
            f"{tolerance} is not a number; give a fraction such as 0.15", param_hint="--tolerance"
        )

    inventory = load(inventory_path)
    path = output or inventory.baselines
    if path is None:
        raise InputError(
            "baseline save: no file to save to. Fix: set `baselines: site-baselines.yml` in the inventory "
            "(so `check pairs` and `run --preflight` read it), or pass --output FILE."
        )
    output_file(path, "--output" if output else "baselines (the inventory's)")
    baseline = baseline_from(source, inventory, name=name, tolerance=tolerance)
    with writing(path, "--output"):
        save_baseline(path, baseline)
    console.print(
        markup_safe(
            f"saved {baseline.name}: {baseline.value:.3g} GB/s (floor {baseline.floor:.3g}) for "
            f"{', '.join(f'{k}={v}' for k, v in baseline.match.items())} in {path}"
        ),
        highlight=False,
    )
    return 0
