"""Starting the CLI imports none of the heavy libraries: each command imports what it needs on use.

A fact, not a timing (bench/cli_latency.py measures the time): a fresh interpreter imports the CLI and
reports which modules it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

# Each one costs from tens of milliseconds (pydantic) to seconds (matplotlib) on a small machine; the
# command tree and --help need none of them.
HEAVY = ("matplotlib", "docker", "paramiko", "fabric", "jinja2", "pydantic", "ruamel.yaml", "numpy")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


def test_importing_the_cli_loads_no_heavy_library() -> None:
    loaded = _loaded_after("import clusterctl.cli")
    assert "clusterctl.cli" in loaded
    assert [m for m in HEAVY if m in loaded] == []


def test_the_probe_sees_what_a_command_imports_on_use() -> None:
    """The check above can fail: the same probe reports the libraries a command's module pulls in."""
    loaded = _loaded_after("import clusterctl.cli\nimport clusterctl.inventory")
    assert {"pydantic", "ruamel.yaml"} <= loaded
