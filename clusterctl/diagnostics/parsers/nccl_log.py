"""NCCL debug log (NCCL_DEBUG=INFO/WARN): which network transport was used, whether GPUDirect RDMA
was, which HCAs, and the warnings and failures.

``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ...`` lists the HCAs NCCL may use on that host (after
NCCL_IB_HCA), ``NET/Socket : Using`` the TCP fallback NCCL takes silently when the verbs libraries or
/dev/infiniband are missing (horovod#288). Which HCAs carry traffic is on the channel lines:
``Channel 03/0 : 8[0] -> 3[3] [send] via NET/IB/4/GDRDMA`` (``Ring`` before NCCL 2.6, ``NET/IBext_v8/4``
with a net plugin) goes through device 4 of that host's list, with GPUDirect RDMA when ``/GDRDMA``
follows. The host is the ``host:pid:tid`` prefix NCCL puts on every line.

Each HCA of the Using list carries its link layer (``/IB`` or ``/RoCE``, then ``/SHARP`` when the
HPC-X plugin can use SHARP on it). Which net NCCL chose is ``Using network IB`` (``IBext``,
``IBext_v8``: the nccl-rdma-sharp plugin; ``Socket``...); a plugin says ``Loaded net plugin <name>``
and ``Loaded collnet plugin SHARP``. GPUDirect RDMA: ``DMA-BUF is available on GPU device N``
(src/init.cc, 2.13+: NCCL can do GDR without a peer-memory module; it says what the GPU can, not
what a channel did), and per HCA ``GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)``
(net_ib.cc; newer releases drop the reason) or ``GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0``.
A run that failed early may name its transport only in WARN lines (``NET/IB : Got completion ...``).

With ``NCCL_DEBUG_SUBSYS`` INIT and TUNING the log also says how NCCL ran each collective call
(src/enqueue.cc, printed by rank 0), in one of three forms: named, NCCL 2.24+,
``AllReduce: 4 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..0}``; numeric with the collective,
2.23, ``AllGather: 37756928 Bytes -> Algo 1 proto 2 time 2860.208008``; numeric alone, 2.20-2.22,
``262144 Bytes -> Algo 0 proto 1 time 54.707825`` (the numbers are the indexes of NCCL's
``NCCL_ALGO_*``/``NCCL_PROTO_*`` in src/include/nccl_common.h: ``ALGORITHMS`` and ``PROTOCOLS`` below). Every
collective is read (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce...): ``tuning`` per
collective, ``algorithms`` the AllReduce calls (a numeric line without a collective counts there); ``NVLS multicast support is (not) available on dev N`` at init; ``Channel 00/02 :    0   1``
the ring channels (``NN/MM``: channel NN of MM). Which GPU a line speaks of is the ``[cudaDev]``
after the host prefix, so a channel line also says which HCA NCCL gave that GPU.
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed, split_tag

_NCCL_LINE = re.compile(r"\bNCCL (INFO|WARN)\b\s?(.*)$")
_IB_USING = re.compile(r"NET/IB\s*:\s*Using\s+(.*?)(?:\s*;\s*OOB.*)?$")
_SOCKET_USING = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)$")
_HCA = re.compile(r"\[(\d+)\]([\w.-]+:\d+)((?:/\w+)*)")
# Greedy to the line's end, the version suffix "(v6)" cut after: no backtracking on long lines.
_NETWORK = re.compile(r"^Using network (\S.*)")
_NET_PLUGIN = re.compile(r"Loaded (net|collnet) plugin (\S.*)")
_PLUGIN_VERSION = re.compile(r"\(v\d+\)$")
_PLUGIN_ENV = re.compile(r"NCCL_NET_PLUGIN set by environment to (\S+)")
_DMABUF = re.compile(r"DMA-BUF is available on GPU device (\d{1,9})\b")
# net_ib.cc / the plugin's p2p_plugin.c (its net named "IB" or "NCCL RDMA Plugin v10"): "(DMABUF)
# enabled", "(nvidia-peermem) enabled", "Disabled ... (no module)"; the enabled lines lack the closing quote.
_GDR_HCA = re.compile(
    r"^NET/(?!Socket)([^:]*):\s*GPU Direct RDMA (?:\(([\w-]+)\) )?(enabled?|disabled)\s+for HCA \d+ "
    r"'([^'\s]+)'?(?:\s*\(([^)]*)\))?",
    re.I,
)
# A transport named in a WARN line: the only trace of it when a run failed before its INFO lines.
_WARN_TRANSPORT = re.compile(r"\bNET/(IB\w*|Socket)\b")
# `host:pid:tid [cudaDev] NCCL ...`: the host whose devices a line speaks of, and the GPU.
_HOST = re.compile(r"^\s*(?:\[\d+\]\s*)?([^\s:\[\]]+):\d+:\d+\s+\[(\d{1,4})\]\s*$")
# A channel (ring) that crosses the network: the net's name, the device index, whether GDRDMA.
_NET_CHANNEL = re.compile(
    r"\b(?:Channel|Ring)\s+\d+(?:/\d+)?\s*:.*\bvia NET/(\w+)/(\d+)(?:\(\d+\))?(/GDRDMA)?"
)
_SOCKET_CHANNEL = re.compile(r"\b(?:Channel|Ring)\s+\d+(?:/\d+)?\s*:.*\bvia NET/Socket/\d+")
# A ring's layout at init: `Channel 00/02 :    0   1   2   3` (channel 0 of 2), no `via`.
_RING_LAYOUT = re.compile(r"^Channel\s+\d+/(\d{1,3})\s*:(?:\s+\d+)+\s*$")
# The algorithm and protocol chosen for one collective call (TUNING): named (2.20+) or numeric.
_TUNING = re.compile(
    r"^(?:(?P<coll>[A-Za-z]+):\s*)?(?P<bytes>\d{1,20}) Bytes -> Algo (?P<algo>\w{1,20}) proto (?P<proto>\w{1,20})\b"
)
_NVLS = re.compile(r"^NVLS multicast support is (not )?available on dev (\d{1,4})\b")
_NODES = re.compile(r"\bnRanks \d+ nNodes (\d{1,6})\b")
# NCCL's algorithm and protocol indexes (NCCL_ALGO_* and NCCL_PROTO_*, src/include/nccl_common.h at v2.20.3
# and v2.23.4, the releases whose INFO lines print numbers): TREE 0, RING 1, COLLNET_DIRECT 2, COLLNET_CHAIN 3,
# NVLS 4, NVLS_TREE 5, PAT 6 (2.23); LL 0, LL128 1, SIMPLE 2. Index 2 was plain COLLNET before 2.12 split it.
ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")
_GDR = re.compile(r"via NET/\w+/\d+/GDRDMA|GPU Direct RDMA Enabled|GDRDMA")
_VERSION = re.compile(r"NCCL version\s+v?([\d.]+(?:\+\S+)?)")
_FAILURE = re.compile(r"NCCL (?:failure|error)\b|RuntimeError: NCCL|ncclSystemError|unhandled \w+ error")


class NcclLog(Parsed):
    """Facts read from an NCCL log."""

    transport: str | None = Field(None, description='"IB", "Socket", or None when neither was reported.')
    gdr: bool = Field(False, description="A channel used GPUDirect RDMA (GDRDMA).")
    hcas: list[str] = Field(
        default_factory=list,
        description='HCA ports NCCL listed as usable (NET/IB : Using), e.g. ["mlx5_0:1"].',
    )
    hcas_used: dict[str, list[str]] = Field(
        default_factory=dict,
        description='Per host ("" when the lines carry none): the HCA ports its network channels went '
        "through, named from that host's NET/IB : Using list, else 'NET/<net>/<index>'.",
    )
    net_channels: int = Field(0, description="Channel lines over an IB-type net (NET/IB, NET/IBext...).")
    gdr_channels: int = Field(0, description="Of those, the ones that say /GDRDMA.")
    link_layers: dict[str, str] = Field(
        default_factory=dict, description='Per HCA port of the Using lists: "IB" or "RoCE".'
    )
    sharp_hcas: list[str] = Field(default_factory=list, description="HCA ports listed with /SHARP.")
    network: str | None = Field(None, description='"Using network X": IB, IBext, IBext_v8, Socket...')
    net_plugin: str | None = Field(
        None, description="The external net plugin: 'Loaded net plugin X', else NCCL_NET_PLUGIN's value."
    )
    collnet_plugin: str | None = Field(None, description="'Loaded collnet plugin X', e.g. SHARP.")
    dmabuf_gpus: list[int] = Field(
        default_factory=list, description="GPU devices NCCL said DMA-BUF is available on (NCCL 2.13+)."
    )
    gdr_enabled: dict[str, str] = Field(
        default_factory=dict,
        description='HCAs NCCL enabled GPUDirect RDMA on, with how ("DMABUF", "nvidia-peermem", "").',
    )
    gdr_disabled: dict[str, str] = Field(
        default_factory=dict,
        description='HCAs NCCL disabled GPUDirect RDMA on, with the reason it gave ("no module", "" when none).',
    )
    transport_from_errors: bool = Field(
        False, description="The transport is known only from WARN lines (NET/IB ... in an error)."
    )
    socket_interfaces: list[str] = Field(default_factory=list, description="Interfaces of NET/Socket.")
    ib_no_device: bool = Field(False, description="`NET/IB : No device found.` was printed.")
    algorithms: dict[str, int] = Field(
        default_factory=dict,
        description='AllReduce calls per algorithm/protocol NCCL chose (TUNING lines), e.g. {"RING/SIMPLE": 40}; '
        "a numeric line that names no collective (NCCL 2.20-2.22) counts here.",
    )
    tuning: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Per collective, the calls per algorithm/protocol NCCL chose, named or numeric form, e.g. "
        '{"AllGather": {"RING/SIMPLE": 1}}; "" for numeric lines that name no collective.',
    )
    nvls_multicast: bool | None = Field(
        None, description="NVLS multicast support available (True) or not (False); None: not said."
    )
    channels: int | None = Field(None, description="Ring channels NCCL set up (`Channel 00/NN`), the most.")
    nodes: int | None = Field(None, description="nNodes of the communicator (INIT `comm ... nNodes N`).")
    gpu_nics: dict[str, dict[int, list[str]]] = Field(
        default_factory=dict,
        description="Per host, per GPU (cudaDev): the HCA ports its network channels went through.",
    )
    gpu_gdr: dict[str, dict[int, bool]] = Field(
        default_factory=dict,
        description="Per host, per GPU: whether every one of its network channels said /GDRDMA.",
    )
    socket_channels: int = Field(0, description="Channel lines over NET/Socket (TCP).")
    nccl_version: str | None = None
    warnings: list[str] = Field(default_factory=list, description="NCCL WARN messages.")
    errors: list[str] = Field(default_factory=list, description="WARN messages and NCCL failures.")


def parse_nccl_log(text: str) -> NcclLog:
    """Parse an NCCL debug log, alone or mixed into a benchmark's output (rank tags allowed).

    Args:
        text: The log, as printed.

    Returns:
        Transport, GDR, HCAs, version and errors; non-NCCL lines go to ``unparsed_lines``.
    """
    result = NcclLog()
    devices: dict[str, dict[str, str]] = {}  # host -> device index -> HCA port, from its Using line
    channel_devices: dict[str, list[tuple[str, str]]] = {}  # host -> (net, device index) its channels used
    gpu_channels: dict[str, dict[int, list[tuple[str, str, bool]]]] = {}  # host -> GPU -> (net, index, gdr)
    for raw in text.splitlines():
        _, line = split_tag(raw)
        if not line.strip():
            continue
        if m := _VERSION.search(line):
            result.nccl_version = m.group(1)
        match = _NCCL_LINE.search(line)
        if match is None:
            if _FAILURE.search(line):
                result.errors.append(line.strip())
            elif not _VERSION.search(line):
                result.unparsed_lines.append(raw)
            continue
        level, message = match.groups()
        host = _HOST.match(line[: match.start()])
        name, gpu = (host.group(1), int(host.group(2))) if host else ("", None)
        _read_message(result, level, message.strip(), name, devices)
        if level == "INFO":
            _read_init_and_tuning(result, message.strip())
        if level == "INFO" and (channel := _NET_CHANNEL.search(message)) and channel.group(1) != "Socket":
            net, index, gdr = channel.groups()
            used = channel_devices.setdefault(name, [])
            if (net, index) not in used:
                used.append((net, index))
            if gpu is not None:
                by_gpu = gpu_channels.setdefault(name, {}).setdefault(gpu, [])
                by_gpu.append((net, index, bool(gdr)))
            result.net_channels += 1
            result.gdr_channels += bool(gdr)
        elif level == "INFO" and _SOCKET_CHANNEL.search(message):
            result.socket_channels += 1
    for host_name, used in channel_devices.items():
        names = _host_devices(devices, host_name)
        result.hcas_used[host_name] = [names.get(index, f"NET/{net}/{index}") for net, index in used]
    for host_name, gpus in gpu_channels.items():
        names = _host_devices(devices, host_name)
        for gpu, channels in sorted(gpus.items()):
            nics = list(dict.fromkeys(names.get(index, f"NET/{net}/{index}") for net, index, _ in channels))
            result.gpu_nics.setdefault(host_name, {})[gpu] = nics
            result.gpu_gdr.setdefault(host_name, {})[gpu] = all(gdr for _, _, gdr in channels)
    if result.hcas or result.net_channels:
        result.transport = "IB"
    elif result.socket_interfaces or result.socket_channels:
        result.transport = "Socket"
    else:
        result.transport = _transport_in_errors(result.warnings)
        result.transport_from_errors = result.transport is not None
    return result


def _host_devices(devices: dict[str, dict[str, str]], host: str) -> dict[str, str]:
    """The device index -> HCA port names of ``host``'s Using line (the only list when there is one)."""
    return devices.get(host) or (next(iter(devices.values())) if len(devices) == 1 else {})


