"""Which kind of output a text is: the first kind whose signature matches, and every other that does.

Order matters: a signature that is a strict sign of one tool comes before the looser ones (an
nccl-tests table can carry NCCL INFO lines; a benchmark log can carry NCCL lines and MPI errors).
A job log is many outputs in one (a job that prints ``nvidia-smi`` first, then fails in NCCL):
``detect_kinds`` lists every kind whose signature is anywhere in the text, and ``LOG_KINDS`` are the
ones whose errors a text of another kind still carries (``inspect`` judges those too).
"""

from __future__ import annotations

import re

from clusterctl.diagnostics.parsers.peermem import PEERMEM_PATHS

_PEERMEM = "|".join(re.escape(path) for path in PEERMEM_PATHS)

# (kind, signature). Each signature is a line-anchored pattern that only that tool prints. Blanks are
# [ \t\r], never \s: with re.M, "^\s*" ran across every following blank line (quadratic on a file of
# blank lines: 40 KB took 35 s).
_SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Host facts a topology bundle holds. Strict shapes, so they go first: the loose CSV fallback at the
    # end would otherwise claim the one-line `ip -j` JSON and module lines with several dependencies.
    ("ip-addr", re.compile(r'\A\s*\[\s*\{\s*"ifindex"\s*:')),  # \A: one start, JSON may span lines
    (
        "proc-modules",
        re.compile(
            r"^\w+ \d+ (?:\d+|-) (?:-|\S+,) (?:Live|Loading|Unloading) 0x[0-9a-f]+|/proc/modules: No such file"
            # lsmod's table: two aligned rows in a row ("%-19s %8lu  %d users")
            r"|^(?:\w+ +\d+  ?\d+(?: [\w,-]+)?[ \t\r]*\n){2}",
            re.M,
        ),
    ),
    (
        "peermem",
        re.compile(rf"^(?:{_PEERMEM})[ \t\r]*$|^(?:ls: (?:cannot access )?|cat: )'?(?:{_PEERMEM})'?: ", re.M),
    ),
    (
        "lspci-vvv",
        re.compile(
            r"^[ \t\r]*(?:LnkCap|LnkSta|ACSCtl):[ \t]|^[ \t\r]+Capabilities: (?:<access denied>|\[[0-9a-f]+)|"
            r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [^\n:]+: [^\n]*\n[ \t\r]+(?:Subsystem|Control|DeviceName):",
            re.M,
        ),
    ),
    # modinfo's aligned "field:   value" lines: the module's file, or its license and build kernel.
    ("modinfo", re.compile(r"^[ \t\r]*(?:filename|vermagic|license):[ \t]{2,}\S", re.M)),
    ("nvidia-smi-q", re.compile(r"=+NVSMI LOG=+|^ *Fabric[ \t\r]*\n[ \t\r]+State[ \t\r]+:", re.M)),
    # Before perfquery and sysfs-counters: the fabric counters' output may hold theirs after its own.
    # (and the HCA a netdev sits on, which the counter command prints for the IPoIB subtraction)
    (
        "fabric-counters",
        re.compile(
            r"^/sys/class/net/[^/\s]+/(?:statistics/[rt]x_bytes|device/infiniband_verbs/\w+/ibdev):", re.M
        ),
    ),
    ("perfquery", re.compile(r"^#\s*Port (?:extended )?counters:|^Port(?:Xmit|Rcv)Data:\.{3}", re.M)),
    ("sysfs-counters", re.compile(r"^/sys/class/infiniband/[^/\s]+/ports/\d+/(?:hw_)?counters/\w+:", re.M)),
    # Before the CSV fallback: an SXid's "Data {0x.., 0x.., ...}" line has many commas.
    # DCGM's table: its category rows or its header row; nvbandwidth's version line or a testcase line.
    (
        "dcgmi-diag",
        re.compile(
            r"^[|+]-{3,}[ \t]+(?:Metadata|Deployment|Integration|Hardware|Stress)[ \t]+-+[|+]"
            r"|^\|[ \t]*Diagnostic[ \t]+\|[ \t]*Result[ \t]+\|",
            re.M,
        ),
    ),
    (
        "nvbandwidth",
        re.compile(
            r"^nvbandwidth Version: |^SUM \w+_memcpy_(?:ce|sm) [\d.]+|^Running \w+_memcpy_(?:ce|sm)\.$", re.M
        ),
    ),
    (
        "kernel-log",
        re.compile(
            # dmesg's line, or journalctl -k's / syslog's with its stamp and "host kernel: " before it
            r"^(?:(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?|\d{4}-\d\d-\d\dT[\d:.,]{8,16}"
            r"(?:Z|[+-]\d\d:?\d\d)?) [\w.-]{1,64} kernel: )?"
            r"(?:\[[^\]\n]{1,40}\][ \t]*)?(?:[\w-]{1,40}:[ \t]*)?S?Xid \(PCI:",
            re.M,
        ),
    ),
    (
        "proc-cmdline",
        # BOOT_IMAGE= (GRUB), or the first parameter a bootloader that sets none (U-Boot, EFI stub) passes.
        re.compile(
            r"\A\s*(?:\[\s*[\d.]+\]\s+(?:Kernel )?[Cc]ommand line:\s*)?(?:BOOT_IMAGE|root|initrd|console)=\S+"
        ),
    ),
    (
        "nvidia-smi-topo",
        re.compile(
            r"^[ \t\r]*GPU0[ \t\r]+X\b|^[ \t\r]*X[ \t\r]+=[ \t\r]+Self|must be used in conjunction with -n or -p",
            re.M,
        ),
    ),
    ("nvidia-smi", re.compile(r"NVIDIA-SMI \d+\.\d+")),
    ("ibstat", re.compile(r"^CA '[^']+'[ \t\r]*$|^[ \t\r]+CA type:", re.M)),
    ("ibstatus", re.compile(r"^Infiniband device '[^']+' port \d+ status:", re.M)),
    ("ibv-devinfo", re.compile(r"^hca_id:[ \t\r]*\S+", re.M)),
    (
        "ofed-info",
        re.compile(
            r"MLNX_OFED_LINUX-|ofed_info: (?:command )?not found|^[ \t\r]*OFED-internal-|"
            r"^\d+\.\d+-\d+\.\d+\.\d+(?:\.\d+)?[ \t\r]*$",
            re.M,
        ),
    ),
    (
        "nccl-tests",
        re.compile(
            r"^#?[ \t\r]*nThread \d+ nGpus|^#?[ \t\r]*Avg bus bandwidth|^#?[ \t\r]*Out of bounds values|"
            r"^#?[ \t\r]*size[ \t\r]+count[ \t\r]+type[ \t\r]|"  # a table published without its summary
            # rows alone (`size count type redop root time ...`): nccl-tests' type and reduction-op names
            r"^[ \t\r]*\d{1,20}[ \t\r]+\d{1,20}[ \t\r]+(?:float|double|half|bfloat16|u?int(?:8|32|64)|"
            r"f8e4m3|f8e5m2)[ \t\r]+(?:sum|prod|max|min|avg|none|mulsum)[ \t\r]+-?\d{1,6}[ \t\r]+[\d.]+[ \t\r]",
            re.M,
        ),
    ),
    ("horovod-synthetic", re.compile(r"img/sec per (?:GPU|device)|Total img/sec on \d+", re.M)),
    # The step line may carry a prefix (an MPI rank tag): the lazy prefix and (?<!\d) keep it linear
    # (a greedy prefix before a number was quadratic on a line of digits).
    (
        "tf-cnn-benchmarks",
        re.compile(r"total images/sec:|^\S*?[ \t\r]*(?<!\d)\d++[ \t\r]+images/sec:|tf_cnn_benchmarks", re.M),
    ),
    (
        "mpi-error",
        re.compile(
            r"(?:ORTE|PRRTE|PRTE) (?:was unable to reliably start|has lost communication)|"
            r"not enough slots available|"
            r"mpirun (?:noticed|detected|was unable)|Primary job[ \t\r]+terminated|"
            r"no active ports detected|orted: command not found",
            re.M,
        ),
    ),
    ("nccl-log", re.compile(r"\bNCCL (?:INFO|WARN)\b|NCCL failure|NCCL version", re.M)),
    (
        "nvidia-smi-csv",
        re.compile(
            r"^(?:name|index|pci\.bus(?:_id)?|uuid|compute_cap|timestamp|driver_version|"
            r"power\.\w+|memory\.\w+)(?:[ \t\r]*\[[^\]]*\])?(?:,[ \t\r]*[\w.]+(?:[ \t\r]*\[[^\]]*\])?)*[ \t\r]*$|"
            r"is not a valid field to query|^[^,=\n]+(?:,[ \t\r]*[^,=\n]+){3,}[ \t\r]*$",  # never a key=value line
            re.M,
        ),
    ),
)

KINDS: tuple[str, ...] = tuple(kind for kind, _ in _SIGNATURES)
# The kinds whose errors can follow any other output in one job log (NCCL's WARN lines, mpirun's
# abort): a text that shows them is judged as them too, whatever printed first.
LOG_KINDS = ("mpi-error", "nccl-log")


def detect_kind(text: str) -> str | None:
    """The kind of diagnostic output ``text`` is, or None when no signature matches.

    Args:
        text: Command output, with any fixture/comment header already removed.

    Returns:
        One of :data:`KINDS`, or None.
    """
    return next((kind for kind, signature in _SIGNATURES if signature.search(text)), None)


def detect_kinds(text: str) -> list[str]:
    """Every kind whose signature is somewhere in ``text``, in :data:`KINDS` order (the first is
    :func:`detect_kind`'s); each signature is searched once, so this is linear in ``text``."""
    return [kind for kind, signature in _SIGNATURES if signature.search(text)]
