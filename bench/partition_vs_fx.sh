#!/bin/sh
# Runs bench/partition_vs_fx: kiln's partitioner vs torch.fx's CapabilityBasedPartitioner on the
# same synthetic graphs, and prints one table row per (shape, size) with the ratio.
# fx runs in a subprocess per case under a memory cap and a time limit; where it fails the row
# says so and the ratio is a lower bound ("> N x").
# Usage: bench/partition_vs_fx.sh [BUILD_DIR] [extra bench args, e.g. --sizes 10000 --timeout 120]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
[ $# -gt 0 ] && shift
bin=$build/bench/bench_partition_vs_fx
if [ ! -x "$bin" ]; then
  echo "missing $bin: build it with ninja -C $build bench_partition_vs_fx" >&2
  exit 1
fi
exec "$bin" --fx "$here/partition_fx.py" --timeout "${FX_TIMEOUT:-60}" --mem-mb "${FX_MEM_MB:-8192}" "$@"
