#!/bin/sh
# Peak memory of loading, running and partitioning a model with one large weight, beside
# onnxruntime-node loading and running the same file: how many copies of the weights each holds.
#
# Usage: bench/load_memory.sh KILN_BINARY [WEIGHT_MIB]   (default 512: MatMul x[1, K] @ W[K, N])
# Needs Debian's python3-onnx and numpy, and node_modules/onnxruntime-node at the top of the tree.
set -eu
kiln=$1
mib=${2:-512}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$tmp" "$mib" <<'PY'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
out, mib = sys.argv[1], int(sys.argv[2])
k = 8192
n = mib * (1 << 20) // (4 * k)
w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((k, n), dtype=np.float32), "W")
g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                      "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                      [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
open(f"{out}/big.onnx", "wb").write(m.SerializeToString())
np.save(f"{out}/x.npy", np.ones((1, k), dtype=np.float32))
PY
peak() {  # peak RSS in MiB of a command
  /usr/bin/time -f '%M' -o "$tmp/rss" "$@" >/dev/null 2>&1
  awk '{ printf "%.0f", $1 / 1024 }' "$tmp/rss"
}
model=$tmp/big.onnx
echo "one weight of $mib MiB ($(du -m "$model" | cut -f1) MiB file); peak RSS in MiB, and in weight copies"
printf '%-40s %8s %8s\n' step peak_mib copies
row() { printf '%-40s %8s %8s\n' "$1" "$2" "$(awk -v a="$2" -v w="$mib" 'BEGIN { printf "%.2f", a / w }')"; }
row "kiln inspect" "$(peak "$kiln" inspect "$model")"
row "kiln run" "$(peak "$kiln" run "$model" --input "x=$tmp/x.npy")"
row "kiln partition (demo delegate)" "$(peak "$kiln" partition "$model" --backend demo --ops mm,matmul,relu)"
if [ -d "$src/node_modules/onnxruntime-node" ]; then
  mkdir -p "$tmp/ort"
  row "onnxruntime-node load + run" "$(peak node "$src/tests/ref/ort_run.mjs" "$model" --out "$tmp/ort" "x=$tmp/x.npy")"
fi
