"""The inventory's value types: every string that will reach a shell, checked against a conservative pattern.

Hostnames, interfaces, paths, versions, image references, Slurm names and sbatch options are
``Annotated`` strings whose validators refuse anything such a value does not hold, with the reason and
an example, so code downstream can trust the model. ``single_line`` refuses invisible and control
characters in every string.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from pathlib import Path, PurePath
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

# How much of a bad value an error message quotes (a 1 MB value stays a one-paragraph message).
SHOWN_CHARS = 60


def shown(value: object) -> str:
    """``repr(value)``, cut to ``SHOWN_CHARS`` characters with the full length noted, for messages."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def parse_cpu_list(text: str) -> list[int]:
    """The CPUs of a kernel CPU list (``Cpus_allowed_list``, ``cpuset.cpus``: ``0-3,8``), sorted.

    Raises:
        ValueError: ``text`` is not such a list.
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list (e.g. 0-3,8)")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"{text!r} is not a CPU list: range {part} runs backwards")
        cpus.update(range(low, high + 1))
    return sorted(cpus)


def _pattern(regex: str, what: str, example: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(
                f"{shown(value)} cannot be {what} (it would reach a shell later); use only the characters "
                f"such a value has, e.g. {example!r}"
            )
        return value

    return AfterValidator(check)


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
NodeName = Annotated[str, _pattern(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", "a hostname label", "node1")]
DnsName = Annotated[
    str, _pattern(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*", "a hostname", "gpu01.example.org")
]
InterfaceName = Annotated[
    str, _pattern(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}", "a network interface name", "ib0")
]
HcaPort = Annotated[
    str, _pattern(r"[A-Za-z0-9_]{1,32}(:[0-9]{1,3})?", "an HCA name, optionally with a port", "mlx5_0:1")
]
UserName = Annotated[str, _pattern(r"[a-z_][a-z0-9_-]{0,31}", "a Unix user name", "root")]
SafePath = Annotated[
    str, _pattern(r"[A-Za-z0-9_./~@+=,:][A-Za-z0-9_./@+=,:-]*", "a path", "/home/dell/benchmarks")
]


def _check_home(value: str) -> str:
    """A controller path whose ``~`` or ``~user`` can be expanded here (where clusterctl reads it)."""
    try:
        Path(value).expanduser()
    except RuntimeError:
        user = value.split("/", 1)[0]
        raise ValueError(
            f"{shown(value)} starts with {user}, whose home directory is unknown on this machine (no such "
            "user, or no $HOME and no passwd entry); write the path in full, without ~"
        ) from None
    return value


# A path on the controller (the machine running clusterctl): a path whose ~ expands here.
LocalPath = Annotated[SafePath, AfterValidator(_check_home)]


def _check_list_path(value: str) -> str:
    """An absolute path that cannot split in the list syntaxes it is rendered into.

    Mount sources and targets and device paths reach ``docker -v src:dst[:ro]``, ``--device=p:p:rwm``,
    pyxis' ``--container-mounts=a:b,c:d`` and apptainer's ``--bind=a:b``: a ``,`` starts another
    mount and a ``:`` another field (a read-only mount would become a read-write one of any host
    path). A relative source is a docker *named volume*, not the node's directory.
    """
    for char, role in ((",", "separates two mounts"), (":", "separates a mount's source, target and flags")):
        if char in value:
            raise ValueError(
                f"{shown(value)} holds {char!r}, which {role} in docker -v, pyxis --container-mounts and "
                f"apptainer --bind, so one entry would become several; use a path without {char!r} "
                "(a symlink to it, e.g. /srv/data)"
            )
    if not value.startswith("/"):
        raise ValueError(
            f"{shown(value)} is not an absolute path (docker reads a relative mount source as a named volume); "
            "write the full path, e.g. /srv/data"
        )
    return value


# An absolute path in a list syntax: ',' and ':' refused with the reason first, then anything a path lacks.
ListPath = Annotated[
    str, AfterValidator(_check_list_path), _pattern(r"/[A-Za-z0-9_./@+=-]*", "an absolute path", "/srv/data")
]
Version = Annotated[str, _pattern(r"[0-9A-Za-z][0-9A-Za-z.+_~-]{0,63}", "a version", "4.7-3.2.9.0")]
ImageRef = Annotated[
    str,
    _pattern(
        r"[a-z0-9]+([._-]+[a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
        r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?",
        "a container image reference",
        "nvidia/cuda:12.4.1-devel-ubuntu22.04",
    ),
]
ImageDigest = Annotated[
    str, _pattern(r"sha256:[0-9a-f]{64}", "an image digest", "sha256:" + "0123456789abcdef" * 4)
]
# CUDA compute capabilities without the dot (70 = V100, 80 = A100, 90 = H100), comma-separated.
CudaArchs = Annotated[
    str, _pattern(r"[1-9][0-9]{1,2}(,[1-9][0-9]{1,2})*", "a list of CUDA architectures", "80,90")
]
Capability = Annotated[str, _pattern(r"[A-Z][A-Z_]{1,31}", "a Linux capability", "IPC_LOCK")]
Size = Annotated[str, _pattern(r"[0-9]+[bkmgBKMG]?", "a size", "16g")]
Port = Annotated[int, Field(ge=1, le=65535)]

# The gpt workload's sizes by name -> (layers, heads, width): GPT-2 small and medium, GPT-3 XL's 1.3B (head
# width 128), and a tiny one a CPU trains in seconds. Any other shape is spelled L<layers>-H<heads>-W<width>.
GPT_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 2, 128),
    "124m": (12, 12, 768),
    "350m": (24, 16, 1024),
    "1.3b": (24, 16, 2048),
}
_GPT_CUSTOM = re.compile(r"L(\d{1,5})-H(\d{1,5})-W(\d{1,6})", re.IGNORECASE)
# Bounds past any model trained today: a larger value is a typo, not a model.
GPT_MAX_LAYERS, GPT_MAX_WIDTH = 1024, 131072


def gpt_dimensions(size: str) -> tuple[int, int, int]:
    """(layers, heads, width) of a gpt size: a name of ``GPT_SIZES`` or ``L<layers>-H<heads>-W<width>``.

    Raises:
        ValueError: neither, or a shape that cannot be built (the message says why and how to fix it).
    """
    if size in GPT_SIZES:
        return GPT_SIZES[size]
    found = _GPT_CUSTOM.fullmatch(size)
    if found is None:
        names = ", ".join(repr(name) for name in GPT_SIZES)
        raise ValueError(
            f"{shown(size)} is no gpt size: use one of {names}, or L<layers>-H<heads>-W<width> "
            "(e.g. L24-H16-W2048)"
        )
    layers, heads, width = (int(group) for group in found.groups())
    if not (1 <= layers <= GPT_MAX_LAYERS and 1 <= heads <= width <= GPT_MAX_WIDTH):
        raise ValueError(
            f"{shown(size)}: layers must be 1 to {GPT_MAX_LAYERS}, heads at least 1 and at most the width, "
            f"the width at most {GPT_MAX_WIDTH}"
        )
    if width % heads:
        raise ValueError(
            f"{shown(size)}: the width {width} does not split into {heads} heads (each head takes width / "
            f"heads features); pick heads that divide the width, e.g. L{layers}-H{_divisor_near(width, heads)}"
            f"-W{width}"
        )
    return layers, heads, width


def _divisor_near(width: int, heads: int) -> int:
    """The divisor of ``width`` nearest ``heads`` (the smaller one on a tie)."""
    return min((d for d in range(1, width + 1) if width % d == 0), key=lambda d: (abs(d - heads), d))


def _canonical_gpt_size(size: str) -> str:
    """A name unchanged; an explicit shape checked and written ``L<layers>-H<heads>-W<width>``."""
    layers, heads, width = gpt_dimensions(size)
    return size if size in GPT_SIZES else f"L{layers}-H{heads}-W{width}"


GptSize = Annotated[str, AfterValidator(_canonical_gpt_size)]


def _check_cpu_list(value: str) -> str:
    try:
        parse_cpu_list(value)
    except ValueError as exc:
        raise ValueError(f"{exc}; write CPUs and low-high ranges, e.g. 0-3,8") from None
    return value


CpuList = Annotated[
    str,
    _pattern(r"[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*", "a CPU list", "0-3,8"),
    AfterValidator(_check_cpu_list),
]


def _check_address(value: str) -> str:
    """An IPv4 address or a DNS name; IPv6 (and so zone ids) is refused with the reason.

    The management address reaches ``mpirun -H`` (when a node has no fabric address), /etc/hosts,
    known_hosts and ssh config lines: Open MPI cuts host names at the first ``:``, and a zone id
    (``fe80::1%eth0``) may hold any character but ``/`` and ``%`` (line breaks, commas, spaces).
    """
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        address = None
    if isinstance(address, ipaddress.IPv4Address):
        return value
    if address is not None:
        raise ValueError(
            f"{shown(value)} is an IPv6 address; clusterctl needs IPv4 management addresses (Open MPI's -H cuts "
            "host names at the first ':', and a zone id can carry any character into /etc/hosts and "
            "ssh config lines); use the node's IPv4 address, e.g. '10.0.0.11', or a hostname such as 'gpu01'"
        )
    if not re.fullmatch(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*", value):
        raise ValueError(
            f"{shown(value)} is neither an IPv4 address nor a hostname; use e.g. '10.0.0.11' or 'gpu01'"
        )
    if _reads_as_ipv4(value):
        raise ValueError(
            f"{shown(value)} is not a dotted-quad IPv4 address, but ssh and mpirun (inet_aton) read it as "
            f"{socket.inet_ntoa(socket.inet_aton(value))} (leading zeros are octal, 0x is hexadecimal, a short "
            "form fills in zeros), so it would bypass the duplicate-address rule and may name another host; "
            "write the address as four decimal numbers without leading zeros, e.g. '10.0.0.2'"
        )
    return value


def _reads_as_ipv4(value: str) -> bool:
    """Whether the C library's ``inet_aton`` (what ssh, getaddrinfo and Open MPI use) reads ``value`` as IPv4."""
    try:
        socket.inet_aton(value)
    except OSError:
        return False
    return True