def _read_init_and_tuning(result: NcclLog, message: str) -> None:
    """The algorithm/protocol of a collective call, NVLS multicast, ring channels and node count."""
    if m := _TUNING.match(message):
        key = f"{_named(m.group('algo'), ALGORITHMS)}/{_named(m.group('proto'), PROTOCOLS)}"
        chosen = result.tuning.setdefault(m.group("coll") or "", {})
        chosen[key] = chosen.get(key, 0) + 1
        if m.group("coll") in (None, "AllReduce"):  # 2.20-2.22's numeric lines name no collective
            result.algorithms[key] = result.algorithms.get(key, 0) + 1
    elif m := _NVLS.match(message):
        result.nvls_multicast = bool(result.nvls_multicast) or m.group(1) is None
    elif m := _RING_LAYOUT.match(message):
        result.channels = max(result.channels or 0, int(m.group(1)))
    elif m := _NODES.search(message):
        result.nodes = int(m.group(1))


def _named(value: str, names: tuple[str, ...]) -> str:
    """An algorithm or protocol as NCCL names it: ``1`` -> ``RING``, ``Simple`` -> ``SIMPLE``."""
    if value.isascii() and value.isdigit():  # \w also matches digits such as '²', which int() refuses
        return names[int(value)] if int(value) < len(names) else f"#{value}"
    return value.upper()


