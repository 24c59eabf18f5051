#!/usr/bin/env bash
# Sets up, builds and runs kiln on the bundled example model (examples/tinynet.onnx):
#   1. import it and print its signature, op histogram, and every node with its inferred spec;
#   2. partition it for the demo delegate backend and print the delegated graph, the
#      WhyNoPartition report and the partition summary;
#   3. run it with the portable CPU interpreter on seeded random inputs and print the outputs.
# Usage: scripts/demo.sh [MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release kiln
kiln=build/release/tools/kiln/kiln
model=${1:-examples/tinynet.onnx}
ops=convolution,relu,hardswish,add,cat,max_pool2d,avg_pool2d,flatten,linear

echo "== kiln inspect --graph $model"
$kiln inspect --graph "$model"
echo
echo "== kiln partition $model --backend demo --ops $ops --report"
$kiln partition "$model" --backend demo --ops "$ops" --report
echo
echo "== kiln run $model --output-dir build/demo-out"
$kiln run "$model" --output-dir build/demo-out
