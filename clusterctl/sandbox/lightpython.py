"""PyTorch for light Slurm nodes (``sandbox up --light --slurm``): the payload runs on the node itself
(the slurm block's runtime ``none``), and a light node has no engine to run the benchmark image.

The wheelhouse's PyTorch (CPU) and its dependencies are installed once, with ``pip install --no-index
--target``, into a directory under ``~/.cache/clusterctl/`` named by the wheels' names, for the node
image's Python (Debian's 3.11, manylinux wheels only); every light node mounts it read-only at
``NODE_DIR`` (one copy on disk and in the page cache for 128 nodes), with a ``.pth`` file that puts it
on the node's ``python3`` path and ``python`` naming ``python3`` (the ranks' argv starts with python).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from docker.models.containers import Container

from clusterctl.errors import EnvironmentProblem

NODE_DIR = "/opt/clusterctl-python"
CACHE = Path("~/.cache/clusterctl")
# The node image's Python (debian:bookworm-slim's python3).
NODE_PYTHON = "3.11"
PACKAGES = ("torch", "numpy")
INSTALL_DEADLINE_S = 900
# Run inside a light node after it starts (idempotent): the .pth file, and `python`.
NODE_SETUP = (
    f"echo {NODE_DIR} > /usr/lib/python3/dist-packages/clusterctl-light.pth"
    " && ln -sf /usr/bin/python3 /usr/local/bin/python"
)


def ensure_installed(wheelhouse: str, log: Callable[[str], None]) -> Path:
    """The directory holding PyTorch for the nodes' Python, installed from ``wheelhouse`` unless there.

    Raises:
        EnvironmentProblem: no wheelhouse, or pip failed (its last lines are shown).
    """
    wheels = Path(wheelhouse).expanduser()
    names = sorted(p.name for p in wheels.glob("*.whl")) if wheels.is_dir() else []
    if not any(name.startswith("torch-") for name in names):
        raise EnvironmentProblem(
            f"sandbox up --light --slurm: no PyTorch wheel in the wheelhouse {wheels} (the light nodes run "
            "the payload on the node itself). Fix: run `bash scripts/setup-env.sh` (it fills the "
            "wheelhouse), or set CLUSTERCTL_WHEELHOUSE."
        )
    digest = hashlib.sha256("\n".join([*PACKAGES, *names]).encode()).hexdigest()[:12]
    target = (CACHE / f"light-python-{digest}").expanduser()
    if (target / "torch").is_dir():
        return target
    log(f"installing PyTorch from {wheels} for the light nodes into {target} (first time only)")
    partial = target.with_name(target.name + ".partial")
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels),
        "--target", str(partial), "--python-version", NODE_PYTHON, "--only-binary=:all:", *PACKAGES,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_DEADLINE_S, check=False)
    if done.returncode != 0:
        raise EnvironmentProblem(
            f"installing PyTorch for the light nodes failed (pip exited {done.returncode}): "
            f"{(done.stdout + done.stderr)[-1500:]}\nFix: check the wheelhouse {wheels}."
        )
    partial.rename(target)
    return target


def set_up_node(container: Container) -> None:
    """Put the mounted PyTorch on the node's python3 path and name ``python``.

    Raises:
        EnvironmentProblem: the node refused (its output is shown).
    """
    result = container.exec_run(["sh", "-c", NODE_SETUP])
    if result.exit_code != 0:
        raise EnvironmentProblem(
            f"sandbox node {container.name}: setting up its Python failed: {result.output.decode().strip()}"
        )
