#!/usr/bin/env bash
# Refresh the lock files from pyproject.toml and requirements/*.in with uv's `uv pip compile`, both
# for the environment the tests run in (Linux x86_64, CPython 3.11: Debian bookworm's, and the
# wheelhouse's wheels are cp311):
#   requirements/dev.txt         clusterctl's dependencies, its dev extra and requirements/dev.in, from
#                                PyPI, with hashes
#   requirements/wheelhouse.txt  torch (+cpu), Horovod and numpy with their dependencies; torch and
#                                Horovod resolve from the wheelhouse only, and every version a package
#                                shares with dev.txt is dev.txt's
#   requirements/dali.txt        NVIDIA DALI and its dependencies, from PyPI, with hashes (the CPU
#                                pipeline test's; installed beside .venv, not in it)
# Needs the wheelhouse (run scripts/setup-env.sh first); scripts/setup-env.sh then fetches the
# wheelhouse's locked versions. uv is scripts/uv.sh's (the version requirements/uv.txt pins).
# Extra arguments go to both compiles, e.g. `--upgrade-package typer` (the default is --upgrade).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELHOUSE="${CLUSTERCTL_WHEELHOUSE:-$HOME/.cache/clusterctl/wheelhouse}"
UV="$(bash scripts/uv.sh)"
ls "$WHEELHOUSE"/horovod-*.whl >/dev/null 2>&1 || { echo "[lock] no Horovod wheel in $WHEELHOUSE: run scripts/setup-env.sh" >&2; exit 2; }
[ $# -gt 0 ] || set -- --upgrade

compile() {
  "$UV" pip compile -q --no-config --custom-compile-command "bash scripts/lock.sh" \
    --python-version 3.11 --python-platform x86_64-manylinux_2_28 "$@"
}
compile "$@" --generate-hashes --extra dev -o requirements/dev.txt pyproject.toml requirements/dev.in
# --no-build: Horovod's sdist on PyPI is never built; its wheel (and torch's +cpu one) come from the wheelhouse.
compile "$@" --no-build --find-links "$WHEELHOUSE" --constraint requirements/dev.txt \
  -o requirements/wheelhouse.txt requirements/wheelhouse.in
# DALI for the CPU pipeline test, beside .venv (scripts/setup-env.sh): dev.txt's versions; numpy is .venv's.
compile "$@" --generate-hashes --constraint requirements/dev.txt --no-emit-package numpy \
  -o requirements/dali.txt requirements/dali.in
echo "[lock] wrote requirements/dev.txt, requirements/wheelhouse.txt and requirements/dali.txt" >&2
