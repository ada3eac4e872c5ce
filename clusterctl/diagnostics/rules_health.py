"""Health rules: a node's GPU and fabric faults, each with the action that clears it. Pure.

What they judge: Xid and SXid events in the kernel log, `nvidia-smi -q`'s memory error state
(ECC counters, retired pages, remapped rows), clock slowdowns and persistence mode, and the
InfiniBand port error counters, absolute and between two reads (a link that went down and came back
between them flaps). The PCIe link, fabric registration and IB rate rules are the topology ones
(``rules.apply_rules``), which `check health` runs too.

Every finding's ``advice`` starts with the action (reset the GPU, reseat or replace the cable,
drain the node, call the vendor) and then says why; the codes are stable.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.diagnostics.parsers.kernel_log import GpuEvent, KernelLog
from clusterctl.diagnostics.parsers.nvidia_smi_q import NvidiaSmiQ, SmiQGpu
from clusterctl.diagnostics.parsers.port_counters import PortCount, PortCounters
from clusterctl.findings import Finding, Severity


@dataclass(frozen=True)
class XidAction:
    """What an Xid means and what to do: NVIDIA's Xid catalog, "Xid Errors" (docs.nvidia.com/deploy/xid-errors)."""

    severity: Severity
    meaning: str
    action: str


_RESET = "Reset the GPU (`nvidia-smi -r -i <bus id>` once no process uses it) or reboot the node"
_DRAIN_RESET = "Drain the node, then reset the GPU or reboot it"
_VENDOR = "if it comes back after the reset, drain the node and call the vendor (RMA)"
_CALL = "call the vendor (RMA) if it repeats"
# The Xids the field acts on (NVIDIA's catalog; Azure HPC health checks and gpud treat the same set as
# node faults). Others are usually the application's, and get a warning with the catalog's pointer.
XID_ACTIONS: dict[int, XidAction] = {
    13: XidAction("warning", "graphics engine exception", "Usually the application (out-of-range access); "
                  "if it repeats on this GPU only, run `dcgmi diag -r 2` on it"),
    31: XidAction("warning", "GPU memory page fault", "Usually the application (illegal address); if other "
                  "applications fault on this GPU too, run `dcgmi diag -r 2` on it"),
    43: XidAction("warning", "GPU stopped processing", "Usually the application; check its log"),
    45: XidAction("info", "preemptive cleanup (a process was killed)", "Nothing, unless other Xids precede it"),
    48: XidAction("error", "double-bit ECC error", f"{_RESET}; {_VENDOR}"),
    61: XidAction("error", "internal micro-controller breakpoint", f"{_RESET}; {_VENDOR}"),
    62: XidAction("error", "internal micro-controller halt", f"{_RESET}; {_VENDOR}"),
    63: XidAction("warning", "ECC page retirement or row remap recorded",
                  "Drain the node and reset the GPU so the retirement/remap takes effect"),
    64: XidAction("error", "ECC page retirement or row remap failed", f"Drain the node and {_CALL}"),
    74: XidAction("error", "NVLink error", f"{_RESET}; check the NVLink bridge/baseboard and {_CALL}"),
    79: XidAction("error", "GPU has fallen off the bus", "Drain the node and reboot it; check the GPU's seating, "
                  f"power and PCIe riser; {_VENDOR}"),
    92: XidAction("warning", "high single-bit ECC error rate", "Watch it; if it persists, reset the GPU and "
                  "run `dcgmi diag -r 3`"),
    94: XidAction("warning", "contained ECC error", "Reset the GPU when its jobs end (the error was contained "
                  "to one application)"),
    95: XidAction("error", "uncontained ECC error", f"{_DRAIN_RESET}; {_CALL}"),
    119: XidAction("error", "GSP RPC timeout", f"{_RESET}; update the driver (GSP firmware) and {_CALL}"),
    120: XidAction("error", "GSP error", f"{_RESET}; {_VENDOR}"),
    140: XidAction("error", "unrecovered ECC error", f"{_DRAIN_RESET}; {_CALL}"),
}  # fmt: skip
_XID_CATALOG = "NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) says what it means"

