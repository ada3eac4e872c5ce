"""Topology bundles from real captured outputs (tests/fixtures/), for the tests of `check topology`,
its JUnit, its output at 80 nodes, and the snapshot findings of a run: two nodes' outputs, and a bundle
written as `check topology` writes it."""

from __future__ import annotations

from pathlib import Path

from clusterctl.diagnostics.bundle import NodeBundle, NodeMeta, SectionMeta, write_bundle
from clusterctl.diagnostics.collectors import COLLECTORS
from tests.fixtures import fixture_text

REPO = Path(__file__).resolve().parents[2]
PAPER_C4140 = REPO / "inventories" / "paper-c4140.yml"
IP_SAMPLE = "ip_addr/vm-host-eth0-docker-bridges.txt"


def topology_bundle(node: str, outputs: dict[str, str]) -> NodeBundle:
    """A node's bundle: the given outputs ran fine, every other collector's tool is missing."""
    meta = NodeMeta(node=node, collected_at="2026-01-01T00:00:00+00:00")
    for c in COLLECTORS:
        ran = c.key in outputs
        meta.sections[c.key] = SectionMeta(
            argv=list(c.argv), status="ok" if ran else "missing", exit_status=0 if ran else 127
        )
    return NodeBundle(meta=meta, outputs=outputs)


def saved_topology(directory: Path, nodes: dict[str, dict[str, str]]) -> Path:
    """A bundle written as `check topology` / `collect` write it, one node per entry of ``nodes``."""
    return write_bundle(directory, {name: topology_bundle(name, outputs) for name, outputs in nodes.items()})


FIXTURE_NODE = {
    "nvidia-smi-topo": fixture_text("nvidia_smi_topo/princeton-della-a100-2gpu-pcie-sys-2nic-numa.txt"),
    "ibstat": fixture_text(
        "ibstat/nccl-tests-issue128-cx6-mt4123-active200-down-disabled-rate10-plus-cx4lx-partial.txt"
    ),
    "ofed-info": fixture_text("ofed_info/nvpeermem-issue63-mlnx-ofed-4.7-1.0.0.1-s.txt"),
    "ip-addr": fixture_text(IP_SAMPLE),
    "peermem": "",
}

# c4140-1: mlx5_1 Down (not the inventory's HCA), GPUs one NODE hop from the NIC; c4140-2: a Down CX-7
# and every GPU's nearest NIC across the socket (SYS).
SECOND_NODE = {
    "nvidia-smi-topo": fixture_text("nvidia_smi_topo/xuesongtap-4xa10-pcie-sys-2nic-niclegend.txt"),
    "ibstat": fixture_text("ibstat/gpud-pr482-cx7-mt4129-down-polling-rate10-redacted.txt"),
    "ofed-info": fixture_text("ofed_info/nvpeermem-issue63-mlnx-ofed-4.7-1.0.0.1-s.txt"),
    "ip-addr": fixture_text(IP_SAMPLE),
    "peermem": "/sys/module/nvidia_peermem/version\n",
}
