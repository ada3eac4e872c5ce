"""Diagnostics: parse real command outputs into models, detect which command printed a text, and turn
the facts into findings.

``parse(kind, text)`` is the one entry point that maps a kind name to its parser.
"""

from __future__ import annotations

from collections.abc import Callable

from clusterctl.diagnostics.detect import KINDS, LOG_KINDS, detect_kind, detect_kinds
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.parsers.dcgmi_diag import parse_dcgmi_diag
from clusterctl.diagnostics.parsers.fabric_counters import parse_counter_output
from clusterctl.diagnostics.parsers.horovod_synthetic import parse_horovod_synthetic
from clusterctl.diagnostics.parsers.ibstat import parse_ibstat
from clusterctl.diagnostics.parsers.ibstatus import parse_ibstatus
from clusterctl.diagnostics.parsers.ibv_devinfo import parse_ibv_devinfo
from clusterctl.diagnostics.parsers.ip_addr import parse_ip_addr
from clusterctl.diagnostics.parsers.kernel_log import parse_kernel_log
from clusterctl.diagnostics.parsers.lspci import parse_lspci
from clusterctl.diagnostics.parsers.modinfo import parse_modinfo
from clusterctl.diagnostics.parsers.mpi_error import parse_mpi_error
from clusterctl.diagnostics.parsers.nccl_log import parse_nccl_log
from clusterctl.diagnostics.parsers.nccl_tests import parse_nccl_tests
from clusterctl.diagnostics.parsers.nvbandwidth import parse_nvbandwidth
from clusterctl.diagnostics.parsers.nvidia_smi import parse_nvidia_smi
from clusterctl.diagnostics.parsers.nvidia_smi_csv import parse_nvidia_smi_csv
from clusterctl.diagnostics.parsers.nvidia_smi_q import parse_nvidia_smi_q
from clusterctl.diagnostics.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from clusterctl.diagnostics.parsers.ofed_info import parse_ofed_info
from clusterctl.diagnostics.parsers.peermem import parse_peermem
from clusterctl.diagnostics.parsers.port_counters import parse_perfquery, parse_sysfs_counters
from clusterctl.diagnostics.parsers.proc_cmdline import parse_proc_cmdline
from clusterctl.diagnostics.parsers.proc_modules import parse_proc_modules
from clusterctl.diagnostics.parsers.tf_cnn_benchmarks import parse_tf_cnn_benchmarks
from clusterctl.errors import InputError

PARSERS: dict[str, Callable[[str], Parsed]] = {
    "nvidia-smi-topo": parse_nvidia_smi_topo,
    "nvidia-smi": parse_nvidia_smi,
    "nvidia-smi-csv": parse_nvidia_smi_csv,
    "ibstat": parse_ibstat,
    "ibstatus": parse_ibstatus,
    "ibv-devinfo": parse_ibv_devinfo,
    "ofed-info": parse_ofed_info,
    "tf-cnn-benchmarks": parse_tf_cnn_benchmarks,
    "horovod-synthetic": parse_horovod_synthetic,
    "nccl-tests": parse_nccl_tests,
    "mpi-error": parse_mpi_error,
    "nccl-log": parse_nccl_log,
    "ip-addr": parse_ip_addr,
    "proc-modules": parse_proc_modules,
    "peermem": parse_peermem,
    "lspci-vvv": parse_lspci,
    "nvidia-smi-q": parse_nvidia_smi_q,
    "perfquery": parse_perfquery,
    "sysfs-counters": parse_sysfs_counters,
    "fabric-counters": parse_counter_output,
    "proc-cmdline": parse_proc_cmdline,
    "kernel-log": parse_kernel_log,
    "dcgmi-diag": parse_dcgmi_diag,
    "nvbandwidth": parse_nvbandwidth,
    "modinfo": parse_modinfo,
}


def parse(kind: str, text: str) -> Parsed:
    """Parse ``text`` as output of ``kind``.

    Raises:
        InputError: ``kind`` is not a known kind (the message lists them).
    """
    parser = PARSERS.get(kind)
    if parser is None:
        raise InputError(f"unknown output kind {kind!r}. Fix: use one of {', '.join(sorted(PARSERS))}.")
    return parser(text)


__all__ = ["KINDS", "LOG_KINDS", "PARSERS", "detect_kind", "detect_kinds", "parse"]