# The IB port error counters, sysfs name -> (perfquery name, label). All are physical-layer or
# buffer errors that a bad cable, transceiver or port produces (IBA PortCounters).
PORT_ERRORS: dict[str, tuple[str, str]] = {
    "symbol_error": ("SymbolErrorCounter", "symbol errors"),
    "link_error_recovery": ("LinkErrorRecoveryCounter", "link error recoveries"),
    "link_downed": ("LinkDownedCounter", "link downed"),
    "port_rcv_errors": ("PortRcvErrors", "receive errors"),
    "port_rcv_remote_physical_errors": ("PortRcvRemotePhysicalErrors", "remote physical errors"),
    "local_link_integrity_errors": ("LocalLinkIntegrityErrors", "local link integrity errors"),
    "excessive_buffer_overrun_errors": ("ExcessiveBufferOverrunErrors", "excessive buffer overruns"),
}
# The widest value each counter holds (IBA PortCounters: SymbolErrorCounter 16 bits, LinkDownedCounter 8,
# LocalLinkIntegrityErrors 4, PortXmitData 32, ...). A counter there has saturated: it stops counting,
# so a rise cannot be seen. The 64-bit data counters of sysfs and `perfquery -x` never reach 2**32 - 1
# by saturating, but a 32-bit one read through them sits at exactly that value.
COUNTER_MAX: dict[str, int] = {
    **{name: 0xFFFF for name in ("symbol_error", "port_rcv_errors", "port_rcv_remote_physical_errors")},
    **{name: 0xFF for name in ("link_error_recovery", "link_downed")},
    **{name: 0xF for name in ("local_link_integrity_errors", "excessive_buffer_overrun_errors")},
    **{
        name: 0xFFFFFFFF
        for name in ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets")
    },
}
COUNTER_MAX |= {PORT_ERRORS[name][0]: width for name, width in COUNTER_MAX.items() if name in PORT_ERRORS}
COUNTER_MAX |= {"PortXmitData": 0xFFFFFFFF, "PortRcvData": 0xFFFFFFFF, "PortXmitPkts": 0xFFFFFFFF,
                "PortRcvPkts": 0xFFFFFFFF}  # fmt: skip
_CABLE = (
    "Reseat or replace the cable (or transceiver) of this port, then clear the counters "
    "(`perfquery -x -R -C <hca> -P <port>`) and check again"
)
# Clock slowdowns (nvidia-smi "Clocks Event Reasons", "Clocks Throttle Reasons" before driver 535) that
# mean a fault outside the application, and what to look at. Idle, SW Power Cap (the board's own power
# limit under load), Sync Boost and Applications Clocks Setting are normal operation.
SLOWDOWNS: dict[str, str] = {
    "HW Slowdown": "Check the node's power supplies and cooling; if it persists with both fine, call the vendor",
    "HW Thermal Slowdown": "Check the GPU's cooling (fans, airflow, inlet temperature)",
    "HW Power Brake Slowdown": "Check the node's power supplies: the power brake is an external signal that "
    "the PSUs or the chassis raise",
    "SW Thermal Slowdown": "Check the GPU's cooling (fans, airflow, inlet temperature)",
}
_REASONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")


def _gpu_name(gpu: SmiQGpu) -> str:
    return f"GPU {gpu.bus_id}" if gpu.bus_id else "a GPU"


def _attr(gpu: SmiQGpu, path: str) -> str | None:
    value = gpu.attributes.get(path)
    return value if value not in (None, "", "N/A", "Not Supported") else None


def _count(value: str | None) -> int:
    """A counter value; 0 for N/A or anything that is not a number."""
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def gpu_count_rule(report: NvidiaSmiQ, expected: int, node: str | None) -> list[Finding]:
    """An error when `nvidia-smi -q` says fewer GPUs are attached than the inventory gives the node (one
    fell off the bus, or its driver did not attach it), a warning when more. A report whose GPU sections
    do not match its own "Attached GPUs" line (cut short) or that lacks the line gives a warning with
    code ``gpu-count-unknown`` instead: a partial output is no evidence of a lost GPU. None when it
    printed an error instead (its section says so)."""
    listed, attached = len(report.gpus), report.attached_gpus
    if report.error:
        return []
    if attached != listed:
        said = f"says {attached} are attached" if attached is not None else "prints no Attached GPUs line"
        return [
            Finding(
                severity="warning",
                code="gpu-count-unknown",
                message=f"nvidia-smi -q lists {listed} GPUs but {said} (a partial output), so the GPU count "
                "is unknown",
                advice="Run `nvidia-smi -q` on the node by hand: an output cut short hides what it did not print.",
                node=node,
            )
        ]
    if listed == expected:
        return []
    fewer = listed < expected
    return [
        Finding(
            severity="error" if fewer else "warning",
            code="gpu-count-mismatch",
            message=f"nvidia-smi -q lists {listed} GPUs; the inventory gives this node {expected}",
            advice="Drain the node and look for the missing GPU: dmesg (Xid 79: fallen off the bus), `nvidia-smi "
            "-L`, `lspci | grep -i nvidia`; reseat or replace it. If the node really has fewer GPUs, set its "
            "gpus.count in the inventory."
            if fewer
            else "Set the node's gpus.count in the inventory to what it has, so every GPU is checked and used.",
            node=node,
        )
    ]