HostAddress = Annotated[str, AfterValidator(_check_address)]


# Characters no inventory value may hold, by Unicode category: control characters (line breaks, tabs,
# escapes), format characters (zero-width and bidi overrides), surrogates, line and paragraph separators.
# Every string reaches a file line (hosts, known_hosts, ssh config), an argv or a terminal.
_UNSAFE_CATEGORIES = {"Cc": "a control character", "Cf": "an invisible formatting character",
                      "Cs": "a lone surrogate", "Zl": "a line separator", "Zp": "a paragraph separator"}  # fmt: skip


def single_line(value: str) -> str:
    """``value`` unchanged when it is one line of visible text; raises ValueError naming the character."""
    for index, char in enumerate(value):
        what = _UNSAFE_CATEGORIES.get(unicodedata.category(char))
        if what:
            raise ValueError(
                f"{shown(value)} holds {what} (U+{ord(char):04X} at position {index}); every value must be one "
                "line of visible text (it is written into files such as /etc/hosts and into commands); "
                "remove that character"
            )
    return value


def _text_only(value: Any) -> Any:
    """Refuse a non-string where a string-shaped value (address, path) is expected, instead of coercing it."""
    if value is not None and not isinstance(value, str | PurePath | ipaddress.IPv4Interface):
        raise ValueError(
            f"{shown(value)} is a value of type {type(value).__name__}, not text; write the value as a string"
        )
    return value


