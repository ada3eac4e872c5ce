"""A rank's place in the job, from whichever launcher started it. Standard library only.

The payloads run under mpirun (the ssh launcher), under srun (the slurm launcher: DDP never calls
MPI_Init, so no ``OMPI_COMM_WORLD_*`` exists there) and under torchrun. Each launcher describes the
rank in its own variables; they are read in this order, and every source present must agree:

1. Open MPI (mpirun, prterun): ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``,
   ``OMPI_COMM_WORLD_LOCAL_RANK``;
2. Slurm (srun): ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``;
3. PMIx (srun --mpi=pmix, prterun): ``PMIX_RANK`` (the rank only);
4. torchrun: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``.

Two sources that disagree (a launcher started inside another one's environment, e.g. mpirun inside a
Slurm batch step whose ``SLURM_PROCID`` is 0 for every rank) stop the rank before it joins anything:
a wrong rank would hang the rendezvous or train on the wrong device. No source at all is a single
process (rank 0 of 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# (launcher, rank variable, world size variable, local rank variable); None: the source has no such variable.
SOURCES: tuple[tuple[str, str, str | None, str | None], ...] = (
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("PMIx", "PMIX_RANK", None, None),
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
)
_FIELDS = ("rank", "world size", "local rank")


class RankError(SystemExit):
    """The environment does not describe one consistent rank: the payload exits with this message."""


@dataclass(frozen=True)
class Ranks:
    """This process's rank, the world size, its rank on its node, and the launcher(s) that said so."""

    rank: int
    world_size: int
    local_rank: int
    source: str


def _read(environ: Mapping[str, str], name: str) -> int:
    text = environ[name]
    if not text.strip().isdigit():
        raise RankError(f"ranks: {name}={text!r} is not a non-negative integer; the launcher set it wrongly.")
    return int(text)


def resolve_ranks(environ: Mapping[str, str]) -> Ranks:
    """The rank described by ``environ`` (see the module's order).

    Raises:
        RankError: a value is not an integer, two sources disagree, a rank comes without its world
            size or local rank, or the rank is not below the world size.
    """
    found: list[dict[str, tuple[str, int]]] = [{}, {}, {}]  # per field: variable -> value
    sources: list[str] = []
    for launcher, *names in SOURCES:
        present = [name for name in names if name is not None and name in environ]
        if present:
            sources.append(launcher)
        for index, name in enumerate(names):
            if name is not None and name in environ:
                found[index][name] = (launcher, _read(environ, name))
    if not sources:
        return Ranks(0, 1, 0, "none (a single process)")
    values: list[int | None] = []
    for field, seen in zip(_FIELDS, found, strict=True):
        distinct = {value for _, value in seen.values()}
        if len(distinct) > 1:
            shown = ", ".join(f"{name}={value} ({launcher})" for name, (launcher, value) in seen.items())
            raise RankError(
                f"ranks: the launchers' variables disagree on the {field}: {shown}. A launcher started "
                "inside another one's environment; unset the outer launcher's variables before starting "
                "the ranks (e.g. mpirun inside a Slurm job: use srun instead)."
            )
        values.append(distinct.pop() if distinct else None)
    rank, world, local = values
    missing = [field for field, value in zip(_FIELDS, values, strict=True) if value is None]
    if missing and (world is None or world > 1):
        raise RankError(
            f"ranks: {', '.join(sources)} set no {' and no '.join(missing)}; start the ranks with mpirun, "
            "srun or torchrun, which set all three."
        )
    world = world or 1
    rank = rank or 0
    if rank >= world:
        raise RankError(f"ranks: rank {rank} is not below the world size {world} ({', '.join(sources)}).")
    return Ranks(rank, world, local or 0, " = ".join(sources))