def kernel_log_unknown(log: KernelLog, node: str | None) -> list[Finding]:
    """A warning (code ``kernel-log-unreadable``) when the log printed a refusal, or lines that name an
    Xid or SXid but could not be read as one: an event nobody read must not pass for none."""
    if log.error is None and not log.unparsed_lines:
        return []
    why = (
        f"dmesg printed {log.error[:200]!r} instead of the log"
        if log.error
        else f"{len(log.unparsed_lines)} lines name an Xid or SXid but could not be read as one (the first: "
        f"{log.unparsed_lines[0][:160]!r})"
    )
    return [
        Finding(
            severity="warning",
            code="kernel-log-unreadable",
            message=f"{why}, so the node's GPU events are unknown",
            advice="Read the node's `dmesg | grep Xid` by hand; a line in a form this check does not read (or "
            "damaged, with NUL bytes) may be a fault. Report its form so it can be read.",
            node=node,
        )
    ]


def xid_rules(log: KernelLog, node: str | None) -> list[Finding]:
    """One finding per (kind, code, device) of the Xid and SXid events since boot, with its action."""
    groups: dict[tuple[str, int, str], list[GpuEvent]] = {}
    for event in log.events:
        groups.setdefault((event.kind, event.code, event.device), []).append(event)
    findings = []
    for (kind, code, device), events in groups.items():
        last = next((e for e in events if e.fatal), events[-1])
        times = f"{len(events)} event{'s' * (len(events) > 1)}"
        if kind == "sxid":
            fatal = any(e.fatal for e in events)
            findings.append(
                Finding(
                    severity="error" if fatal else "warning",
                    code=f"sxid-{code}",
                    message=f"SXid {code} on NVSwitch {device} ({times}, {'fatal' if fatal else 'non-fatal'}): "
                    f"{last.detail[:200]}",
                    advice=(
                        "Drain the node and reboot it (the NVSwitch links and the GPUs behind them are reset "
                        "together); if it repeats, call the vendor. "
                        if fatal
                        else "Watch it: a non-fatal SXid that repeats on one link points at that link's "
                        "NVSwitch or baseboard. "
                    )
                    + "The NVIDIA Fabric Manager user guide lists every SXid.",
                    node=node,
                )
            )
            continue
        action = XID_ACTIONS.get(code)
        meaning = action.meaning if action else "see the catalog"
        findings.append(
            Finding(
                severity=action.severity if action else "warning",
                code=f"xid-{code}",
                message=f"Xid {code} ({meaning}) on GPU {device} ({times} since boot): {last.detail[:200]}",
                advice=f"{action.action}. {_XID_CATALOG}."
                if action
                else f"Look the code up: {_XID_CATALOG}.",
                node=node,
            )
        )
    return findings


