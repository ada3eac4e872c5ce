"""`clusterctl check slurm-hc`: write the Slurm health-check script for the inventory's nodes."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterctl.cli.common import InventoryOption, console, load, output_file, writing
from clusterctl.terminal import safe_text


def slurm_hc(
    inventory_path: Path | None = InventoryOption,
    output: Path = typer.Option(..., "--output", "-o", help="The script to write (mode 0755)."),
) -> int:
    """Write a Slurm HealthCheckProgram / Prolog script: the node's kernel-log Xids, GPUs (count,
    remapped rows pending) and InfiniBand ports (state, rate), the node drained with the problem as the
    reason; it ends within 39 s, under Slurm's 60 s kill. Nothing is contacted."""
    from clusterctl.check.healthcheck import render_healthcheck

    output_file(output, "--output")
    script = render_healthcheck(load(inventory_path))
    with writing(output, "--output"):
        output.write_text(script)
        output.chmod(0o755)
    console.print(
        safe_text(
            f"wrote {output}: in slurm.conf, HealthCheckProgram={output.resolve()} (copy it to every node)"
        ),
        markup=False,
        highlight=False,
    )
    return 0
