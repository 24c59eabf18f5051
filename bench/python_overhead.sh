#!/bin/sh
# What calling a kiln Method from Python costs over calling it from C++: the same .kpte run
# through kiln.Runtime (bench/python_overhead.py: method(*arrays) timed with perf_counter_ns)
# and through `kiln bench` (steady_clock around each Method::execute), at 1 and 2 threads.
#   - per call: a one-op program (add of two f32[1, 16]); Python times RUNS batches of 10000
#     calls (median of the batches' time per call), `kiln bench` the median of RUNS x 10000
#     single calls. The difference is the overhead (goal: < 5 us). `kiln bench` prints ms to 3
#     decimals, so the C++ figure, and the overhead, are +-0.5 us.
#   - ResNet18 (tests/models/export_torch_models.py, cached with the e2e tests) compiled with the
#     default placement (every op on the portable CPU kernels): median of RUNS calls on each
#     side and the ratio (goal: within 2%, 0.98..1.02).
# Both sides warm up 3 calls and take the same seeded random inputs (one .npz). Each figure is
# the middle of 3 rounds that alternate C++ and Python, so that drift (other load, clocks) hits
# both alike; the machine should be otherwise idle all the same.
# Builds nothing: build the kiln and kiln_python targets first.
#
# Usage: bench/python_overhead.sh [BUILD_DIR] [RUNS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
runs=${2:-20}
calls=10000
kiln=$build/tools/kiln/kiln
[ -x "$kiln" ] || { echo "python_overhead.sh: $kiln not found; build it first" >&2; exit 1; }
export PYTHONPATH="$build/python"
cache=$build/tests/e2e/ort/torch_models
/usr/bin/python3 "$root/tests/models/export_torch_models.py" "$cache" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compile() { "$kiln" compile "$1" -o "$2" >"$tmp/compile.log" 2>&1 || { cat "$tmp/compile.log" >&2; exit 1; }; }
cpp_ms() { "$kiln" bench "$1" --inputs "$2" --threads "$3" --runs "$4" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'; }
py_us() { /usr/bin/python3 "$root/bench/python_overhead.py" "$@" | sed -n 's/^python median_us //p'; }
mid() { sort -g "$1" | sed -n 2p; }
# compare KPTE NPZ THREADS CALLS: "python_us cpp_ms", each the middle of 3 alternating rounds.
compare() {
  : >"$tmp/py"
  : >"$tmp/cpp"
  for _ in 1 2 3; do
    cpp_ms "$1" "$2" "$3" $((runs * $4)) >>"$tmp/cpp"
    py_us "$1" "$2" "$3" "$runs" "$4" >>"$tmp/py"
  done
  [ "$(cat "$tmp/py" "$tmp/cpp" | wc -l)" = 6 ] || { echo "python_overhead.sh: a run of $1 failed" >&2; exit 1; }
  echo "$(mid "$tmp/py") $(mid "$tmp/cpp")"
}

cat >"$tmp/add.kir" <<'KIR'
program:
  inputs:
    %x : user_input
    %y : user_input
  outputs:
    %add : user_output
  constants:
graph():
    %x : [num_users=1] f32[1, 16] = placeholder[target=x]
    %y : [num_users=1] f32[1, 16] = placeholder[target=y]
    %add : [num_users=1] f32[1, 16] = call_function[target=add](args = (%x, %y), kwargs = {})
    return (add,)
KIR
compile "$tmp/add.kir" "$tmp/add.kpte"
compile "$cache/resnet18.onnx" "$tmp/resnet18.kpte"
/usr/bin/python3 - "$tmp" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
np.savez(f"{sys.argv[1]}/add.npz", x=rng.standard_normal((1, 16)).astype(np.float32),
         y=rng.standard_normal((1, 16)).astype(np.float32))
np.savez(f"{sys.argv[1]}/resnet18.npz", input=rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
PY

echo "per call: one add of two f32[1, 16] (python: $runs x $calls calls; C++: kiln bench, +-0.5 us)"
printf '%7s %10s %10s %12s\n' threads python_us cpp_us overhead_us
for threads in 1 2; do
  r=$(compare "$tmp/add.kpte" "$tmp/add.npz" "$threads" "$calls")
  echo "$r" | awk -v t="$threads" '{ printf "%7s %10.3f %10.0f %12.1f\n", t, $1, $2 * 1000, $1 - $2 * 1000 }'
done
echo
echo "resnet18, default placement (portable CPU kernels), median of $runs calls"
printf '%-9s %7s %10s %10s %10s\n' model threads python_ms cpp_ms python/cpp
for threads in 1 2; do
  r=$(compare "$tmp/resnet18.kpte" "$tmp/resnet18.npz" "$threads" 1)
  echo "$r" | awk -v t="$threads" '{ printf "%-9s %7s %10.3f %10.3f %10.3f\n", "resnet18", t, $1 / 1000, $2, $1 / 1000 / $2 }'
done
