#!/usr/bin/env bash
# The test command: prepares a fresh Debian/Ubuntu machine (Docker engine, base image, wheelhouse,
# .venv), then lints (ruff), checks types (mypy) and runs every test, the integration tests on the
# real engine included.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not integration"` for the unit tests only.
#
# Lint and tests run in an environment limited to what the two scripts installed, so that a machine
# with extras behaves like a fresh one: PATH is .venv/bin, then the system's directories; no user
# site-packages; of the caller's variables only HOME, CI, DOCKER_HOST and the settings of
# setup-env.sh that clusterctl reads too (CLUSTERCTL_WHEELHOUSE, CLUSTERCTL_BASE_IMAGE) pass.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
bash scripts/dev-env.sh
limited=(env -i "PATH=$PWD/.venv/bin:/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$HOME" LANG=C.UTF-8 PYTHONNOUSERSITE=1)
for name in CI DOCKER_HOST CLUSTERCTL_WHEELHOUSE CLUSTERCTL_BASE_IMAGE; do
  [ -z "${!name:-}" ] || limited+=("$name=${!name}")
done
"${limited[@]}" .venv/bin/ruff check .
"${limited[@]}" .venv/bin/ruff format --check --quiet clusterctl tests
# Types (pyproject.toml's [tool.mypy]: clusterctl/ and tests/), before the tests. The cache lives beside
# the wheelhouse (~/.cache/clusterctl/mypy), not in the checkout: CI's clean clone would start it cold
# every time (minutes of the setup on 2 cores), and a file whose time changed but whose
# content did not is still fresh to mypy (it compares hashes). mypy invalidates it on a version change.
mkdir -p "$HOME/.cache/clusterctl/mypy"
"${limited[@]}" MYPY_CACHE_DIR="$HOME/.cache/clusterctl/mypy" .venv/bin/mypy
# The documentation site (mkdocs.yml, docs/): --strict fails on a broken link or anchor and on a page left
# out of the nav; its inventory and CLI references are generated from the code during the build
# (scripts/docs_reference.py). Nothing is fetched; the site goes to site/ (ignored).
"${limited[@]}" .venv/bin/mkdocs build --strict --quiet --site-dir site
# The tests: spread over the machine's cores by pytest-xdist (-n auto); every integration test runs on one
# worker (tests/session_guard.py groups them), where they share the session's sandbox, while the unit
# tests spread over the rest. `-n 0` among the arguments runs everything in this one process. The
# slowest tests close the output (pyproject.toml's --durations), so the suite's budget stays in sight.
exec "${limited[@]}" .venv/bin/python -m pytest -p no:cacheprovider -n auto --dist loadgroup "$@"
