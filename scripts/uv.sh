#!/usr/bin/env bash
# Print the path of uv at the version requirements/uv.txt pins, installing it first (hash-checked, into
# a venv of its own in ~/.cache/clusterctl/lock-tools) when it is absent or another version.
# scripts/dev-env.sh installs .venv with it (from its cache a fresh .venv takes ~9 s, pip's took ~56 s
# on 2 cores) and scripts/lock.sh compiles the lock files with it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TOOLS="$HOME/.cache/clusterctl/lock-tools"
version="$(sed -n 's/^uv==\([0-9.]*\).*/\1/p' requirements/uv.txt)"
if ! "$TOOLS/bin/uv" --version 2>/dev/null | grep -qx "uv $version.*"; then
  [ -x "$TOOLS/bin/python" ] || "$PYTHON" -m venv "$TOOLS" >&2
  "$TOOLS/bin/python" -m pip install -q --require-hashes -r requirements/uv.txt >&2
fi
echo "$TOOLS/bin/uv"
