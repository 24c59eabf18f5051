#!/usr/bin/env bash
# kiln partition --html in a real browser: the page of a mixed-precision HTP partition with a
# profile loads in headless Chromium without errors, and its screenshot shows the drawing (the
# colors of the quantized and fp16 delegates).
# Usage: html_report_test.sh KILN_BINARY SOURCE_DIR
set -euo pipefail
kiln=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--backend htp --quant 8a8w --calib "$src/examples/calib" --dim batch=1..1)
"$kiln" compile "$src/examples/tinynet.onnx" "${common[@]}" --profile-level detailed -o "$work/p.kpte" >/dev/null 2>&1
"$kiln" run "$work/p.kpte" --inputs "$src/examples/calib/00.npz" --profile "$work/trace.json" >/dev/null
"$kiln" partition "$src/examples/tinynet.onnx" "${common[@]}" --fp-op softmax --fp16-fallback \
  --html "$work/report.html" --profile "$work/trace.json" >/dev/null 2>&1
node "$src/tests/tools/html_report_check.mjs" "$work/report.html" "$work/graph.png"
/usr/bin/python3 - "$work/graph.png" <<'PY'
import sys
from PIL import Image
img = Image.open(sys.argv[1]).convert("RGB")
w, h = img.size
pixels = img.getdata()
def count(rgb, tol=12):
    return sum(1 for p in pixels if all(abs(a - b) <= tol for a, b in zip(p, rgb)))
quantized = count((0x9e, 0xca, 0xe1))  # HTP quantized boxes
assert w > 300 and h > 300, (w, h)
assert quantized > 2000, f"no quantized boxes in the screenshot ({quantized} pixels)"
dark = sum(1 for p in pixels if sum(p) < 200)  # text and edges
assert dark > 1000, f"no text or edges in the screenshot ({dark} pixels)"
print(f"screenshot {w}x{h}: {quantized} quantized-box pixels, {dark} dark pixels")
PY
echo "html_report: ok"
