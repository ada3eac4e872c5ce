"""A throwaway sandbox: a unique name, a free subnet, removed with its image tags on the way out.

What the integration tests, the load cycles and the bench scripts bring up, so that none of them touches
the user's sandbox or another session's on the same engine. It lives in the current state directory
(``$CLUSTERCTL_STATE_DIR``), which the caller points somewhere private. While it is up, a record names
the process that owns it (``clusterctl.sandbox.orphans``), so that ``sweep_orphans`` can remove it
once that process is gone without its teardown (killed).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import docker
import docker.errors

from clusterctl.interrupts import deferred_interrupts, sigterm_interrupts
from clusterctl.sandbox import cluster, orphans
from clusterctl.sandbox.engine import free_subnet


def unique_name(prefix: str) -> str:
    """A sandbox name no other test, bench or session uses: ``prefix`` and 6 random hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def untag_cluster_images(cluster_name: str) -> None:
    """Drop the image tags of cluster ``cluster_name`` on the local engine; the layers stay cached.

    Only this cluster's own tags: a build whose every step is cached yields the same image ID for
    every cluster, so the image also carries other clusters' tags, which must stay.
    """
    engine = docker.from_env(timeout=60)
    with contextlib.closing(engine):
        for image in engine.images.list(name=f"clusterctl/{cluster_name}"):
            for tag in (t for t in image.tags if t.startswith(f"clusterctl/{cluster_name}:")):
                with contextlib.suppress(docker.errors.DockerException):
                    engine.images.remove(tag, noprune=True)


@contextlib.contextmanager
def scratch_sandbox(
    prefix: str, nodes: int, *, slurm: bool = False, light: bool = False
) -> Iterator[cluster.SandboxStatus]:
    """A new sandbox of ``nodes`` nodes named ``prefix-XXXXXX`` on a free subnet; removed on the way out
    (also on an error, Ctrl-C or SIGTERM), with its image tags. A Ctrl-C or SIGTERM during the removal is
    held until it ends: cut short, it would leave the network and volumes once the containers are gone."""
    name = unique_name(prefix)
    with sigterm_interrupts(), orphans.owned(name):
        try:
            subnet = free_subnet(docker.from_env(timeout=30))
            yield cluster.up(name, nodes, subnet, slurm=slurm, light=light)
        finally:
            with deferred_interrupts():
                remove_scratch(name)


def remove_scratch(name: str) -> None:
    """Remove scratch sandbox ``name`` (its containers, network, volumes) and its image tags."""
    cluster.down(name)
    untag_cluster_images(name)


def sweep_orphans() -> list[str]:
    """Remove every scratch sandbox whose owning process died without its teardown; their names."""
    return orphans.sweep(remove_scratch)
