"""Loading a payload script in a test as the image runs it: top-level, its siblings importable."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PAYLOAD_DIR = Path(__file__).resolve().parents[2] / "clusterctl" / "payload"


def load_payload(name: str) -> ModuleType:
    """The payload script ``name`` (e.g. ``resnet50_bench``), imported from its own directory."""
    if str(PAYLOAD_DIR) not in sys.path:
        sys.path.insert(0, str(PAYLOAD_DIR))
    spec = importlib.util.spec_from_file_location(name, PAYLOAD_DIR / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