def memory_rules(gpu: SmiQGpu, node: str | None) -> list[Finding]:
    """Remapped rows pending or failed, retired pages pending, uncorrectable ECC errors."""
    name, findings = _gpu_name(gpu), []
    if _attr(gpu, "Remapped Rows/Remapping Failure Occurred") == "Yes":
        findings.append(
            Finding(
                severity="error",
                code="gpu-row-remap-failed",
                message=f"{name}: row remapping failed (no spare rows left in a bank)",
                advice="Drain the node and call the vendor (RMA): the GPU can no longer mask its bad memory. "
                "NVIDIA's A100/H100 memory error management guide.",
                node=node,
            )
        )
    if _attr(gpu, "Remapped Rows/Pending") == "Yes":
        uncorrectable = _count(_attr(gpu, "Remapped Rows/Uncorrectable Error"))
        findings.append(
            Finding(
                severity="error",
                code="gpu-row-remap-pending",
                message=f"{name}: a row remap is pending ({uncorrectable} rows remapped for uncorrectable "
                "errors); the bad row is still in use until the GPU is reset",
                advice="Drain the node, then reset the GPU (`nvidia-smi -r -i <bus id>`) or reboot so the remap "
                "takes effect; if the pending state comes back after resets, call the vendor.",
                node=node,
            )
        )
    if (
        _attr(gpu, "Retired Pages/Pending Page Blacklist") == "Yes"
        or _attr(gpu, "Retired Pages/Pending Page Retirement") == "Yes"
    ):
        findings.append(
            Finding(
                severity="error",
                code="gpu-page-retirement-pending",
                message=f"{name}: a retired memory page is pending; it is still in use until the GPU is reset",
                advice="Drain the node, then reset the GPU or reboot so the page is retired.",
                node=node,
            )
        )
    volatile = _ecc(gpu, "Volatile")
    aggregate = _ecc(gpu, "Aggregate")
    if volatile:
        findings.append(
            Finding(
                severity="error",
                code="gpu-ecc-uncorrectable",
                message=f"{name}: {sum(volatile.values())} uncorrectable ECC errors since the driver loaded "
                f"({', '.join(f'{k} {v}' for k, v in volatile.items())})",
                advice="Drain the node and reset the GPU; a job on it may have computed on corrupted memory. "
                "If they come back, call the vendor.",
                node=node,
            )
        )
    elif aggregate:
        findings.append(
            Finding(
                severity="info",
                code="gpu-ecc-uncorrectable-history",
                message=f"{name}: {sum(aggregate.values())} uncorrectable ECC errors over the GPU's life, none "
                "since the driver loaded",
                advice="Nothing now; a count that grows between checks means the memory is failing.",
                node=node,
            )
        )
    return findings


def _ecc(gpu: SmiQGpu, scope: str) -> dict[str, int]:
    """Uncorrectable ECC counts of ``scope`` (Volatile or Aggregate) by location, non-zero only.

    Drivers name them "DRAM Uncorrectable", "SRAM Uncorrectable Parity" (535+) or "Double Bit/Device
    Memory" (older); only the scope's own counters are read, not its per-source breakdown.
    """
    prefix = f"ECC Errors/{scope}/"
    counts = {
        path.removeprefix(prefix): _count(value)
        for path, value in gpu.attributes.items()
        if path.startswith(prefix)
        and ("Uncorrectable" in path or "Double Bit" in path)
        and "Total" not in path
    }
    return {k: v for k, v in counts.items() if v > 0}


def clock_rules(gpu: SmiQGpu, node: str | None) -> list[Finding]:
    """Clock slowdowns that mean a power or cooling fault, and persistence mode off."""
    findings = []
    active = [
        reason
        for reason in SLOWDOWNS
        if any(_attr(gpu, path) == "Active" for path in (f"{group}/{reason}" for group in _REASONS))
    ]
    if active:
        findings.append(
            Finding(
                severity="warning",
                code="gpu-clocks-slowed",
                message=f"{_gpu_name(gpu)}: clocks slowed by {', '.join(active)}",
                advice=f"{SLOWDOWNS[active[0]]}. A slowed GPU holds back every collective it is part of.",
                node=node,
            )
        )
    if _attr(gpu, "Persistence Mode") == "Disabled":
        findings.append(
            Finding(
                severity="warning",
                code="gpu-persistence-off",
                message=f"{_gpu_name(gpu)}: persistence mode is off",
                advice="Enable it (`nvidia-smi -pm 1`, or run nvidia-persistenced): without it the driver "
                "tears the GPU down between jobs, each job start pays the initialisation and health state "
                "(pending remaps, ECC counts) can be lost.",
                node=node,
            )
        )
    return findings


def smi_health_rules(report: NvidiaSmiQ, node: str | None) -> list[Finding]:
    """Every GPU's memory, clock and persistence findings from `nvidia-smi -q`."""
    return [f for gpu in report.gpus for f in (*memory_rules(gpu, node), *clock_rules(gpu, node))]


