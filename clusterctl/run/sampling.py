"""Node telemetry for the ssh launcher: the sampler started on every node of a run over SSH, its
samples read back as they come, and the sampler always stopped.

The sampler (``clusterctl/payload/nodesampler.py``, stdlib-only python3) runs on each node's host as
``python3 -c <script>``: nothing is copied to the node, and nothing is left there. Why a python script
and not sh+awk: the rates, the JSON and nvidia-smi's fallbacks are simpler and testable in one
language, and every host clusterctl provisions has python3 (the playbook's probes use it). It is
bounded three ways: ``--max-seconds`` (the run's deadline plus ``LIFETIME_MARGIN_S``), the end of its
stdin (``stop``, or the controller's SSH connection closing), and its stdout closing.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterctl.errors import ConnectError
from clusterctl.hosts.ssh import fan_out
from clusterctl.hosts.ssh_stream import StreamedCommand
from clusterctl.inventory import Inventory, Node
from clusterctl.paths import NODE_SAMPLER, payload_dir

# Beyond the run's own deadline: the counters and the snapshot read after it, and a slow stop.
LIFETIME_MARGIN_S = 300.0
# How long a sampler may take to exit once its stdin ended (it checks stdin every interval, 1 s).
STOP_WAIT_S = 10.0
# One sample a second: a day's run, with room; beyond it, lines are counted, not kept.
MAX_LINES = 200_000


def sampler_argv(
    script: str, interfaces: Sequence[str], max_seconds: float, *, watch_stdin: bool
) -> list[str]:
    """The sampler's command line: ``python3 -c <script>`` sampling ``interfaces`` (and every HCA port)."""
    argv = ["python3", "-c", script, "--max-seconds", f"{max(int(max_seconds), 1)}"]
    for interface in interfaces:
        argv += ["--net", interface]
    return [*argv, "--watch-stdin"] if watch_stdin else argv


def sampler_script() -> str:
    """The sampler's source, as shipped with the payload."""
    return (payload_dir() / NODE_SAMPLER).read_text()


@dataclass
class Samplers:
    """The samplers running on a run's nodes, by node name, and why a node has none."""

    running: dict[str, StreamedCommand] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] | None = None

    def stop(self) -> dict[str, str]:
        """Stop every sampler (all at once, each bounded by ``STOP_WAIT_S``) and return each node's
        output; idempotent: a second call returns the same."""
        if self.texts is None:
            nodes = [streamed.node for streamed in self.running.values()]
            fan_out(
                nodes, lambda node: self.running[node.name].stop(STOP_WAIT_S), deadline_s=STOP_WAIT_S + 30
            )
            self.texts = {name: "\n".join(s.lines) for name, s in self.running.items()}
            for name, streamed in self.running.items():
                if streamed.dropped:
                    self.errors[name] = f"{streamed.dropped} sample(s) past the first {MAX_LINES} not kept"
        return self.texts


def start_samplers(inventory: Inventory, nodes: Sequence[Node], lifetime_s: float) -> Samplers:
    """A sampler on every node, started in parallel, each living at most ``lifetime_s`` plus the margin.

    A node where it cannot start gets an error instead (the run goes on: its telemetry is unknown).
    """
    script = sampler_script()
    late = threading.Event()  # set once the fan-out gave up waiting: a start after it is stopped at once

    def one(node: Node) -> StreamedCommand | str:
        argv = sampler_argv(script, [node.fabric.interface], lifetime_s + LIFETIME_MARGIN_S, watch_stdin=True)
        try:
            streamed = StreamedCommand.start(inventory, node, shlex.join(argv), max_lines=MAX_LINES)
        except ConnectError as exc:
            return f"the sampler did not start: {exc}"
        if late.is_set():
            streamed.stop(0)
        return streamed

    samplers = Samplers()
    deadline = max(n.ssh.connect_timeout_s for n in nodes) * 2 + 10 if nodes else 0
    started = fan_out(nodes, one, deadline_s=deadline)
    late.set()
    for name, got in started.items():
        if isinstance(got, StreamedCommand):
            samplers.running[name] = got
        elif isinstance(got, str):
            samplers.errors[name] = got
        else:
            samplers.errors[name] = f"the sampler did not start: {got.error}"
    return samplers