def gdr_disabled_in_words(gdr_disabled: dict[str, str]) -> str:
    """``{"mlx5_1": "no module", "mlx5_0": ""}`` as "mlx5_1 (no module), mlx5_0 (no reason given)"."""
    return ", ".join(f"{hca} ({reason or 'no reason given'})" for hca, reason in gdr_disabled.items())


# What to do about an HCA NCCL disabled GPUDirect RDMA on; the run judge and inspect both say it.
GDR_DISABLED_ADVICE = (
    "'no module': load nvidia_peermem (it needs MLNX_OFED/DOCA-OFED's ib_core, not the inbox stack), or "
    "use DMA-BUF (NCCL 2.13+, Linux 5.12+, open GPU kernel modules); `clusterctl check topology` probes both"
)


def _transport_in_errors(warnings: list[str]) -> str | None:
    """The transport the WARN lines name (IB before Socket), or None."""
    named = {m.group(1) for w in warnings for m in _WARN_TRANSPORT.finditer(w)}
    if any(n.startswith("IB") for n in named):
        return "IB"
    return "Socket" if "Socket" in named else None


def _read_message(
    result: NcclLog, level: str, message: str, host: str, devices: dict[str, dict[str, str]]
) -> None:
    if level == "WARN":
        result.warnings.append(message)
        result.errors.append(message)
        return
    if m := _IB_USING.search(message):
        listed = _HCA.findall(m.group(1))
        result.hcas.extend(h for _, h, _ in listed if h not in result.hcas)
        for _, port, flags in listed:
            layers = [f for f in flags.split("/") if f in ("IB", "RoCE")]
            if layers:
                result.link_layers[port] = layers[0]
            if "/SHARP" in flags and port not in result.sharp_hcas:
                result.sharp_hcas.append(port)
        # A net plugin (NET/IBext...) numbers the devices of this list the same way.
        devices.setdefault(host, {}).update({index: port for index, port, _ in listed})
    elif m := _SOCKET_USING.search(message):
        names = re.findall(r"\[\d+\]([\w.-]+):", m.group(1))
        result.socket_interfaces.extend(n for n in names if n not in result.socket_interfaces)
    elif "NET/IB" in message and "No device found" in message:
        result.ib_no_device = True
    else:
        _read_plugin_and_gdr(result, message)
    if _GDR.search(message):
        result.gdr = True


def _read_plugin_and_gdr(result: NcclLog, message: str) -> None:
    """The net chosen, its plugins, DMA-BUF and the per-HCA GPUDirect RDMA lines."""
    if m := _NETWORK.match(message):
        result.network = m.group(1).strip()
    elif m := _NET_PLUGIN.search(message):
        name = _PLUGIN_VERSION.sub("", m.group(2).rstrip()).rstrip()
        if m.group(1) == "net":
            result.net_plugin = name
        else:
            result.collnet_plugin = name
    elif (m := _PLUGIN_ENV.search(message)) and result.net_plugin is None:
        result.net_plugin = m.group(1)
    elif m := _DMABUF.search(message):
        if (gpu := int(m.group(1))) not in result.dmabuf_gpus:
            result.dmabuf_gpus.append(gpu)
    elif m := _GDR_HCA.match(message):
        _, how, state, hca, reason = m.groups()
        if state.lower().startswith("enable"):
            result.gdr_enabled.setdefault(hca, how or "")
        else:
            result.gdr_disabled.setdefault(hca, reason or how or "")