TextOnly = BeforeValidator(_text_only)


# --------------------------------------------------------------------------- Slurm values

# Partition, account, QOS, reservation names: what Slurm's own names look like.
SlurmName = Annotated[str, _pattern(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}", "a Slurm name", "gpu")]
# Slurm hostlist expressions: gpu[01-04],login1.
SlurmHostlist = Annotated[
    str,
    _pattern(
        r"[A-Za-z0-9_.-]+(\[[0-9,-]+\])?(,[A-Za-z0-9_.-]+(\[[0-9,-]+\])?)*", "a Slurm hostlist", "gpu[01-04]"
    ),
]
# Node features with Slurm's operators (& and | ! , * [ ] :), e.g. "h100&ib".
SlurmConstraint = Annotated[
    str, _pattern(r"[A-Za-z0-9_.&|!,:*\[\]-]{1,128}", "a Slurm constraint", "h100&ib")
]
# sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
SlurmTime = Annotated[
    str,
    _pattern(
        r"[0-9]{1,6}(:[0-9]{2}){0,2}|[0-9]{1,3}-[0-9]{1,2}(:[0-9]{2}){0,2}", "a Slurm time limit", "02:00:00"
    ),
]
# A container image as pyxis (enroot URI, squashfs path), apptainer (.sif path) or docker names it.
ContainerImage = Annotated[
    str,
    _pattern(
        r"[A-Za-z0-9_./][A-Za-z0-9_./:@#+=,-]{0,255}", "a container image", "nvcr.io#nvidia/pytorch:24.01-py3"
    ),
]
# An extra sbatch option: --name or --name=value, nothing a shell or sbatch's parser would split.
SbatchOption = Annotated[
    str,
    _pattern(
        r"--[a-z][a-z0-9-]{0,40}(=[A-Za-z0-9_.,:/@+%=\[\]-]{1,200})?", "an sbatch option", "--mail-type=END"
    ),
]
# Options the batch script sets itself from the inventory and the plan; an extra line may not repeat them.
SBATCH_MANAGED = ("job-name", "output", "error", "nodes", "ntasks", "ntasks-per-node", "partition", "account",
                  "reservation", "qos", "time", "nodelist", "constraint", "gpus-per-node", "exclusive", "chdir",
                  "wait", "parsable")  # fmt: skip
# Options that undo or contradict the managed ones, each with what it breaks.
SBATCH_CONTRADICTING = {
    "oversubscribe": "it lets other jobs share the nodes that --exclusive (slurm.exclusive) reserves",
    "share": "it is the old name of --oversubscribe, which undoes --exclusive (slurm.exclusive)",
    "nodefile": "it replaces the node list clusterctl sets (slurm.nodelist)",
    "gpus": "it asks for GPUs besides the --gpus-per-node clusterctl sets (slurm.gpus_per_node)",
    "gpus-per-task": "it asks for GPUs besides the --gpus-per-node clusterctl sets (slurm.gpus_per_node)",
    "gpus-per-socket": "it asks for GPUs besides the --gpus-per-node clusterctl sets (slurm.gpus_per_node)",
    "ntasks-per-gpu": "it changes the ranks per node clusterctl sets from the run's devices",
    "array": "it submits many jobs where clusterctl follows one",
    "wrap": "it replaces the batch script clusterctl writes",
    "test-only": "sbatch then submits nothing and prints no job id to follow",
}


def sbatch_option_problem(option: str) -> str | None:
    """Why the extra sbatch ``option`` (``--name[=value]``) is refused, or None when it may be added.

    sbatch reads long options with getopt_long, which takes any unambiguous prefix of a name as the
    name (``--out=`` is ``--output=``) and an ambiguous one as an error, so a name that is a prefix of a
    managed or contradicting option is refused like the option itself (none of sbatch's own options is
    a strict prefix of one of those: an exact name would win over the prefix rule).
    """
    name = option[2:].split("=", 1)[0]
    watched = [*SBATCH_MANAGED, *SBATCH_CONTRADICTING]
    meant = name if name in watched else next((w for w in watched if w.startswith(name)), None)
    if meant is None:
        return None
    spelled = f"--{name}" + (
        "" if meant == name else f" (sbatch reads a prefix as the option it starts: --{meant})"
    )
    if meant in SBATCH_MANAGED:
        return (
            f"{option!r} sets {spelled}, which clusterctl sets from the slurm block and the run; "
            "use the slurm block's field (or the run's options) instead"
        )
    return f"{option!r} sets {spelled}: {SBATCH_CONTRADICTING[meant]}; remove it"
