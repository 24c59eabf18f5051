#!/bin/sh
# Latency of kiln's portable interpreter vs onnxruntime-node on the same ONNX models and inputs,
# 1 and 2 threads, median of N runs, printed with the ratio (kiln / ORT; < 1 means kiln is faster).
#
# Usage: bench/interp_vs_ort.sh KILN_BINARY MODEL_DIR [RUNS]
#   MODEL_DIR holds resnet18.onnx, mobilenet_v2.onnx, transformer_encoder_layer.onnx
#   (tests/models/export_torch_models.py MODEL_DIR writes them). Needs node and
#   node_modules/onnxruntime-node at the top of the source tree.
set -eu
kiln=$1
dir=$2
runs=${3:-30}
src=$(cd "$(dirname "$0")/.." && pwd)
# ORT's MLAS uses AVX-512 where the CPU has it; an environment that pins OpenBLAS to its AVX2
# kernels (OPENBLAS_CORETYPE=Haswell) would make the comparison unfair, so the bench selects the
# SkylakeX kernels there. BENCH_OPENBLAS_CORETYPE chooses another core type.
if [ -n "${BENCH_OPENBLAS_CORETYPE:-}" ]; then
  export OPENBLAS_CORETYPE=$BENCH_OPENBLAS_CORETYPE
elif grep -q avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SKYLAKEX
fi
echo "OpenBLAS core type: ${OPENBLAS_CORETYPE:-auto}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '%-28s %7s %12s %12s %8s\n' model threads kiln_ms ort_ms ratio
for model in resnet18 mobilenet_v2 transformer_encoder_layer; do
  onnx="$dir/$model.onnx"
  [ -f "$onnx" ] || { echo "missing $onnx" >&2; exit 1; }
  case $model in
    transformer_encoder_layer) shape="1,64,256" ;;
    *) shape="1,3,224,224" ;;
  esac
  /usr/bin/python3 -c "import numpy as np; np.save('$tmp/input.npy', np.random.default_rng(0).standard_normal(($shape)).astype(np.float32))"
  for threads in 1 2; do
    k=$("$kiln" bench "$onnx" --input "input=$tmp/input.npy" --runs "$runs" --threads "$threads" |
        sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    o=$(node "$src/tests/ref/ort_run.mjs" "$onnx" --bench "$runs" --threads "$threads" "input=$tmp/input.npy" |
        sed -n 's/^ort median_ms \([0-9.]*\).*/\1/p')
    ratio=$(awk -v a="$k" -v b="$o" 'BEGIN { printf "%.2f", a / b }')
    printf '%-28s %7s %12s %12s %8s\n' "$model" "$threads" "$k" "$o" "$ratio"
  done
done
