"""Health bundles built from real captured outputs (tests/fixtures/), for the tests of `check health`,
its levels, its JUnit and its output at scale: a healthy H100 node's outputs, and a node's bundle as
`check health` writes it."""

from __future__ import annotations

from pathlib import Path

from clusterctl.diagnostics.bundle import NodeBundle, NodeMeta, SectionMeta
from clusterctl.diagnostics.health import health_collectors
from tests.fixtures import fixture_text

INVENTORY = Path(__file__).parents[2] / "inventories" / "modern-h100.yml"
XID79 = "kernel_log/gpud-xid79-fallen-off-bus-sxid20034-nvswitch-partial.txt"
REMAP = "nvidia_smi_q/gpud-a10-535.129.03-remapped-rows-pending.txt"
HEALTHY_SMI = "nvidia_smi_q/lent-h100-vm-580.159.04-fabric-na-health-block.txt"
# 8 GPUs, as the inventory gives each node: one GPU fewer is a fault (gpu-count-mismatch).
HEALTHY_SMI_8 = "nvidia_smi_q/gpud-8xrtx4090-535.154.05-fabric-na-idle-gen1.txt"
LSPCI_OK = "lspci_vvv/gpud-h100-pex890xx-cx7-acs-on-storage-switch-partial.txt"
IBSTAT = "ibstat/gpud-h100-8cx7-ib-400-plus-bluefield3-bond-eth.txt"
COUNTERS = "sysfs_counters/gpud-h100-9hca-all-counters-grep.txt"
# The same node after its saturated counters were cleared: what a healthy node's two reads look like.
COUNTERS_CLEARED = "sysfs_counters/constructed-h100-9hca-counters-saturated-ones-cleared.txt"
# What a healthy H100 node's health bundle holds, by collector key: real outputs, no Xid line.
HEALTHY: dict[str, str] = {
    "kernel-log": "",
    "nvidia-smi-q": HEALTHY_SMI_8,
    "lspci-vvv": LSPCI_OK,
    "ibstat": IBSTAT,
    "ib-port-errors": COUNTERS_CLEARED,
    "ib-port-errors-2": COUNTERS_CLEARED,
}


def health_bundle(node: str, files: dict[str, str], failed: dict[str, str] | None = None) -> NodeBundle:
    """A node's bundle as `check health` writes it, each output from a fixture (failed: key -> stderr)."""
    meta = NodeMeta(node=node, collected_at="2026-11-25T12:00:00+00:00")
    outputs = {}
    for c in health_collectors():
        if c.key in (failed or {}):
            meta.sections[c.key] = SectionMeta(
                argv=list(c.argv), status="failed", exit_status=1, stderr_tail=(failed or {})[c.key]
            )
            continue
        meta.sections[c.key] = SectionMeta(argv=list(c.argv), status="ok", exit_status=0)
        outputs[c.key] = fixture_text(files[c.key]) if files[c.key] else ""
    return NodeBundle(meta=meta, outputs=outputs)


DCGM_PASS = "dcgmi_diag/go-dcgm-issue52-r2-3.3.1-pass-partial.txt"
H2D_8GPU = "nvbandwidth/nvbandwidth-issue15-8x-rtx4090-h2d-ce-partial.txt"


def active_bundle(node: str, files: dict[str, str], status: dict[str, str] | None = None) -> NodeBundle:
    """A standard-level health bundle: outputs from fixtures; ``status``: key -> missing/failed."""
    meta = NodeMeta(node=node, collected_at="2026-11-26T00:00:00+00:00")
    outputs = {}
    for c in health_collectors(level="standard"):
        state = (status or {}).get(c.key, "ok")
        meta.sections[c.key] = SectionMeta(
            argv=list(c.argv), status=state, exit_status=0 if state == "ok" else 127
        )
        if state == "ok":
            outputs[c.key] = fixture_text(files[c.key]) if files[c.key] else ""
    return NodeBundle(meta=meta, outputs=outputs)
