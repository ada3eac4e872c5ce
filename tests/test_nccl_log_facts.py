"""The NCCL log's facts beyond transport and channels, each read from a real captured log: link layer
per HCA, the net and its plugins, DMA-BUF, GPUDirect RDMA disabled per HCA, and the transport named
only in WARN lines."""

from __future__ import annotations

import pytest

from clusterctl.diagnostics.parsers.nccl_log import parse_nccl_log
from tests.fixtures import FIXTURES, fixture_text
from tests.helpers.nccl_logs import DMABUF, IB_IN_WARN_ONLY, NO_MODULE, ROCE_GDR_OFF, SHARP
from tests.helpers.strictjson import strict_loads

BONDS_PLUGIN = fixture_text("nccl_logs/nccl-issue1814-8x-roce-bond-ibext-plugin-channels-partial.txt")


def test_link_layer_and_sharp_per_hca() -> None:
    log = parse_nccl_log(SHARP)
    assert log.link_layers == {f"mlx5_{i}:1": "IB" for i in (0, 1, 4, 5)}
    assert log.sharp_hcas == ["mlx5_0:1", "mlx5_1:1", "mlx5_4:1", "mlx5_5:1"]
    assert log.hcas == list(log.link_layers)  # the /IB/SHARP suffix does not leak into the names


def test_roce_link_layer_per_hca() -> None:
    log = parse_nccl_log(ROCE_GDR_OFF)
    assert log.link_layers == {"mlx5_0:1": "RoCE", "mlx5_1:1": "RoCE"}
    assert log.sharp_hcas == []


def test_net_and_plugins_of_the_hpcx_sharp_plugin() -> None:
    log = parse_nccl_log(SHARP)
    assert log.network == "IBext"
    assert log.net_plugin == "NCCL RDMA Plugin v6"
    assert log.collnet_plugin == "SHARP"


def test_internal_net_and_plugin_net_with_version() -> None:
    assert parse_nccl_log(ROCE_GDR_OFF).network == "IB"
    assert parse_nccl_log(ROCE_GDR_OFF).net_plugin is None
    bonds = parse_nccl_log(BONDS_PLUGIN)
    assert bonds.network == "IBext_v8" and bonds.transport == "IB"


def test_gdr_disabled_per_hca_without_a_reason() -> None:
    log = parse_nccl_log(ROCE_GDR_OFF)
    assert log.gdr_disabled == {"mlx5_0": "", "mlx5_1": ""}
    assert log.gdr_enabled == {} and not log.gdr


def test_gdr_disabled_per_hca_with_its_reason() -> None:
    log = parse_nccl_log(NO_MODULE)
    assert log.gdr_disabled == {"mlx5_1": "no module", "mlx5_2": "no module", "mlx5_3": "no module"}
    assert log.hcas_used == {"21346d5cefce": ["NET/IB/0"], "6a5a91752e39": ["NET/IB/0"]}
    assert (log.net_channels, log.gdr_channels) == (11, 0)


def test_dmabuf_available_is_read_per_gpu() -> None:
    log = parse_nccl_log(DMABUF)
    assert log.dmabuf_gpus == [0]
    assert not log.gdr  # DMA-BUF says what the GPU can, not what a channel did
    assert parse_nccl_log(SHARP).dmabuf_gpus == []


def test_transport_named_only_in_error_lines_is_read() -> None:
    """The misfire: a run that failed in NET/IB left only WARN lines, and the transport read as None."""
    log = parse_nccl_log(IB_IN_WARN_ONLY)
    assert log.transport == "IB"
    assert log.transport_from_errors
    assert log.errors  # still errors


def test_transport_from_info_lines_is_not_marked_as_from_errors() -> None:
    assert not parse_nccl_log(ROCE_GDR_OFF).transport_from_errors
    assert parse_nccl_log(DMABUF).transport is None  # NET/OFI: neither IB nor Socket


# --------------------------------------------------------------------------- inspect


def test_inspect_shows_the_net_facts_and_flags_gdr_disabled_and_the_link_layer() -> None:
    from clusterctl.diagnostics.inspect import inspect_text
    from clusterctl.diagnostics.rules import Expectation

    result = inspect_text("log", ROCE_GDR_OFF, expect=Expectation(link_layer="InfiniBand"))
    by_code = {f.code: f for f in result.findings}
    assert "network IB" in by_code["nccl-net"].message
    assert "mlx5_0:1/RoCE, mlx5_1:1/RoCE" in by_code["nccl-net"].message
    assert by_code["nccl-gdr-disabled"].severity == "warning"
    assert "mlx5_0 (no reason given), mlx5_1 (no reason given)" in by_code["nccl-gdr-disabled"].message
    assert "expected link layer is InfiniBand" in by_code["nccl-link-layer-mismatch"].message
    # --json prints the parsed model: the new facts are in it.
    assert result.parsed["link_layers"] == {"mlx5_0:1": "RoCE", "mlx5_1:1": "RoCE"}
    assert result.parsed["gdr_disabled"] == {"mlx5_0": "", "mlx5_1": ""}


