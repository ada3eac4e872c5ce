"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`: one record per GPU."""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed

# A header cell is a query field name, optionally with its unit: "memory.total [MiB]".
_HEADER_CELL = re.compile(r"^[a-z][a-z0-9_.]*(?:\s*\[[^\]]*\])?$")
_ERROR = re.compile(r"is not a valid field|Unknown option|Invalid|NVIDIA-SMI has failed|not found", re.I)


class NvidiaSmiCsv(Parsed):
    """Rows keyed by field name (units stripped from the key); ``field<i>`` keys without a header."""

    fields: list[str] = Field(default_factory=list, description="Field names from the header.")
    rows: list[dict[str, str]] = Field(default_factory=list, description="One dict per GPU, values as text.")
    error: str | None = Field(None, description="nvidia-smi's complaint instead of CSV.")


def parse_nvidia_smi_csv(text: str, fields: list[str] | None = None) -> NvidiaSmiCsv:
    """Parse query CSV output; pass ``fields`` when it was printed with ``noheader``.

    Args:
        text: The output, as printed.
        fields: Field names in query order, for noheader output.

    Returns:
        Fields and rows; a non-CSV complaint goes to ``error``.
    """
    result = NvidiaSmiCsv(fields=list(fields or []))
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if _ERROR.search(line):
            result.error = line
        elif not result.fields and not result.rows and all(_HEADER_CELL.match(c) for c in cells):
            result.fields = [re.sub(r"\s*\[.*\]$", "", cell) for cell in cells]
        elif result.fields and len(cells) != len(result.fields):
            result.unparsed_lines.append(raw)
        else:
            names = result.fields or [f"field{i}" for i in range(len(cells))]
            result.rows.append(dict(zip(names, cells, strict=True)))
    return result
