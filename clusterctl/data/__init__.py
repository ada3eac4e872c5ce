"""Datasets on the nodes: `data synth` (``synth``: the images and manifest, pure; ``deliver``: written
over SSH) and what a node's dataset directory holds (``probe``: one read-only command, pure)."""
