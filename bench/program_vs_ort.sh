#!/bin/sh
# The program file against what users run today, on ResNet18, MobileNetV2 and a
# TransformerEncoderLayer (tests/models/export_torch_models.py, cached with the e2e tests):
#   - start-up: kiln's load of the .kpte (map, check, load the method) vs onnxruntime-node
#     creating an InferenceSession from the .onnx (both ready to run; median of RUNS);
#   - latency at 1 and 2 threads: the runtime on the .kpte vs kiln's interpreter on the model
#     (the runtime must not be slower) vs ORT, median of RUNS, with ratios;
#   - the planned arena vs its lower bound and vs no reuse.
# Builds nothing: build the kiln, bench_program_load targets first.
#
# Usage: bench/program_vs_ort.sh [BUILD_DIR] [RUNS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
runs=${2:-20}
kiln=$build/tools/kiln/kiln
load=$build/bench/bench_program_load
for b in "$kiln" "$load"; do
  [ -x "$b" ] || { echo "program_vs_ort.sh: $b not found; build it first" >&2; exit 1; }
done
if [ -z "${BENCH_OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SKYLAKEX  # as bench/cpu_vs_ort.sh: ORT's MLAS uses AVX-512 here
fi
cache=$build/tests/e2e/ort/torch_models
/usr/bin/python3 "$root/tests/models/export_torch_models.py" "$cache" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sed -n "s/.*median_ms \([0-9.]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

printf '%-26s %10s %12s %12s %7s %s\n' model kpte_bytes kiln_load_ms ort_session_ms ratio arena
for model in resnet18 mobilenet_v2 transformer_encoder_layer; do
  onnx=$cache/$model.onnx
  "$kiln" compile "$onnx" -o "$tmp/$model.kpte" >"$tmp/$model.compile" 2>&1 ||
    { cat "$tmp/$model.compile" >&2; exit 1; }
  k=$("$load" "$tmp/$model.kpte" "$runs" | median)
  o=$(node "$root/bench/ort_session.mjs" "$onnx" "$runs" | median)
  arena=$(sed -n 's/^  arena: //p' "$tmp/$model.compile")
  printf '%-26s %10s %12s %12s %7s %s\n' "$model" "$(stat -c %s "$tmp/$model.kpte")" "$k" "$o" \
    "$(ratio "$k" "$o")" "$arena"
done
echo
printf '%-26s %7s %12s %12s %10s %14s %12s\n' model threads runtime_ms interp_ms ort_ms runtime/interp runtime/ort
for model in resnet18 mobilenet_v2 transformer_encoder_layer; do
  onnx=$cache/$model.onnx
  case $model in
    transformer_encoder_layer) shape="1,64,256" ;;
    *) shape="1,3,224,224" ;;
  esac
  /usr/bin/python3 -c "import numpy as np; np.save('$tmp/input.npy', np.random.default_rng(0).standard_normal(($shape)).astype(np.float32))"
  for threads in 1 2; do
    r=$("$kiln" bench "$tmp/$model.kpte" --input "input=$tmp/input.npy" --runs "$runs" --threads "$threads" |
        sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    i=$("$kiln" bench "$onnx" --interpreter --input "input=$tmp/input.npy" --runs "$runs" --threads "$threads" |
        sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    o=$(node "$root/tests/ref/ort_run.mjs" "$onnx" --bench "$runs" --threads "$threads" "input=$tmp/input.npy" |
        sed -n 's/^ort median_ms \([0-9.]*\).*/\1/p')
    printf '%-26s %7s %12s %12s %10s %14s %12s\n' "$model" "$threads" "$r" "$i" "$o" "$(ratio "$r" "$i")" "$(ratio "$r" "$o")"
  done
done
