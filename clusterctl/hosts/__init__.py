"""Reaching the nodes: SSH sessions (Fabric) and their Docker engines (docker SDK over SSH)."""
