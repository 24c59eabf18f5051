#!/bin/sh
# Per-node overhead of kiln's portable execution: a chain of N relus on one-element tensors, so
# the kernels do next to nothing, run by the runtime (a program compiled in memory, no delegate)
# and by the interpreter over the IR. Prints the median run and nanoseconds per node; the aim is
# well under 1 us per node.
# Usage: bench/node_overhead.sh BUILD_DIR [NODES] [RUNS]
set -eu
kiln=$(cd "$1" && pwd)/tools/kiln/kiln
nodes=${2:-10000}
runs=${3:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$tmp/chain.kir" "$nodes" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
lines = ["graph():", "    %x : [num_users=1] f32[1] = placeholder[target=x]"]
prev = "x"
for i in range(n):
    lines.append(f"    %r{i} : [num_users=1] f32[1] = call_function[target=relu](args = (%{prev},), kwargs = {{}})")
    prev = f"r{i}"
lines.append(f"    return ({prev},)")
open(path, "w").write("\n".join(lines) + "\n")
PY
for engine in runtime interpreter; do
  flag=--backend=portable
  [ "$engine" = interpreter ] && flag=--interpreter
  ms=$("$kiln" bench "$tmp/chain.kir" --runs "$runs" "$flag" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
  awk -v e="$engine" -v ms="$ms" -v n="$nodes" 'BEGIN { printf "%-12s %d nodes: median %.3f ms, %.0f ns per node\n", e, n, ms, ms * 1e6 / n }'
done
