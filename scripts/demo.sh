#!/usr/bin/env bash
# Sets up, builds and runs kiln on the bundled example model (examples/tinynet.onnx):
#   1. import it and print its signature, op histogram, and every node with its inferred spec;
#   2. partition it for the demo delegate backend and print the delegated program, the
#      WhyNoPartition report and the partition summary, and write the program in full;
#   3. run it with the portable CPU interpreter on seeded random inputs and print the outputs;
#   4. run the partitioned program (its delegates and the portable kernels) on the same inputs.
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
mkdir -p build/demo-out
delegated=build/demo-out/$(basename "${model%.*}").delegated.kir
echo "== kiln partition $model --backend demo --ops $ops --report -o $delegated"
$kiln partition "$model" --backend demo --ops "$ops" --report -o "$delegated"
echo
echo "== kiln run $model --output-dir build/demo-out"
$kiln run "$model" --output-dir build/demo-out
echo
echo "== kiln run $delegated"
$kiln run "$delegated"
