"""Where clusterctl finds its shipped data and keeps its state.

Data (templates, playbooks, example inventories) sits at the repository's top level in a checkout
and under ``clusterctl/_data/`` inside an installed wheel. State (sandbox keys, cluster keys) lives
under one directory, ``$CLUSTERCTL_STATE_DIR`` or ``$XDG_STATE_HOME/clusterctl`` (default
``~/.local/state/clusterctl``).
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterctl.errors import EnvironmentProblem

STATE_DIR_ENV = "CLUSTERCTL_STATE_DIR"
_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The shipped data directory ``name`` (``templates``, ``playbooks`` or ``inventories``)."""
    installed = _PACKAGE / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name


# The payload's script that runs on the node hosts, not in the container: node telemetry.
NODE_SAMPLER = "nodesampler.py"


def payload_dir() -> Path:
    """The scripts copied into the benchmark image (``clusterctl/payload``)."""
    return _PACKAGE / "payload"


def payload_files() -> list[Path]:
    """The payload's scripts, as the image and a Slurm job's mounted copy hold them (not the package marker)."""
    return sorted(p for p in payload_dir().glob("*.py") if p.name != "__init__.py")


def state_dir() -> Path:
    """The root of everything clusterctl writes outside a run directory.

    Raises:
        EnvironmentProblem: it cannot be determined (``$CLUSTERCTL_STATE_DIR=~nosuchuser``, or no
            ``$HOME``, no passwd entry and neither variable set).
    """
    explicit = os.environ.get(STATE_DIR_ENV)
    xdg = os.environ.get("XDG_STATE_HOME")
    try:
        if explicit:
            return Path(explicit).expanduser()
        return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state") / "clusterctl"
    except RuntimeError:  # ~nosuchuser, or ~ with no $HOME and no passwd entry
        source = (
            f"${STATE_DIR_ENV} is {explicit[:200]!r}"
            if explicit
            else (f"$XDG_STATE_HOME is {xdg[:200]!r}" if xdg else "$HOME is unset")
        )
        raise EnvironmentProblem(
            f"clusterctl cannot determine its state directory: {source} and that user's home directory "
            f"is unknown (no such user, or no $HOME and no passwd entry). Fix: set {STATE_DIR_ENV} to a "
            f"writable directory, e.g. export {STATE_DIR_ENV}=/var/tmp/clusterctl."
        ) from None


def cluster_state_dir(cluster_name: str) -> Path:
    """Per-cluster state: the container SSH keys and known_hosts, accepted host keys."""
    return state_dir() / "clusters" / cluster_name
