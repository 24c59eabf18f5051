#!/usr/bin/env bash
# Sets up, builds and runs kiln on the bundled example model (examples/tinynet.onnx):
#   1. import it and print its signature, op histogram, and every node with its inferred spec;
#   2. partition it for the demo delegate backend and print the delegated program, the
#      WhyNoPartition report and the partition summary, and write the program in full;
#   3. compile it across the demo backend and the portable kernels into one program file (.kpte),
#      memory planned, and inspect the file;
#   4. run the file with the runtime, through `kiln run` and through the small `kiln-runner`,
#      and run the model itself on the best CPU placement (xnnpack, portable for the rest);
#   5. quantize it (8a8w, calibrated on examples/calib) with a per-layer SQNR report, and run the
#      quantized program.
# Usage: scripts/demo.sh [MODEL]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release kiln kiln-runner
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
program=build/demo-out/$(basename "${model%.*}").kpte
echo "== kiln compile $model --backend demo --ops $ops --dim batch=1..8 -o $program"
$kiln compile "$model" --backend demo --ops "$ops" --dim batch=1..8 -o "$program"
echo
echo "== kiln inspect --verify $program"
$kiln inspect --verify "$program"
echo
echo "== kiln run $program --output-dir build/demo-out"
$kiln run "$program" --output-dir build/demo-out
echo
echo "== kiln-runner $program   # the runtime and the portable kernels only: no IR, no ONNX"
build/release/tools/kiln-runner/kiln-runner "$program"
echo
echo "== kiln run $model --output-dir build/demo-out/cpu   # compiled in memory: xnnpack + portable"
$kiln run "$model" --output-dir build/demo-out/cpu
echo
if [[ $model == examples/tinynet.onnx ]]; then
  quantized=build/demo-out/tinynet.8a8w.kir
  echo "== kiln quantize $model --calib examples/calib --config 8a8w --report -o $quantized"
  $kiln quantize "$model" --calib examples/calib --config 8a8w --report -o "$quantized"
  echo
  echo "== kiln run $quantized --inputs examples/calib/00.npz"
  $kiln run "$quantized" --inputs examples/calib/00.npz
  echo
  htp=build/demo-out/tinynet.htp.kpte
  echo "== kiln compile $quantized --backend htp --soc SM8650 --dim batch=1..1 --profile-level detailed -o $htp"
  $kiln compile "$quantized" --backend htp --soc SM8650 --dim batch=1..1 --profile-level detailed -o "$htp"
  echo
  echo "== kiln run $htp --inputs examples/calib/00.npz --profile build/demo-out/tinynet.htp.trace.json"
  $kiln run "$htp" --inputs examples/calib/00.npz --profile build/demo-out/tinynet.htp.trace.json
fi
