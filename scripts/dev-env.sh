#!/usr/bin/env bash
# Create (or update) the project's virtual environment .venv with clusterctl, its test tools, and the
# wheelhouse's PyTorch + Horovod (the payload tests run real ranks on this machine), every package at
# the version the lock files pin: requirements/dev.txt (from the package index, hash-checked) and
# requirements/wheelhouse.txt (from the wheelhouse only), installed with uv. Refresh them with
# `bash scripts/lock.sh`.
# Run scripts/setup-env.sh first: it provides Docker, the base image and the wheelhouse.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELHOUSE="${CLUSTERCTL_WHEELHOUSE:-$HOME/.cache/clusterctl/wheelhouse}"
PYTHON="${PYTHON:-python3}"

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv 2>/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$PYTHON" -m venv .venv
  }
fi
# uv installs (scripts/uv.sh: the version requirements/uv.txt pins), from its cache in ~/.cache/uv: a fresh
# .venv takes ~9 s on 2 cores where pip took ~56 s, all on one core while the other waited (the test
# command cannot start before the .venv is there); a first install on a machine downloads as pip did.
# No .pyc is written for the installed files (uv's default; torch alone has thousands): Python writes
# each module's on its first import. --no-config: no uv.toml or UV_ setting of the caller's applies.
uv="$(bash scripts/uv.sh)"
install=("$uv" pip install -q --no-config --python .venv/bin/python)
"${install[@]}" --require-hashes -r requirements/dev.txt
"${install[@]}" --no-index --find-links "$WHEELHOUSE" -r requirements/wheelhouse.txt
# clusterctl itself, editable; its build backend and dependencies are the locked ones installed above.
"${install[@]}" --no-deps --no-build-isolation -e .
.venv/bin/python -m pip check >&2
echo "[dev-env] ready: .venv ($(.venv/bin/python -c 'import torch, horovod; print("torch", torch.__version__, "horovod", horovod.__version__)'))" >&2
