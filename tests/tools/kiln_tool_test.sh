#!/usr/bin/env bash
# Runs the kiln tool as a user would and checks exit codes, messages and outputs.
# Usage: kiln_tool_test.sh KILN_BINARY SOURCE_DIR
set -uo pipefail
kiln=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

# expect CODE DESCRIPTION -- COMMAND...: runs COMMAND, checks its exit code; output in $out.
expect() {
  local code=$1 desc=$2
  shift 3
  out=$("$@" 2>"$work/stderr")
  local rc=$?
  err=$(cat "$work/stderr")
  if [[ $rc -ne $code ]]; then
    echo "FAIL: $desc: exit $rc, expected $code"
    echo "  stdout: ${out:0:500}"
    echo "  stderr: ${err:0:500}"
    failures=$((failures + 1))
    return 1
  fi
  passes=$((passes + 1))
}
contains() {  # contains DESCRIPTION HAYSTACK NEEDLE
  if [[ $2 != *"$3"* ]]; then
    echo "FAIL: $1: output lacks '$3'"
    echo "  got: ${2:0:800}"
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

expect 0 "help" -- "$kiln" --help
contains "help lists fmt" "$out" "fmt"
contains "help lists inspect" "$out" "inspect"
expect 0 "per-command help" -- "$kiln" fmt --help
contains "fmt help" "$out" "--check"
expect 2 "no command" -- "$kiln"
expect 2 "unknown command" -- "$kiln" frobnicate
expect 2 "missing argument" -- "$kiln" fmt
expect 2 "unknown option" -- "$kiln" inspect --bogus x.kir
expect 1 "missing file" -- "$kiln" fmt "$work/nope.kir"
contains "missing file message" "$err" "kiln: error: cannot read '$work/nope.kir'"

# fmt on golden files: canonical text round-trips.
for f in "$src"/tests/data/kir/*.kir; do
  expect 0 "fmt --check $(basename "$f")" -- "$kiln" fmt --check "$f"
done

# A malformed file: exit 1 with the line and column.
printf 'program:\n  inputs:\n    %%x : user_input\n  outputs:\n  constants:\ngraph():\n    %%x : [num_users=0] f32[2] = placeholder[target=x]\n    %%y : [num_users=0] f32[2] = call_function[target=no_such_op](args = (%%x,), kwargs = {})\n    return ()\n' >"$work/bad.kir"
expect 1 "unknown op" -- "$kiln" fmt "$work/bad.kir"
contains "unknown op names line" "$err" "bad.kir:8:"
contains "unknown op names op" "$err" "no_such_op"

# fmt -i rewrites a non-canonical file in place atomically.
first=$(ls "$src"/tests/data/kir/*.kir | head -n 1)
cp "$first" "$work/copy.kir"
expect 0 "fmt -i" -- "$kiln" fmt -i "$work/copy.kir"
if ! cmp -s "$first" "$work/copy.kir"; then echo "FAIL: fmt -i changed a canonical file"; failures=$((failures + 1)); fi
if ls "$work"/*.tmp >/dev/null 2>&1; then echo "FAIL: fmt -i left a temporary file"; failures=$((failures + 1)); fi

# inspect the bundled example: histogram, signature, constants.
expect 0 "inspect example" -- "$kiln" inspect "$src/examples/tinynet.onnx"
contains "inspect histogram" "$out" "convolution"
contains "inspect input" "$out" "f32[batch, 3, 32, 32]"
contains "inspect constants" "$out" "constants:"
expect 0 "inspect --graph" -- "$kiln" inspect --graph "$src/examples/tinynet.onnx"
contains "inspect graph" "$out" "call_function[target=convolution]"

# import writes every weight: running the .kir gives exactly the ONNX model's numbers.
expect 0 "import example" -- "$kiln" import "$src/examples/tinynet.onnx" -o "$work/tiny.kir"
contains "import summary" "$err" "10 constants (138536 bytes)"
expect 0 "run onnx" -- "$kiln" run "$src/examples/tinynet.onnx" --output-dir "$work/out_onnx"
onnx_line=$(grep '^output' <<<"$out")
expect 0 "run kir" -- "$kiln" run "$work/tiny.kir" --output-dir "$work/out_kir"
kir_line=$(grep '^output' <<<"$out")
if [[ -z $onnx_line || $onnx_line != "$kir_line" ]]; then
  echo "FAIL: imported .kir runs differently: '$onnx_line' vs '$kir_line'"; failures=$((failures + 1))
fi
if ! cmp -s "$work/out_onnx/_Softmax.npy" "$work/out_kir/_Softmax.npy"; then
  echo "FAIL: output .npy files differ between the .onnx and the imported .kir"; failures=$((failures + 1))
fi
expect 1 "run with a wrong input shape" -- "$kiln" run "$src/examples/tinynet.onnx" --input "image=$work/out_kir/_Softmax.npy"
contains "input mismatch names the input" "$err" "input 'image'"

echo "kiln_tool_e2e: $passes passed, $failures failed"
[[ $failures -eq 0 ]]
