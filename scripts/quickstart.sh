#!/usr/bin/env bash
# The main job on a fresh Debian/Ubuntu machine: prepare the environment, bring up a 2-node local
# sandbox, provision it, build and deliver the cpu benchmark image, start the containers, run the
# ResNet-50 benchmark across both nodes, and report. `clusterctl sandbox down` removes it all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
bash scripts/dev-env.sh
export PATH="$PWD/.venv/bin:$PATH"
clusterctl sandbox up --nodes 2
clusterctl provision
clusterctl image build
clusterctl image push
clusterctl up
clusterctl run resnet50 --nodes 2
clusterctl report
echo "The sandbox stays up for more runs (clusterctl status, clusterctl run ...); remove everything with:"
echo "  clusterctl down && clusterctl sandbox down"
