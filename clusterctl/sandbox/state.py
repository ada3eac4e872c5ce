"""The sandbox's files under the state directory, and its state file.

Everything a sandbox writes lives in ``state_dir()/sandbox/`` (``$CLUSTERCTL_STATE_DIR`` moves it):
the key pair, the known_hosts file, the generated inventory and ``state.json``, which records what
``up`` was asked for so that ``status``, a second ``up`` and ``down`` need no arguments.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clusterctl.errors import EnvironmentProblem
from clusterctl.paths import state_dir


@dataclass(frozen=True)
class SandboxFiles:
    """The paths of one state directory's sandbox files."""

    directory: Path

    @property
    def state(self) -> Path:
        """What ``up`` was asked for (JSON)."""
        return self.directory / "state.json"

    @property
    def inventory(self) -> Path:
        """The generated inventory every command uses by default."""
        return self.directory / "inventory.yml"

    @property
    def private_key(self) -> Path:
        """The sandbox's ed25519 key, authorised for root on every node."""
        return self.directory / "id_ed25519"

    @property
    def public_key(self) -> Path:
        """The public half of ``private_key``."""
        return self.directory / "id_ed25519.pub"

    @property
    def known_hosts(self) -> Path:
        """The nodes' host keys, read from each node when it was created."""
        return self.directory / "known_hosts"

    @property
    def munge_key(self) -> Path:
        """The sandbox's own munge key (``up --slurm``), copied to every node."""
        return self.directory / "munge.key"

    def all(self) -> list[Path]:
        """Every file a sandbox may write here."""
        return [
            self.state,
            self.inventory,
            self.private_key,
            self.public_key,
            self.known_hosts,
            self.munge_key,
        ]


def sandbox_files() -> SandboxFiles:
    """The sandbox files of the current state directory."""
    return SandboxFiles(state_dir() / "sandbox")


class SandboxState(BaseModel):
    """The contents of ``state.json``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Sandbox name (the label value on its containers, network, volumes).")
    nodes: int = Field(ge=1, description="Node count asked for.")
    subnet: str = Field(description="The bridge network's subnet.")
    node_image: str | None = Field(None, description="The node image tag the nodes run.")
    isolation: str | None = Field(None, description="privileged or capabilities (see sandbox.engine).")
    slurm: bool = Field(False, description="Whether the nodes run Slurm (`up --slurm`).")
    light: bool = Field(
        False, description="Whether the nodes are light: sshd (and slurmd), no engine (`up --light`)."
    )


def read_state(files: SandboxFiles) -> SandboxState | None:
    """The recorded state, or None when no sandbox was brought up from this state directory.

    Raises:
        EnvironmentProblem: the state file exists but cannot be read.
    """
    if not files.state.is_file():
        return None
    try:
        return SandboxState.model_validate_json(files.state.read_text())
    except (ValidationError, OSError) as exc:
        raise EnvironmentProblem(
            f"{files.state} cannot be read ({exc}). Fix: remove the sandbox with `clusterctl sandbox down "
            "--name NAME`, which also deletes this file."
        ) from None


def write_state(files: SandboxFiles, state: SandboxState) -> None:
    """Write ``state.json`` atomically (a partial file is never seen)."""
    files.directory.mkdir(parents=True, exist_ok=True)
    tmp = files.state.with_suffix(".tmp")
    tmp.write_text(state.model_dump_json(indent=2) + "\n")
    os.replace(tmp, files.state)
