#!/bin/sh
# HTP programs: what sharing saves. The prefill / decode example (examples/decoder, one decoder
# exported at sequence lengths 32 and 1 with the same weights) compiled as two files and as one
# file with --multiple-graphs: file bytes, static (weight) bytes in the context, and the
# latency of each method from the shared file.
# Builds nothing: build the kiln target first.
#
# Usage: bench/htp_programs.sh [BUILD_DIR] [RUNS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
runs=${2:-50}
kiln=$build/tools/kiln/kiln
[ -x "$kiln" ] || { echo "htp_programs.sh: $kiln not found; build it first" >&2; exit 1; }
dec=$root/examples/decoder
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$kiln" compile --method "prefill=$dec/prefill.onnx" --method "decode=$dec/decode.onnx" --backend htp \
  --precision fp16 --multiple-graphs -o "$tmp/shared.kpte" >"$tmp/shared.log"
for m in prefill decode; do
  "$kiln" compile "$dec/$m.onnx" --backend htp --precision fp16 -o "$tmp/$m.kpte" >/dev/null
done
size() { wc -c <"$1" | tr -d ' '; }
separate=$(( $(size "$tmp/prefill.kpte") + $(size "$tmp/decode.kpte") ))
echo "weight sharing (fp16 decoder, 2 layers, width 64):"
sed -n 's/^multiple graphs: /  one context: /p' "$tmp/shared.log"
printf '  file bytes: %s as two files, %s as one file with --multiple-graphs (%s%%)\n' "$separate" \
  "$(size "$tmp/shared.kpte")" "$(awk -v a="$(size "$tmp/shared.kpte")" -v b="$separate" 'BEGIN { printf "%.0f", 100 * a / b }')"
for m in prefill decode; do
  for threads in 1 2; do
    t=$("$kiln" bench "$tmp/shared.kpte" --method "$m" --inputs "$dec/$m.npz" --runs "$runs" --threads "$threads" |
        sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    printf '  %-8s %d thread(s): median %s ms\n' "$m" "$threads" "$t"
  done
done

# Spill-fill sharing: torch resnet18 and mobilenet_v2 (fp16) on SXR1230P (2 MB of VTCM), sharded
# into many contexts with --multi-contexts: one spill-fill buffer for all against one each.
cache=$build/tests/e2e/ort/torch_models
/usr/bin/python3 "$root/tests/models/export_torch_models.py" "$cache" >/dev/null
echo "spill-fill sharing (fp16, SXR1230P, --multi-contexts):"
for spec in resnet18:6 resnet18:3 mobilenet_v2:8; do
  model=${spec%:*}
  nodes=${spec#*:}
  "$kiln" compile "$cache/$model.onnx" --backend htp --precision fp16 --soc SXR1230P --multi-contexts \
    --max-partition-nodes "$nodes" --dim batch=1..1 -o "$tmp/mc.kpte" >"$tmp/mc.log"
  printf '  %-13s --max-partition-nodes %-2s %s\n' "$model" "$nodes" \
    "$(sed -n 's/^multi contexts: //p' "$tmp/mc.log")"
done
