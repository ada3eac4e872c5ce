#!/usr/bin/env bash
# The main job on a fresh Debian/Ubuntu machine: prepare the environment, bring up a 2-node local
# sandbox, provision it, build and deliver the cpu benchmark image, start the containers, run the
# ResNet-50 benchmark on 1 node and on 2 nodes with the same settings, and report the speedup and
# efficiency with a scaling plot. `clusterctl sandbox down` removes it all.
#
# Each sandbox node has its own equal, disjoint share of the machine's CPUs, so 1 node vs 2 nodes
# measures what the second node and the communication add, not two ranks fighting over one CPU.
#
# Environment (all optional): QUICKSTART_NAME and QUICKSTART_SUBNET name the sandbox and its network
# (defaults: sandbox, 10.213.0.0/24), for a machine where another sandbox runs (use your own
# CLUSTERCTL_STATE_DIR then too); QUICKSTART_REPEATS runs each node count that many times (default 3)
# and the report shows their median and spread.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
bash scripts/dev-env.sh
export PATH="$PWD/.venv/bin:$PATH"

name="${QUICKSTART_NAME:-sandbox}"
subnet=()
if [[ -n "${QUICKSTART_SUBNET:-}" ]]; then
  subnet=(--subnet "$QUICKSTART_SUBNET")
fi
repeats="${QUICKSTART_REPEATS:-3}"
# The quickstart's own history: runs from elsewhere (other settings, an older sandbox without
# per-node CPUs) never mix into its figures.
runs="$PWD/runs/quickstart"
plot="$runs/scaling.png"

clusterctl sandbox up --nodes 2 --name "$name" "${subnet[@]}"
clusterctl provision
clusterctl image build
clusterctl image push
clusterctl up
# Same settings (the sandbox inventory's run defaults) on 1 node, then on 2.
clusterctl run resnet50 --nodes 1 --repeats "$repeats" --runs-dir "$runs"
clusterctl run resnet50 --nodes 2 --repeats "$repeats" --runs-dir "$runs"
clusterctl report --runs-dir "$runs" --plot "$plot"
echo "scaling plot: $plot"
echo "The sandbox stays up for more runs (clusterctl status, clusterctl run ...); remove everything with:"
echo "  clusterctl down && clusterctl sandbox down"
clusterctl explain --runs-dir "$runs"
