#!/bin/sh
# The HTP backend's 8a8w execution against onnxruntime-node on the same int8 QDQ models
# (tests/models/export_torch_models.py: torch FX post-training quantization, qconfig "onednn"):
# kiln compiles the QDQ ONNX for the HTP (--backend htp --soc SM8650, burst mode) and runs it
# with the runtime; ORT runs the QDQ ONNX with its own int8 kernels. Median of RUNS at 1 and
# 2 threads in the same run, the ratio (goal: kiln no slower, ratio <= 1), and how far the two
# outputs are apart. Also kiln's own quantizer on the float model (8a8w, 16 random calibration
# inputs) compiled the same way.
# Builds nothing: build the kiln target first.
#
# Usage: bench/htp_vs_ort.sh [BUILD_DIR] [RUNS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
runs=${2:-20}
kiln=$build/tools/kiln/kiln
[ -x "$kiln" ] || { echo "htp_vs_ort.sh: $kiln not found; build it first" >&2; exit 1; }
cache=$build/tests/e2e/ort/torch_models
/usr/bin/python3 "$root/tests/models/export_torch_models.py" "$cache" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
/usr/bin/python3 - "$tmp" <<'PY'
import os, sys, numpy as np
tmp = sys.argv[1]
rng = np.random.default_rng(0)
np.save(f"{tmp}/input.npy", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
os.makedirs(f"{tmp}/calib")
for i in range(16):
    np.savez(f"{tmp}/calib/{i:02d}.npz", input=rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
PY

printf '%-30s %7s %10s %10s %10s %s\n' model threads kiln_ms ort_ms kiln/ort "max |kiln-ort| (output steps)"
for model in resnet18 mobilenet_v2; do
  qdq=$cache/${model}_int8_qdq.onnx
  "$kiln" compile "$qdq" --backend htp --soc SM8650 --dim batch=1..1 -o "$tmp/$model.kpte" >"$tmp/$model.log" 2>&1 ||
    { cat "$tmp/$model.log" >&2; exit 1; }
  "$kiln" run "$tmp/$model.kpte" --input "input=$tmp/input.npy" --output-dir "$tmp/k" >/dev/null
  node "$root/tests/ref/ort_run.mjs" "$qdq" --out "$tmp/o" "input=$tmp/input.npy" >/dev/null
  diff=$(/usr/bin/python3 -c "
import numpy as np
k, o = np.load('$tmp/k/output.npy'), np.load('$tmp/o/output.npy')
vals = np.unique(o)
step = np.min(np.diff(vals)) if vals.size > 1 else 1.0
print(f'{np.max(np.abs(k - o)):.4g} ({np.max(np.abs(k - o)) / step:.1f})')")
  for threads in 1 2; do
    k=$("$kiln" bench "$tmp/$model.kpte" --input "input=$tmp/input.npy" --runs "$runs" --threads "$threads" |
        sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    o=$(node "$root/tests/ref/ort_run.mjs" "$qdq" --bench "$runs" --threads "$threads" "input=$tmp/input.npy" |
        sed -n 's/^ort median_ms \([0-9.]*\).*/\1/p')
    printf '%-30s %7s %10s %10s %10s %s\n' "${model}_int8_qdq" "$threads" "$k" "$o" "$(ratio "$k" "$o")" "$diff"
  done
  delegated=$(sed -n 's/.*: \([0-9]* partition(s), [0-9]* of [0-9]* calls delegated to htp\)/\1/p' "$tmp/$model.log")
  echo "  $model QDQ on the HTP: $delegated"
done
echo
printf '%-30s %7s %10s %s\n' model threads kiln_ms "output SQNR against float (kiln's 8a8w)"
# The random-weight MobileNetV2's logits are about 1e-9 (no SQNR to speak of): its quantizer run
# uses the same network with batch-norm statistics of random inputs (tests/e2e/htp_models.py).
/usr/bin/python3 -c "import sys; sys.path.insert(0, '$root/tests/e2e'); import htp_models
htp_models.mobilenet_with_statistics('$cache/mobilenet_v2_bn_statistics.onnx')" 2>/dev/null
for model in resnet18 mobilenet_v2; do
  float_model=$cache/$model.onnx
  [ "$model" = mobilenet_v2 ] && float_model=$cache/mobilenet_v2_bn_statistics.onnx
  "$kiln" compile "$float_model" --backend htp --quant 8a8w --calib "$tmp/calib" --dim batch=1..1 \
    -o "$tmp/${model}_kiln.kpte" >"$tmp/${model}_kiln.log" 2>&1 || { cat "$tmp/${model}_kiln.log" >&2; exit 1; }
  sqnr=$(sed -n "s/^output '.*': SQNR \(.*\)/\1/p" "$tmp/${model}_kiln.log")
  for threads in 1 2; do
    k=$("$kiln" bench "$tmp/${model}_kiln.kpte" --input "input=$tmp/input.npy" --runs "$runs" --threads "$threads" |
        sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    printf '%-30s %7s %10s %s\n' "${model} (kiln 8a8w)" "$threads" "$k" "$sqnr"
  done
done
