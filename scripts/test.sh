#!/usr/bin/env bash
# The test command: prepares a fresh Debian/Ubuntu machine (Docker engine, base image, wheelhouse,
# .venv), then lints (ruff), checks types (mypy) and runs every test, the integration tests on the
# real engine included.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not integration"` for the unit tests only.
#
# Lint and tests run in an environment limited to what the two scripts installed, so that a machine
# with extras behaves like a fresh one: PATH is .venv/bin, then the system's directories; no user
# site-packages; of the caller's variables only HOME, CI, DOCKER_HOST and the settings of
# setup-env.sh that clusterctl or the tests read too (CLUSTERCTL_WHEELHOUSE, CLUSTERCTL_BASE_IMAGE,
# CLUSTERCTL_DALI_DIR) pass.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
bash scripts/dev-env.sh
limited=(env -i "PATH=$PWD/.venv/bin:/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$HOME" LANG=C.UTF-8 PYTHONNOUSERSITE=1)
for name in CI DOCKER_HOST CLUSTERCTL_WHEELHOUSE CLUSTERCTL_BASE_IMAGE CLUSTERCTL_DALI_DIR; do
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
# The tests. With no arguments, two sessions side by side: the integration tests that share the 2-node
# session sandbox in this one (in file order), and a second one started beside it, which runs while the
# first waits on engines, SSH and sleeps: the unit tests, then the integration tests marked `beside`
# (each brings its own sandbox or none: the 4-node pairs sandbox, the bench's 1-node one, the image build
# checks), so that neither session holds the whole integration half. The second's output follows once
# both have ended, then one closing line for both. Any argument (a file, -m "not integration", -k ...)
# runs one session with it.
# Ctrl-C, SIGTERM or SIGHUP reach both sessions, which tear down (tests/helpers/session_guard.py). The slowest
# tests close each session's output (pyproject.toml's --durations), so the suite's budget stays in sight.
pytest=("${limited[@]}" .venv/bin/python -m pytest -p no:cacheprovider)
if [ $# -gt 0 ]; then
  exec "${pytest[@]}" "$@"
fi
logs="$(mktemp -d -t clusterctl-tests.XXXXXX)"
"${pytest[@]}" -m "not integration or beside" >"$logs/unit.log" 2>&1 &
unit=$!
# The integration session streams, and tee keeps a copy for the closing line; tee is waited for below,
# so that copy is whole before it is read.
exec {shown}> >(tee "$logs/integration.log")
tee_pid=$!
"${pytest[@]}" -m "integration and not beside" >&"$shown" 2>&1 &
integration=$!
# A signal to this script goes on to both sessions (each tears down once, whatever else reaches it).
stop() { kill -TERM "$unit" "$integration" 2>/dev/null || true; wait "$unit" "$integration" || true; }
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap 'stop; exit 129' HUP
trap 'rm -rf "$logs"' EXIT
integration_rc=0
wait "$integration" || integration_rc=$?
exec {shown}>&-
wait "$tee_pid"
unit_rc=0
wait "$unit" || unit_rc=$?
printf '\n===== the unit tests and the beside integration tests, run beside the tests above =====\n'
cat "$logs/unit.log"
# One closing line for both sessions, from each one's last line ("=== 12 passed, 1 skipped in 9s ===").
closing="$(tail -qn 1 "$logs/integration.log" "$logs/unit.log")"
count() { grep -o "[0-9]\+ $1" <<<"$closing" | awk '{ n += $1 } END { print n + 0 }'; }
printf '\ntests: %s passed, %s failed, %s skipped\n' "$(count passed)" "$(( $(count failed) + $(count error) ))" "$(count skipped)"
[ "$integration_rc" -eq 0 ] && [ "$unit_rc" -eq 0 ]
