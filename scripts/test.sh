#!/usr/bin/env bash
# The test command: prepares a fresh Debian/Ubuntu machine (Docker engine, base image, wheelhouse,
# .venv), then runs every test, the integration tests on the real engine included.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not integration"` for the unit tests only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
bash scripts/dev-env.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
