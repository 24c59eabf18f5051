#!/bin/sh
# Memory-plan figures for the models the tests use: ResNet18, MobileNetV2 and a
# TransformerEncoderLayer (exported to ONNX by tests/models/export_torch_models.py into the same
# cache as the e2e tests, BUILD_DIR/tests/e2e/ort/torch_models; kept between runs) and every .kir
# under tests/data/kir. Prints bench_memory_plan's table: per model the arena against the lower
# bound (the most bytes live at once; the goal is a ratio within 1.05x) and against no reuse.
# Builds nothing: build the bench_memory_plan target first.
#
# Usage: bench/memory_plan.sh [BUILD_DIR] [bench_memory_plan options...]
#   BUILD_DIR defaults to build/release. Options go to bench_memory_plan after the defaults here
#   (--dim batch=8 --dim seq=128 for the .kir models' symbolic dims); e.g. --synthetic 0 skips
#   the synthetic 1M-node graphs, --alignment 16 changes the arena alignment.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/release
if [ $# -gt 0 ]; then
  case $1 in
    -*) ;;
    *) build=$1; shift ;;
  esac
fi
bench=$build/bench/bench_memory_plan
if [ ! -x "$bench" ]; then
  echo "memory_plan.sh: $bench not found; build it first: ninja -C $build bench_memory_plan" >&2
  exit 1
fi
cache=$build/tests/e2e/ort/torch_models
echo "exporting the torch models into $cache (cached)" >&2
/usr/bin/python3 "$root/tests/models/export_torch_models.py" "$cache" >&2
# The models follow the caller's options on the command line.
for name in resnet18 mobilenet_v2 transformer_encoder_layer; do
  if [ ! -f "$cache/$name.onnx" ]; then
    echo "memory_plan.sh: $cache/$name.onnx was not exported" >&2
    exit 1
  fi
  set -- "$@" "$cache/$name.onnx"
done
for kir in "$root"/tests/data/kir/*.kir; do
  set -- "$@" "$kir"
done
exec "$bench" --dim batch=8 --dim seq=128 "$@"
