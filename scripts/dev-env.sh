#!/usr/bin/env bash
# Create (or update) the project's virtual environment .venv with clusterctl, its test tools, and the
# wheelhouse's PyTorch + Horovod (the payload tests run real ranks on this machine), every package at
# the version the lock files pin: requirements/dev.txt (from the package index, hash-checked) and
# requirements/wheelhouse.txt (from the wheelhouse only). Refresh them with `bash scripts/lock.sh`.
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
# --no-compile: no .pyc written for every installed file (torch alone has thousands); Python writes each
# module's on its first import instead. 93 s -> 65 s for a fresh .venv on 2 cores, all of it on one core
# while the other waits: the test command cannot start before the .venv is there.
pip=(.venv/bin/python -m pip install -q --no-compile)
"${pip[@]}" --require-hashes -r requirements/dev.txt
"${pip[@]}" --no-index --find-links "$WHEELHOUSE" -r requirements/wheelhouse.txt
# clusterctl itself, editable; its build backend and dependencies are the locked ones installed above.
"${pip[@]}" --no-deps --no-build-isolation -e .
.venv/bin/python -m pip check >&2
echo "[dev-env] ready: .venv ($(.venv/bin/python -c 'import torch, horovod; print("torch", torch.__version__, "horovod", horovod.__version__)'))" >&2
