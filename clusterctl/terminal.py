"""Text bound for a terminal: node output, records and paths may hold any character.

A shared leaf: the CLI prints through it, and so does the report's table (``results/report_table.py``).
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, and C1 controls: ESC starts terminal sequences (retitle, clear the
# screen, OSC 52 writes the clipboard), CR overwrites a line; node output, records and paths may hold any.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``\\xNN``, for a terminal."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
