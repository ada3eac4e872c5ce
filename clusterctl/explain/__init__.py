"""Explain a run: diagnosis rules over its recorded facts (breakdown, POP, MFU, preflight, telemetry),
each with a stable code, the evidence and the knob to turn, and the verdict they add up to."""
