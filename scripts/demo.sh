#!/usr/bin/env bash
# Sets up, builds and runs kiln on the bundled example: prints its signature, op histogram,
# constants, and the graph with the spec inferred for every node.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release kiln
model=${1:-tests/data/kir/transformer_block.kir}
echo "== kiln inspect --graph $model"
build/release/tools/kiln/kiln inspect --graph "$model"