def test_inspect_names_plugins_dmabuf_and_a_transport_from_warn_lines() -> None:
    from clusterctl.diagnostics.inspect import inspect_text
    from clusterctl.diagnostics.rules import Expectation

    sharp = {f.code: f.message for f in inspect_text("log", SHARP).findings}["nccl-net"]
    assert "net plugin NCCL RDMA Plugin v6; collnet plugin SHARP" in sharp and "SHARP on 4 HCA(s)" in sharp
    dmabuf = {f.code: f.message for f in inspect_text("log", DMABUF).findings}["nccl-net"]
    assert dmabuf == "DMA-BUF available on GPU 0"
    warn_only = {f.code: f.message for f in inspect_text("log", IB_IN_WARN_ONLY).findings}["nccl-net"]
    assert warn_only == "transport NET/IB (named only in WARN lines)"
    # RoCE on a RoCE (Ethernet) expectation is no mismatch.
    roce = inspect_text("log", ROCE_GDR_OFF, expect=Expectation(link_layer="Ethernet"))
    assert "nccl-link-layer-mismatch" not in {f.code for f in roce.findings}


def _log(name: str) -> str:
    return fixture_text(f"nccl_logs/{name}")


def test_numeric_tuning_lines_name_the_algorithm_and_protocol() -> None:
    """`Algo 1 proto 2` is RING/SIMPLE (no host prefix); `Algo 0 proto 0/1` TREE/LL and TREE/LL128,
    also on the line a table row was glued in front of."""
    ring = parse_nccl_log(_log("nccl-issue1595-numeric-tuning-ring-simple-no-host-prefix-partial.txt"))
    assert ring.algorithms == {"RING/SIMPLE": 5}
    tree = parse_nccl_log(_log("nccl-issue1453-h100-numeric-tuning-tree-ll-ll128-glued-partial.txt"))
    assert tree.algorithms == {"TREE/LL": 3, "TREE/LL128": 3}


def test_named_tuning_lines_are_counted_per_allreduce() -> None:
    log = parse_nccl_log(_log("repo-2x8-roce-nccl2.27-named-tuning-tree-ll-then-ring-simple-partial.txt"))
    # The COLL `opCount` lines are calls, not choices: only the two `-> Algo` lines count.
    assert log.algorithms == {"TREE/LL": 1, "RING/SIMPLE": 1}


def test_nvls_multicast_is_read_at_init() -> None:
    log = parse_nccl_log(_log("nccl-issue1538-h100-nvls-multicast-available-init-partial.txt"))
    assert log.nvls_multicast is True and log.algorithms == {}


def test_a_socket_fallback_named_only_on_channel_lines_is_socket() -> None:
    """Two nodes whose channels all go `via NET/Socket/0`, without a `NET/Socket : Using` line."""
    log = parse_nccl_log(_log("nccl-tests-issue284-2node-socket-fallback-channels-partial.txt"))
    assert log.transport == "Socket" and log.socket_channels == 8 and log.net_channels == 0


def test_each_gpus_nic_and_gdr_come_from_its_channel_lines() -> None:
    """nodea's GPU 4 crossed the network through NET/IB/0 with GDRDMA; the CollNet asked for was
    refused (a WARN), and the P2P lines inside the nodes name no NIC."""
    log = parse_nccl_log(_log("nccl-tests-issue133-2node-collnet-unsupported-channels-gdrdma-partial.txt"))
    assert log.gpu_nics == {"nodea": {4: ["NET/IB/0"]}}
    assert log.gpu_gdr == {"nodea": {4: True}}
    assert any("CollNet is not supported" in w for w in log.warnings)


def test_numeric_tuning_lines_naming_their_collective_are_read_per_collective() -> None:
    """NCCL 2.23's `AllGather: 37756928 Bytes -> Algo 1 proto 2 time ...` under srun labels is an AllGather
    on RING/SIMPLE; the COLL `opCount` lines are calls, not choices, and no AllReduce was logged."""
    log = parse_nccl_log(
        _log("ai-on-eks-slinky-nccl2.23-numeric-tuning-allgather-ring-simple-srun-labels.txt")
    )
    assert log.tuning == {"AllGather": {"RING/SIMPLE": 1}}
    assert log.algorithms == {}


def test_every_tuning_form_is_kept_per_collective() -> None:
    """The named form (2.24+) under its collective; 2.20-2.22's numeric lines, which name none, under ""."""
    named = parse_nccl_log(_log("repo-2x8-roce-nccl2.27-named-tuning-tree-ll-then-ring-simple-partial.txt"))
    assert named.tuning == {"AllReduce": {"TREE/LL": 1, "RING/SIMPLE": 1}}
    numeric = parse_nccl_log(_log("nccl-issue1595-numeric-tuning-ring-simple-no-host-prefix-partial.txt"))
    assert numeric.tuning == {"": {"RING/SIMPLE": 5}}


def test_inspect_says_which_algorithm_and_protocol_each_collective_ran(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clusterctl.cli import main

    path = (
        FIXTURES / "nccl_logs/ai-on-eks-slinky-nccl2.23-numeric-tuning-allgather-ring-simple-srun-labels.txt"
    )
    assert main(["inspect", str(path), "--json"]) == 0
    [result] = strict_loads(capsys.readouterr().out)
    assert result["kind"] == "nccl-log" and result["parsed"]["tuning"] == {"AllGather": {"RING/SIMPLE": 1}}
    [tuning] = [f for f in result["findings"] if f["code"] == "nccl-tuning"]
    assert tuning["message"] == "NCCL chose (algorithm/protocol, calls): AllGather RING/SIMPLE x1"
