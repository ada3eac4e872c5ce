"""`clusterctl data synth`: a learnable ImageNet-layout dataset written onto every node (or once onto
shared storage), for the resnet50 payload's real input pipeline (`run --data`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import InventoryOption, console, err_console, load, markup_safe, print_json
from clusterctl.errors import InputError

if TYPE_CHECKING:
    from clusterctl.data.deliver import SynthResult
    from clusterctl.inventory import Inventory

app = typer.Typer(help="Datasets on the nodes: make a synthetic ImageNet-layout one.", no_args_is_help=True)


def dataset_path(inv: Inventory, given: str | None) -> str:
    """The nodes' directory: ``--path``, else the node side, through ``container.mounts``, of resnet50's
    ``data`` (``workloads.resnet50.data`` or ``run.data``), else of ``DEFAULT_DATA`` (what ``run --data``
    reads; on the sandbox, its nodes' /srv/synth, which the benchmark containers already see).

    Raises:
        InputError: no mount holds the container path (the message names the mount to add), or ``--path``
            is no absolute path of safe characters.
    """
    from pydantic import TypeAdapter, ValidationError

    from clusterctl.data.probe import DEFAULT_DATA, host_path
    from clusterctl.inventory.types import ListPath

    if given is not None:
        try:
            return str(TypeAdapter(ListPath).validate_python(given))
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            raise InputError(
                f"--path {given!r}: {reason}. Fix: name the dataset's directory on the nodes."
            ) from None
    data = str(inv.run_settings("resnet50", {}).get("data", "synthetic"))
    return host_path(inv, DEFAULT_DATA if data == "synthetic" else data)


@app.command("synth")
def synth(
    inventory_path: Path | None = InventoryOption,
    path: str | None = typer.Option(
        None,
        "--path",
        help="Directory on the nodes. Default: where the containers see run.data, else /data/synth (what "
        "`run --data` reads), through container.mounts (the sandbox's nodes: /srv/synth).",
    ),
    classes: int = typer.Option(10, "--classes", min=2, max=1000, help="Number of classes."),
    train: int = typer.Option(
        100, "--train-per-class", min=1, max=100_000, help="Training images per class."
    ),
    val: int = typer.Option(20, "--val-per-class", min=1, max=10_000, help="Validation images per class."),
    width: int = typer.Option(
        400, "--width", min=16, max=4096, help="Image width in pixels (ImageNet: ~400)."
    ),
    height: int = typer.Option(
        350, "--height", min=16, max=4096, help="Image height in pixels (ImageNet: ~350)."
    ),
    quality: int = typer.Option(93, "--quality", min=10, max=100, help="JPEG quality."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="The same seed makes the same files."),
    tfrecords: int = typer.Option(
        0,
        "--tfrecords",
        min=0,
        max=1024,
        help="Also write N training TFRecord shards of the same images (and N/8 validation ones, at least 1) "
        "under tfrecords/, for tf_cnn_benchmarks (--data_dir); 0: none.",
    ),
    shared: bool = typer.Option(
        False, "--shared", help="The directory is shared storage: write once (through the first node)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest summary and each node's outcome."),
) -> int:
    """Write N classes x M JPEGs (train/<class>/*.JPEG, val/<class>/*.JPEG) onto every node, and with
    --tfrecords their TFRecord shards (tfrecords/train-00000-of-0000N, validation-...).

    Deterministic from --seed; a node holding the same manifest is skipped; files it did not write are
    never replaced (a directory holding them is refused, exit 2).
    """
    from clusterctl.data.deliver import synth_on_nodes
    from clusterctl.data.synth import SynthSpec

    inv = load(inventory_path)
    directory = dataset_path(inv, path)
    spec = SynthSpec(classes, train, val, width, height, quality, seed, tfrecords)
    with _ImageProgress(quiet=as_json) as progress:
        result = synth_on_nodes(inv, list(inv.nodes), directory, spec, shared=shared, progress=progress)
    if as_json:
        print_json(_as_json(result))
    else:
        _print(result)
    return 0


def _as_json(result: SynthResult) -> dict[str, object]:
    m = result.manifest
    return {
        "path": result.nodes[0].path if result.nodes else None,
        "files": m.files,
        "bytes": m.bytes,
        "mean_file_bytes": round(m.bytes / m.files) if m.files else 0,
        "digest": m.digest,
        "spec": vars(m.spec),
        "nodes": [
            {"node": n.node, "outcome": n.outcome, "seconds": round(n.seconds, 3)} for n in result.nodes
        ],
    }


def _print(result: SynthResult) -> None:
    m = result.manifest
    written = sum(n.outcome == "written" for n in result.nodes)
    path = result.nodes[0].path if result.nodes else ""
    console.print(
        f"dataset ready on {len(result.nodes)} node(s) at {markup_safe(path)}: {m.files} images, "
        f"{m.bytes / 1e6:.1f} MB (mean {m.bytes / max(m.files, 1) / 1e3:.1f} KB), digest {m.digest[:12]}; "
        f"written on {written}",
        highlight=False,
    )
    for n in result.nodes:
        console.print(f"  {markup_safe(n.node)}: {n.outcome}", highlight=False)


class _ImageProgress:
    """``progress(done, total)`` as a progress bar on stderr while the images are rendered."""

    def __init__(self, *, quiet: bool) -> None:
        from rich.progress import Progress

        self._progress = Progress(console=err_console, transient=True, disable=quiet)
        self._task = self._progress.add_task("rendering images", total=None)

    def __enter__(self) -> _ImageProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def __call__(self, done: int, total: int) -> None:
        """``done`` of ``total`` images rendered."""
        self._progress.update(self._task, completed=done, total=total)