def _port_name(port: PortCount) -> str:
    return f"{port.device or 'port'}:{port.port}"


def port_error_counts(port: PortCount) -> dict[str, int]:
    """The port's error counters by sysfs name, from sysfs or perfquery names."""
    counts = {}
    for name, (perfquery, _) in PORT_ERRORS.items():
        value = port.counters.get(name, port.counters.get(perfquery))
        if value is not None:
            counts[name] = value
    return counts


def port_counter_gaps(first: PortCounters, second: PortCounters | None, node: str | None) -> list[Finding]:
    """Warnings (code ``ib-port-counters-unknown``) for what makes the two reads unable to show a rise: a
    port or counter of the first read that is gone from the second (or no second read), a counter that
    went down between them (cleared while we watched), one at its maximum (saturated: it stopped
    counting), and lines of either read that could not be read as counters."""
    later = {_port_name(p): p for p in second.ports} if second else {}
    gaps: list[str] = []
    unread = len(first.unparsed_lines) + (len(second.unparsed_lines) if second else 0)
    if unread:
        gaps.append(f"{unread} lines of the counter reads could not be read")
    if first.ports and second is None:
        gaps.append("the second read gave nothing")
    for port in first.ports:
        name = _port_name(port)
        after = later.get(name)
        if second is not None and after is None:
            gaps.append(f"{name} is gone from the second read")
            continue
        gone = sorted(set(port.counters) - set(after.counters)) if after else []
        down = sorted(
            k for k, v in port.counters.items() if after and k in after.counters and after.counters[k] < v
        )
        full = sorted(
            k
            for p in (port, after)
            if p
            for k, v in p.counters.items()
            if k in COUNTER_MAX and v == COUNTER_MAX[k]
        )
        for what, names in (("gone from the second read", gone), ("went down between the reads (cleared?)", down),
                            ("at its maximum (saturated)", sorted(set(full)))):  # fmt: skip
            if names:
                gaps.append(f"{name} {', '.join(names[:4])}{' ...' * (len(names) > 4)} {what}")
    if not gaps:
        return []
    return [
        Finding(
            severity="warning",
            code="ib-port-counters-unknown",
            message="port errors and flaps are unknown: "
            + "; ".join(gaps[:3])
            + (" ..." if len(gaps) > 3 else ""),
            advice="Clear the port counters (`perfquery -x -R -C <hca> -P <port>`) so they count again, and check "
            "that the HCA driver stays loaded; then check again.",
            node=node,
        )
    ]


def port_error_rules(
    first: PortCounters, second: PortCounters | None, window_s: float, node: str | None
) -> list[Finding]:
    """IB port errors: counters that rose between two reads (a flap: link_downed rose), and counts since reset.

    A count since the counters were last cleared is history (info); a count that rises while we watch is
    a fault now: link_downed is an error (the link went down and came back), the others a warning.
    """
    findings = []
    later = {_port_name(p): p for p in second.ports} if second else {}
    for port in first.ports:
        name, before = _port_name(port), port_error_counts(port)
        after = port_error_counts(later[name]) if name in later else {}
        rose = {k: after[k] - v for k, v in before.items() if k in after and after[k] > v}
        if rose:
            flapped = "link_downed" in rose
            findings.append(
                Finding(
                    severity="error" if flapped else "warning",
                    code="ib-port-flapping" if flapped else "ib-port-errors-rising",
                    message=f"{name}: "
                    + ", ".join(f"{PORT_ERRORS[k][1]} +{v}" for k, v in rose.items())
                    + f" within {window_s:g} s",
                    advice=f"{_CABLE}. "
                    + (
                        "The link went down and came back while we watched: every job using it stalls or "
                        "fails when it does. Drain the node until it holds."
                        if flapped
                        else "Errors that rise while idle mean a marginal link that will slow or break jobs."
                    ),
                    node=node,
                )
            )
        elif any(before.values()):
            findings.append(
                Finding(
                    severity="info",
                    code="ib-port-error-history",
                    message=f"{name}: "
                    + ", ".join(f"{PORT_ERRORS[k][1]} {v}" for k, v in before.items() if v)
                    + " since the counters were last cleared; none while we watched",
                    advice="Nothing now. Clear them (`perfquery -x -R`) so a later rise stands out.",
                    node=node,
                )
            )
    return findings
