"""NCCL logs read from real captures (tests/fixtures/nccl_logs, nccl_errors), for the tests of the log's
facts and of what a run's log proves about its fabric."""

from __future__ import annotations

from tests.fixtures import fixture_text

# 4 IB HCAs with /SHARP, the HPC-X plugin (IBext, collnet SHARP).
SHARP = fixture_text("nccl_logs/nccl-issue1357-h100-4x-ib-sharp-ibext-rdma-plugin-v6-partial.txt")
# 2 RoCE HCAs, internal IB net, GDR disabled on both with no reason given.
ROCE_GDR_OFF = fixture_text("nccl_logs/nccl-issue1537-2x-roce-gdr-disabled-per-hca-peermem-loaded.txt")
# GDR disabled "(no module)" for HCAs 1-3, channels via NET/IB/0 on two hosts.
NO_MODULE = fixture_text("nccl_logs/nccl-issue899-gdr-disabled-no-module-2-hosts-net-ib-partial.txt")
# aws-ofi-nccl, "DMA-BUF is available on GPU device 0".
DMABUF = fixture_text("nccl_logs/nccl-tests-issue245-a10g-ofi-plugin-dmabuf-available-gdr-disabled.txt")
# NET/IB appears only in WARN lines (completion errors over RoCE).
IB_IN_WARN_ONLY = fixture_text("nccl_errors/nccl-issue1405-net-ib-status12-vendor-err-129-roce.txt")
