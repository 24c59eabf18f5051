#!/usr/bin/env bash
# Runs the kiln tool as a user would and checks exit codes, messages and outputs.
# Usage: kiln_tool_test.sh KILN_BINARY SOURCE_DIR KILN_RUNNER_BINARY
set -uo pipefail
kiln=$1
src=$2
runner=$3
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
not_contains() {  # not_contains DESCRIPTION HAYSTACK NEEDLE
  if [[ $2 == *"$3"* ]]; then
    echo "FAIL: $1: output has '$3'"
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
contains "missing file message" "$err" "kiln: error: '$work/nope.kir': no such file"

# Every .kir checked in (goldens, delegated programs, fuzz seeds) is in canonical form: kiln fmt
# prints it back byte for byte.
while IFS= read -r f; do
  expect 0 "fmt --check ${f#$src/}" -- "$kiln" fmt --check "$f"
done < <(find "$src/tests" "$src/fuzz/corpus" -name '*.kir' | sort)

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
no_temp_files() {  # no_temp_files DESCRIPTION DIR: a write left no temporary file behind
  if [[ -n $(find "$2" -maxdepth 1 -name '*.tmp' -print -quit) ]]; then
    echo "FAIL: $1 left a temporary file: $(find "$2" -maxdepth 1 -name '*.tmp')"; failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}
no_temp_files "fmt -i" "$work"
# fmt rewrites a file with large constants without losing their values.
"$kiln" import "$src/examples/tinynet.onnx" -o "$work/full.kir" 2>/dev/null
expect 0 "fmt --check on an imported program" -- "$kiln" fmt --check "$work/full.kir"

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
if ! cmp -s "$work/out_onnx/probs.npy" "$work/out_kir/probs.npy"; then
  echo "FAIL: output .npy files differ between the .onnx and the imported .kir"; failures=$((failures + 1))
fi
contains "outputs carry the model's own names" "$onnx_line" "output 'probs': f32[1, 10]"
contains "run places the model on xnnpack by default" "$out" "delegated to xnnpack"
# The portable kernels alone: the reference the delegated programs below match bit for bit, and
# within float rounding of the default placement.
expect 0 "run onnx on portable kernels" -- "$kiln" run "$src/examples/tinynet.onnx" --backend portable --output-dir "$work/out_portable"
not_contains "--backend portable delegates nothing" "$out" "delegated to"
if ! /usr/bin/python3 -c "import numpy as np, sys; a, b = (np.load(f) for f in sys.argv[1:]); sys.exit(not np.allclose(a, b, rtol=1e-4, atol=1e-5))" \
    "$work/out_onnx/probs.npy" "$work/out_portable/probs.npy"; then
  echo "FAIL: xnnpack and portable outputs differ beyond rounding"; failures=$((failures + 1))
fi
expect 1 "run with a wrong input shape" -- "$kiln" run "$src/examples/tinynet.onnx" --input "image=$work/out_kir/probs.npy"
contains "input mismatch names the input" "$err" "input 'image'"

# A partitioned program written in full runs with the same numbers and is canonical .kir.
ops=convolution,relu,hardswish,add,cat,max_pool2d,avg_pool2d,flatten,linear
expect 0 "partition -o" -- "$kiln" partition "$src/examples/tinynet.onnx" --backend demo --ops "$ops" -o "$work/tiny_delegated.kir"
contains "partition prints .kir" "$out" "lowered_module_0 = lowered(backend=demo, compile_specs={ops: \"$ops\"}"
contains "partition keeps the output name" "$out" "user_output(name=probs)"
expect 0 "fmt --check the delegated program" -- "$kiln" fmt --check "$work/tiny_delegated.kir"
expect 0 "run the delegated program" -- "$kiln" run "$work/tiny_delegated.kir" --backend portable --output-dir "$work/out_delegated"
if ! cmp -s "$work/out_portable/probs.npy" "$work/out_delegated/probs.npy"; then
  echo "FAIL: the delegated program's output differs from the model's"; failures=$((failures + 1))
fi
# What partition prints on the terminal (blobs by size) parses too, but has no blob to run.
"$kiln" partition "$src/examples/tinynet.onnx" --backend demo --ops "$ops" >"$work/summary.kir" 2>/dev/null
sed -i '/^$/,$d' "$work/summary.kir"  # drop the summary lines after the program
expect 0 "fmt --check the printed summary" -- "$kiln" fmt --check "$work/summary.kir"
expect 1 "run a program whose blobs were printed by size" -- "$kiln" run "$work/summary.kir"
contains "size-only blob message" "$err" "its blob was given by size only"

# ---- Program files: compile, inspect, run with kiln and with kiln-runner.
tiny=$src/examples/tinynet.onnx
expect 1 "compile without a range for a symbolic dim" -- "$kiln" compile "$tiny" -o "$work/tiny.kpte"
contains "the symbolic dim is named" "$err" "input 'image' f32[batch, 3, 32, 32] has the symbolic dim 'batch'; give the range to plan it for: --dim batch=MIN..MAX"
expect 0 "compile across the demo backend" -- "$kiln" compile "$tiny" --backend demo --ops "$ops" --dim batch=1..8 -o "$work/tiny.kpte"
contains "compile reports the partitions" "$out" "method 'forward' ($tiny): 2 partition(s), 13 of 15 calls delegated to demo"
contains "compile reports the arena" "$out" "arena: "
contains "compile says where it wrote" "$out" "wrote $work/tiny.kpte"
no_temp_files "compile -o" "$work"
expect 0 "inspect a program file" -- "$kiln" inspect --verify "$work/tiny.kpte"
contains "inspect verifies checksums" "$out" "checksums: all 3 segments match"
contains "weights are named data in the constant segment" "$out" "named data 132.8 KiB (8 entries)"
contains "inspect shows the signature" "$out" "image                            f32[batch, 3, 32, 32]"
contains "inspect shows symbolic dims at their bound" "$out" "symbolic dims, planned at their upper bounds: batch in 1..8"
contains "inspect shows delegates and specs" "$out" "compile spec ops = '$ops'"
contains "inspect shows segments and users" "$out" "used by forward/lowered_module_0"
expect 0 "run the program file" -- "$kiln" run "$work/tiny.kpte" --verify --output-dir "$work/out_kpte"
if ! cmp -s "$work/out_portable/probs.npy" "$work/out_kpte/probs.npy"; then
  echo "FAIL: the program file's output differs from the model's"; failures=$((failures + 1))
fi
expect 0 "run the model with the interpreter" -- "$kiln" run "$tiny" --interpreter --output-dir "$work/out_interp"
if ! cmp -s "$work/out_interp/probs.npy" "$work/out_kpte/probs.npy"; then
  echo "FAIL: the program file's output is not bit-identical to the interpreter's"; failures=$((failures + 1))
fi
/usr/bin/python3 -c "import numpy as np; np.save('$work/image4.npy', np.random.default_rng(1).standard_normal((4, 3, 32, 32)).astype(np.float32))"
expect 0 "run the program file at batch 4" -- "$kiln" run "$work/tiny.kpte" --input "image=$work/image4.npy" --output-dir "$work/out_b4"
expect 0 "kiln-runner runs the file" -- "$runner" "$work/tiny.kpte" --input "image=$work/image4.npy" --output-dir "$work/out_runner" --verify
contains "kiln-runner names outputs" "$out" "output 'probs': f32[4, 10]"
if ! cmp -s "$work/out_b4/probs.npy" "$work/out_runner/probs.npy"; then
  echo "FAIL: kiln-runner and kiln run differ"; failures=$((failures + 1))
fi
# ONNX test data: inputs as serialized TensorProtos (.pb), as ONNX's conformance suite holds them.
/usr/bin/python3 -c "
import numpy as np
from onnx import numpy_helper
x = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype(np.float32)
open('$work/image.pb', 'wb').write(numpy_helper.from_array(x, 'image').SerializeToString())
np.save('$work/image2.npy', x)"
expect 0 "run with a .pb input" -- "$kiln" run "$work/tiny.kpte" --input "image=$work/image.pb" --output-dir "$work/out_pb"
expect 0 "run with the same input as .npy" -- "$kiln" run "$work/tiny.kpte" --input "image=$work/image2.npy" --output-dir "$work/out_npy2"
if ! cmp -s "$work/out_pb/probs.npy" "$work/out_npy2/probs.npy"; then
  echo "FAIL: a .pb input gives other outputs than the same .npy"; failures=$((failures + 1))
fi
printf 'not a tensor' >"$work/bad.pb"
expect 1 "a malformed .pb input" -- "$kiln" run "$work/tiny.kpte" --input "image=$work/bad.pb"
contains "the malformed .pb is named" "$err" "'$work/bad.pb': not a serialized ONNX TensorProto (12 bytes)"
expect 0 "kiln-runner with default inputs" -- "$runner" "$work/tiny.kpte"
contains "kiln-runner fills inputs with ones" "$out" "input 'image': all ones f32[1, 3, 32, 32]"
expect 0 "bench a program file" -- "$kiln" bench "$work/tiny.kpte" --runs 3 --warmup 1
contains "bench names the engine" "$out" "(runtime)"
expect 0 "bench with the time per op" -- "$kiln" bench "$work/tiny.kpte" --runs 3 --warmup 1 --op-times
contains "op times: the table" "$out" "time per op (mean of 3 runs, each instruction timed)"
contains "op times: a delegate call is a row" "$out" "  delegate lowered_module_0 (demo) "
contains "op times: an op left on the portable kernels" "$out" "  gelu "
contains "op times: the total" "$out" "all instructions"
expect 1 "--op-times with the interpreter" -- "$kiln" bench "$tiny" --interpreter --op-times
contains "--op-times needs the runtime" "$err" "--op-times times the runtime's instructions; drop --interpreter"
# OpenBLAS falls back to its generic Prescott kernels on CPU models it does not know (VMs); kiln
# restarts itself with the kernels the CPU runs.
if grep -qw avx2 /proc/cpuinfo; then
  expect 0 "bench without OPENBLAS_CORETYPE" -- env -u OPENBLAS_CORETYPE "$kiln" bench "$work/tiny.kpte" --runs 1 --warmup 0
  not_contains "OpenBLAS runs the CPU's own kernels" "$out" "BLAS core Prescott"
fi
expect 1 "run a program file with --interpreter" -- "$kiln" run "$work/tiny.kpte" --interpreter
contains "--interpreter needs the IR" "$err" "--interpreter runs a model's IR"
expect 1 "run a missing method" -- "$kiln" run "$work/tiny.kpte" --method decode
contains "missing method named" "$err" "method 'decode' is not in the program (methods: forward)"
expect 0 "compile two methods" -- "$kiln" compile --method "forward=$tiny" --method "again=$work/tiny.kir" --dim batch=1 -o "$work/two.kpte"
contains "two methods" "$out" "2 method(s)"
contains "one constant segment for both" "$out" "used by forward, again"
expect 0 "run the second method" -- "$kiln" run "$work/two.kpte" --method again
expect 1 "compile a program file" -- "$kiln" compile "$work/tiny.kpte" -o "$work/x.kpte"
contains "compile takes models" "$err" "is a compiled program file"
head -c 100 "$work/tiny.kpte" >"$work/cut.kpte"
expect 1 "run a truncated program file" -- "$kiln" run "$work/cut.kpte"
contains "truncated named" "$err" "kiln: error: $work/cut.kpte: invalid program: header: the header says the file has"
expect 1 "kiln-runner on a truncated file" -- "$runner" "$work/cut.kpte"
contains "kiln-runner names the problem" "$err" "kiln-runner: error: $work/cut.kpte: invalid program: header:"

# ---- Hostile and careless input: a clear error, never an abort (exit 134) or a huge allocation.
# Each runs under a 4 GiB address-space cap, so an unchecked allocation of the sizes below fails
# the test instead of the machine.
models="$work/hostile"
/usr/bin/python3 "$src/tests/tools/make_hostile_models.py" "$models"
capped() { (ulimit -v 4194304; "$@"); }
expect 1 "initializer of 2^40 bytes without data" -- capped "$kiln" run "$models/huge_initializer.onnx"
contains "huge initializer named" "$err" "initializer 'w': field 'float_data' has 0 values, expected 274877906944 for f32[262144, 1048576] (the tensor has no data)"
expect 1 "short raw_data declaring 8 GiB" -- capped "$kiln" run "$models/short_raw_data.onnx"
contains "short raw_data named" "$err" "initializer 'w': field 'raw_data' has 16 bytes, expected 8589934592"
expect 1 "input of 2^40 elements" -- capped "$kiln" run "$models/huge_input.onnx"
contains "huge input is resource exhausted" "$err" "input 'x' (f32[1048576, 1048576]) needs 4.0 TiB, more than kiln's memory limit"
for m in constant_of_shape_16g expand_16g; do
  expect 1 "$m over --max-memory" -- capped "$kiln" run "$models/$m.onnx" --max-memory 1GiB
  contains "$m names the node" "$err" "f32[4, 1073741824] needs 16.0 GiB (with 0 B of activations live), more than kiln's memory limit of 1.0 GiB (--max-memory)"
  expect 1 "$m when memory runs out" -- capped "$kiln" run "$models/$m.onnx" --max-memory 1TiB
  contains "$m cannot allocate" "$err" "resource exhausted"
  contains "$m cannot allocate names the node" "$err" "cannot allocate 16.0 GiB for f32[4, 1073741824]"
done
expect 1 "KILN_MAX_MEMORY applies" -- env KILN_MAX_MEMORY=64M "$kiln" run "$models/expand_16g.onnx"
contains "KILN_MAX_MEMORY named" "$err" "more than kiln's memory limit of 64.0 MiB (KILN_MAX_MEMORY)"
expect 2 "--max-memory must be a size" -- "$kiln" run "$models/expand_16g.onnx" --max-memory lots
expect 1 "--input naming a directory" -- "$kiln" run "$models/named_outputs.onnx" --input "input.1=$work"
contains "--input directory message" "$err" "'$work' is a directory, expected a file"
expect 1 "--inputs naming a directory" -- "$kiln" run "$models/named_outputs.onnx" --inputs "$work"
contains "--inputs directory message" "$err" "'$work' is a directory, expected a file"
expect 1 "fmt of a directory" -- "$kiln" fmt "$work"
contains "fmt directory message" "$err" "'$work' is a directory, expected a file"
expect 1 "inspect of a directory named .onnx" -- "$kiln" inspect "$models/ext"
contains "inspect directory message" "$err" "is a directory, expected a file"
expect 1 "external data through a link out of the folder" -- "$kiln" inspect "$models/ext/model.onnx"
contains "link refusal says why" "$err" "'data' is a symbolic link to a place outside the model's folder"
if [[ $err == *"$models/outside"* ]]; then
  echo "FAIL: the link refusal prints the resolved path: $err"; failures=$((failures + 1))
fi

# Constants are shared, not copied, on the way through import and lowering: with one 64 MiB
# weight, import holds it about 1.5 times (protobuf's buffer; 3 before: file, proto, tensor), partition
# about twice (weight + blob; 5 before, with the blob as text).
peak_mib() { /usr/bin/time -f '%M' -o "$work/rss" "$@" >/dev/null 2>&1 && echo $(($(cat "$work/rss") / 1024)); }
base=$(peak_mib "$kiln" inspect "$models/named_outputs.onnx")
for step in "inspect:150" "partition:200"; do
  cmd=${step%%:*} limit=${step##*:}
  if [[ $cmd == inspect ]]; then
    mib=$(peak_mib "$kiln" inspect "$models/weight_64m.onnx")
  else
    mib=$(peak_mib "$kiln" partition "$models/weight_64m.onnx" --backend demo --ops mm,matmul,relu)
  fi
  if [[ -z $mib || $((mib - base)) -gt $limit ]]; then
    echo "FAIL: $cmd of a 64 MiB weight peaks at ${mib:-?} MiB (base $base MiB), over +$limit MiB"; failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
done

# Output and input names are the model's own (ONNX Runtime's), also as file names.
expect 0 "run a model with named outputs" -- "$kiln" run "$models/named_outputs.onnx" --output-dir "$work/named"
contains "output y" "$out" "output 'y': f32[2, 3]"
contains "output probs" "$out" "output 'probs': f32[2, 3]"
contains "input keeps its dotted name" "$out" "input 'input.1': no file given"
if [[ ! -f $work/named/y.npy || ! -f $work/named/probs.npy ]]; then
  echo "FAIL: outputs not written under their names: $(ls "$work/named")"; failures=$((failures + 1))
fi
expect 0 "input by its model name" -- "$kiln" run "$models/named_outputs.onnx" --input "input.1=$work/named/y.npy"
expect 0 "inspect shows the model's names" -- "$kiln" inspect "$models/named_outputs.onnx"
contains "inspect output name" "$out" "probs"
contains "inspect input name" "$out" "input.1"

# -o never writes through a planted link, and leaves no temporary file behind.
mkdir -p "$work/out"
echo "precious" >"$work/victim"
for name in tiny.kir tiny.kir.tmp; do ln -sf "$work/victim" "$work/out/$name.tmp"; done
expect 0 "import -o beside planted links" -- "$kiln" import "$src/examples/tinynet.onnx" -o "$work/out/tiny.kir"
if [[ $(cat "$work/victim") != precious ]]; then
  echo "FAIL: kiln wrote through a planted link"; failures=$((failures + 1))
fi
rm -f "$work/out"/*.tmp
no_temp_files "import -o" "$work/out"
ln -s "$work/victim" "$work/out/link.kir"
expect 0 "import -o onto a link replaces the link" -- "$kiln" import "$src/examples/tinynet.onnx" -o "$work/out/link.kir"
if [[ $(cat "$work/victim") != precious || -L $work/out/link.kir ]]; then
  echo "FAIL: -o onto a link wrote through it"; failures=$((failures + 1))
fi
expect 1 "import -o onto a directory" -- "$kiln" import "$src/examples/tinynet.onnx" -o "$work/out"
contains "output directory message" "$err" "is a directory, expected a file to write"
expect 1 "import -o into a missing folder" -- "$kiln" import "$src/examples/tinynet.onnx" -o "$work/nope/x.kir"
contains "missing folder message" "$err" "cannot write '$work/nope/x.kir'"
no_temp_files "failed import -o" "$work/out"

# kiln quantize: calibrate on the bundled samples, report, write a .kir that run and compile take.
calib=$src/examples/calib
expect 0 "quantize tinynet" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$calib" --report -o "$work/q.kir"
contains "quantize observers" "$out" "calibrated 15 observer(s) on 16 sample(s) in"
contains "quantize report header" "$out" "per-layer SQNR against the float model (16 sample(s), worst first)"
contains "quantize output SQNR" "$out" "output 'probs': SQNR"
contains "quantize top-1" "$out" "top-1 agreement:"
contains "quantize wrote" "$out" "wrote $work/q.kir: 17 layer(s)"
expect 0 "quantized .kir is canonical" -- "$kiln" fmt --check "$work/q.kir"
expect 0 "run the quantized .kir" -- "$kiln" run "$work/q.kir" --inputs "$calib/00.npz" --interpreter --output-dir "$work/qi"
expect 0 "compile the quantized .kir" -- "$kiln" compile "$work/q.kir" --dim batch=1..4 -o "$work/q.kpte"
expect 0 "run the quantized program" -- "$kiln" run "$work/q.kpte" --inputs "$calib/00.npz" --output-dir "$work/qr"
if ! cmp -s "$work/qi/probs.npy" "$work/qr/probs.npy"; then
  echo "FAIL: quantized program differs from the interpreter"; failures=$((failures + 1))
fi
expect 0 "quantize 16a4w per tensor, skipping softmax" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$calib/03.npz" --config 16a4w --per-tensor --skip-op softmax --skip-node _head_head_3_Gemm -o "$work/q4.kir"
contains "skip names nodes" "$out" "kept float: 2 node(s): _head_head_3_Gemm, _Softmax"
contains "skip names weights" "$out" "kept float: 2 weight(s) read only by those nodes: head_3_weight, head_3_bias"
expect 0 "auto mixed precision" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$calib" --observer histogram --auto-mixed --target-sqnr 45 -o "$work/qm.kir"
contains "mixed table" "$out" "mixed precision, per layer"
contains "mixed reached" "$out" "target reached"
expect 1 "unknown config" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$calib" --config 4a4w -o "$work/x.kir"
contains "unknown config message" "$err" "unknown quantization config '4a4w' (known: 8a8w, 16a4w, 16a8w, 16a16w)"
mkdir -p "$work/empty"
expect 1 "empty calibration folder" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$work/empty" -o "$work/x.kir"
contains "empty folder message" "$err" "holds no .npz files"
/usr/bin/python3 -c "import numpy as np; np.savez('$work/wrong_name.npz', img=np.zeros((1,3,32,32), np.float32)); np.savez('$work/wrong_shape.npz', image=np.zeros((1,3,16,16), np.float32)); np.savez('$work/wrong_dtype.npz', image=np.zeros((1,3,32,32), np.float64))"
expect 1 "calibration input name" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$work/wrong_name.npz" -o "$work/x.kir"
contains "input name message" "$err" "'img' is not an input of the model (inputs: image)"
expect 1 "calibration shape" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$work/wrong_shape.npz" -o "$work/x.kir"
contains "shape message" "$err" "input 'image' is f32[1, 3, 16, 16], expected f32[batch, 3, 32, 32]"
expect 1 "calibration dtype" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$work/wrong_dtype.npz" -o "$work/x.kir"
contains "dtype message" "$err" "input 'image' is f64[1, 3, 32, 32], expected f32[batch, 3, 32, 32]"
expect 1 "auto-mixed without a target" -- "$kiln" quantize "$src/examples/tinynet.onnx" --calib "$calib" --auto-mixed -o "$work/x.kir"
contains "target message" "$err" "--auto-mixed needs --target-sqnr DB"
expect 1 "quantize a quantized model" -- "$kiln" quantize "$work/q.kir" --calib "$calib" -o "$work/x.kir"
contains "already quantized message" "$err" "already quantized"
if [[ -e $work/x.kir ]]; then echo "FAIL: a failed quantize wrote its output"; failures=$((failures + 1)); fi

# The HTP backend: quantize and compile in one command, run, profile, dump, inspect; fp16; the
# compile spec's checks one by one.
expect 0 "htp 8a8w compile" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --soc SM8650 --quant 8a8w --calib "$calib" --dim batch=1..1 --profile-level optrace --dump-intermediate-outputs -o "$work/h.kpte"
contains "htp accuracy table" "$out" "per-layer SQNR against the float model"
contains "htp delegated" "$out" "calls delegated to htp"
expect 0 "htp run" -- "$kiln" run "$work/h.kpte" --inputs "$calib/00.npz" --output-dir "$work/hr" --profile "$work/h.json" --dump "$work/hd"
contains "htp profile summary" "$out" "profile: HTP graph 'forward'"
contains "htp dump count" "$out" "intermediate output(s) to $work/hd"
/usr/bin/python3 -c "import json,sys; d=json.load(open('$work/h.json')); sys.exit(0 if any(e['ph']=='X' for e in d['traceEvents']) else 1)" || { echo "FAIL: the profile is not a Chrome trace"; failures=$((failures + 1)); }
expect 0 "compare dumps with the float model" -- "$kiln" compare "$src/examples/tinynet.onnx" "$work/hd" --inputs "$calib/00.npz"
contains "compare table" "$out" "per-layer SQNR of"
contains "compare last layer" "$out" "last compared layer '_Softmax': SQNR"
/usr/bin/python3 - "$out" <<'PY' || { echo "FAIL: compare's SQNRs are not those of a working 8a8w model"; failures=$((failures + 1)); }
import re, sys
dbs = [float(x) for x in re.findall(r"^  \S+\s+(-?[0-9.]+)(?:\s+NHWC)?\s*$", sys.argv[1], re.M)]
assert len(dbs) >= 10 and min(dbs) > 25, dbs
PY
expect 1 "compare without dumps" -- "$kiln" compare "$src/examples/tinynet.onnx" "$work/empty" --inputs "$calib/00.npz"
contains "compare without dumps message" "$err" "no dumped tensor in"
expect 0 "fake-quant reference" -- "$kiln" run "$work/q.kir" --inputs "$calib/00.npz" --interpreter --output-dir "$work/hq"
expect 0 "htp inspect" -- "$kiln" inspect "$work/h.kpte"
contains "inspect shows the context" "$out" "HTP context v1 (kiln): SoC SM8650 (V75, 8 MB VTCM), quantized precision"
contains "inspect shows the options" "$out" "profile_level: optrace"
expect 0 "htp fp16" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --precision fp16 --soc SM8550 --dim batch=1..1 -o "$work/hf.kpte"
contains "fp16 all delegated" "$out" "15 of 15 calls delegated to htp"
expect 0 "htp fp16 run" -- "$kiln" run "$work/hf.kpte" --inputs "$calib/00.npz" --output-dir "$work/hfr"
expect 0 "float reference" -- "$kiln" run "$src/examples/tinynet.onnx" --inputs "$calib/00.npz" --interpreter --output-dir "$work/hfi"
/usr/bin/python3 - "$work" <<'PY' || { echo "FAIL: HTP outputs against their references"; failures=$((failures + 1)); }
import sys, numpy as np
w = sys.argv[1]
fp16, ref = np.load(f"{w}/hfr/probs.npy"), np.load(f"{w}/hfi/probs.npy")
assert np.array_equal(fp16, fp16.astype(np.float16).astype(np.float32)), "fp16 outputs are not half values"
assert np.allclose(fp16, ref, rtol=2e-2, atol=2e-3), (fp16, ref)
q, fq = np.load(f"{w}/hr/probs.npy"), np.load(f"{w}/hq/probs.npy")
step = 1.0 / 255  # softmax output: fixed range [0, 1]
assert np.max(np.abs(q - fq)) <= step + 1e-6, np.max(np.abs(q - fq)) / step
PY
# 16-bit activations on the HTP: 16a8w and 16a16w compile and run close to the float model.
for cfg in 16a8w 16a16w; do
  expect 0 "htp $cfg compile" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --quant $cfg --calib "$calib" --dim batch=1..1 -o "$work/h$cfg.kpte"
  if [[ $out =~ 1\ partition\(s\),\ ([0-9]+)\ of\ ([0-9]+)\ calls && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]; then
    passes=$((passes + 1))
  else
    echo "FAIL: htp $cfg: not every call in one HTP partition"; failures=$((failures + 1))
  fi
  expect 0 "htp $cfg run" -- "$kiln" run "$work/h$cfg.kpte" --inputs "$calib/00.npz" --output-dir "$work/h${cfg}r"
done
/usr/bin/python3 - "$work" <<'PY' || { echo "FAIL: 16-bit HTP outputs against the float model"; failures=$((failures + 1)); }
import sys, numpy as np
w = sys.argv[1]
ref = np.load(f"{w}/hfi/probs.npy")
for cfg in ("16a8w", "16a16w"):
    got = np.load(f"{w}/h{cfg}r/probs.npy")
    assert np.max(np.abs(got - ref)) < 1e-2, (cfg, np.max(np.abs(got - ref)))
PY
# tag_quant_io: the input takes u8 codes and the output returns them, the same numbers as the
# program with real I/O.
expect 0 "quant-io compile" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --quant-io image,probs --dim batch=1..1 -o "$work/hio.kpte"
contains "quant-io input encoding" "$out" "input 'image' carries u8 codes: real = "
contains "quant-io output encoding" "$out" "output 'probs' carries u8 codes: real = "
echo "$out" >"$work/hio.log"
/usr/bin/python3 - "$work" "$calib/00.npz" <<'PY' || { echo "FAIL: quantizing the quant-io input"; failures=$((failures + 1)); }
import re, sys, numpy as np
w, npz = sys.argv[1:]
s, z = re.search(r"input 'image' carries u8 codes: real = (\S+) \* \(code - (-?\d+)\)", open(f"{w}/hio.log").read()).groups()
x = np.load(npz)["image"]
np.save(f"{w}/codes.npy", np.clip(np.rint(x / np.float32(s)) + int(z), 0, 255).astype(np.uint8))
PY
expect 0 "quant-io run" -- "$kiln" run "$work/hio.kpte" --input "image=$work/codes.npy" --output-dir "$work/hior"
/usr/bin/python3 - "$work" <<'PY' || { echo "FAIL: quant-io outputs against the real-I/O program"; failures=$((failures + 1)); }
import re, sys, numpy as np
w = sys.argv[1]
s, z = re.search(r"output 'probs' carries u8 codes: real = (\S+) \* \(code - (-?\d+)\)", open(f"{w}/hio.log").read()).groups()
codes = np.load(f"{w}/hior/probs.npy")
assert codes.dtype == np.uint8, codes.dtype
real = np.float32(s) * (codes.astype(np.float32) - int(z))
want = np.load(f"{w}/hr/probs.npy")
assert np.max(np.abs(real - want)) <= float(s) + 1e-6, np.max(np.abs(real - want)) / float(s)
PY
expect 1 "quant-io unknown name" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --quant-io nosuch --dim batch=1..1 -o "$work/x.kpte"
contains "quant-io unknown name message" "$err" "'nosuch' is not a user input or output"
expect 1 "quant-io on a float model" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --precision fp16 --quant-io image --dim batch=1..1 -o "$work/x.kpte"
contains "quant-io float message" "$err" "input 'image' is read as real numbers"
expect 1 "fp16 on a V68 SoC" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --precision fp16 --soc SM8350 --dim batch=1..1 -o "$work/x.kpte"
contains "V68 message" "$err" "V69"
expect 1 "unknown SoC" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --soc SM9999 --dim batch=1..1 -o "$work/x.kpte"
contains "unknown SoC message" "$err" "SM9999"
expect 1 "unknown precision" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --precision int3 --dim batch=1..1 -o "$work/x.kpte"
contains "unknown precision message" "$err" "int3"
expect 0 "profile with dump warns" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --precision fp16 --profile-level detailed --dump-intermediate-outputs --dim batch=1..1 -o "$work/x.kpte"
contains "profile+dump warning" "$out" "kiln: warning:"
expect 1 "quantized HTP needs a quantized model" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --dim batch=1..1 -o "$work/x.kpte"
contains "not quantized message" "$err" "is a float model and the HTP precision is quantized"
expect 0 "saver" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --precision fp16 --saver --dim batch=1..1 -o "$work/hs.kpte"
expect 1 "a saver blob does not run" -- "$kiln" run "$work/hs.kpte"
contains "saver message" "$err" "QNN saver's JSON record"
expect 1 "profile without a profile level" -- "$kiln" run "$work/hf.kpte" --profile "$work/x.json"
contains "profile level message" "$err" "--profile-level"
# use_dlbc, shared_buffer, use_conv_hmx and pd_session from the command line: the same codes come
# out; without a shared buffer the profile counts the copied I/O bytes, with it none.
expect 0 "htp plain compile" -- "$kiln" compile "$work/q.kir" --backend htp --dim batch=1..1 --profile-level basic -o "$work/hp.kpte"
expect 0 "htp option compile" -- "$kiln" compile "$work/q.kir" --backend htp --dim batch=1..1 --profile-level basic --dlbc --shared-buffer --no-conv-hmx --pd-session signed_pd -o "$work/ho.kpte"
expect 0 "htp plain run" -- "$kiln" run "$work/hp.kpte" --inputs "$calib/00.npz" --output-dir "$work/hpr" --profile "$work/x.json"
contains "copies without a shared buffer" "$out" ", 12328 I/O bytes copied"
expect 0 "htp option run" -- "$kiln" run "$work/ho.kpte" --inputs "$calib/00.npz" --output-dir "$work/hor" --profile "$work/x.json"
contains "no copies with a shared buffer" "$out" ", 0 I/O bytes copied"
cmp -s "$work/hpr/probs.npy" "$work/hor/probs.npy" || { echo "FAIL: --dlbc --shared-buffer --no-conv-hmx changed the outputs"; failures=$((failures + 1)); }
expect 0 "inspect the options" -- "$kiln" inspect "$work/ho.kpte"
contains "inspect pd_session" "$out" "pd_session: signed_pd"
contains "inspect dlbc" "$out" "(stored deflate-compressed: use_dlbc)"
expect 1 "unknown pd session" -- "$kiln" compile "$work/q.kir" --backend htp --pd-session secure --dim batch=1..1 -o "$work/x.kpte"
contains "pd session message" "$err" "secure"

# Context binaries out and in: compile -> --emit-context -> from-context -> run gives the same
# outputs (quantized and fp16).
for prec in quantized fp16; do
  model="$work/q.kir"; [ $prec = fp16 ] && model="$src/examples/tinynet.onnx"
  expect 0 "emit-context $prec" -- "$kiln" compile "$model" --backend htp --precision $prec --dim batch=1..1 --emit-context "$work/ctx_$prec" -o "$work/ec_$prec.kpte"
  contains "emit-context $prec wrote" "$out" "wrote $work/ctx_$prec/forward_lowered_module_0.bin (HTP context binary"
  expect 0 "from-context $prec" -- "$kiln" from-context "$work/ctx_$prec/forward_lowered_module_0.bin" --op loader -o "$work/fc_$prec.kpte"
  contains "from-context $prec graph" "$out" "context graph 'forward': 1 input(s), 1 output(s)"
  expect 0 "run compiled $prec" -- "$kiln" run "$work/ec_$prec.kpte" --inputs "$calib/00.npz" --output-dir "$work/ecr_$prec"
  expect 0 "run from-context $prec" -- "$kiln" run "$work/fc_$prec.kpte" --inputs "$calib/00.npz" --output-dir "$work/fcr_$prec"
  /usr/bin/python3 - "$work/ecr_$prec" "$work/fcr_$prec" <<'PY' || { echo "FAIL: from-context $prec outputs differ from the compiled program's"; failures=$((failures + 1)); }
import glob, sys, numpy as np
a = [np.load(f) for f in sorted(glob.glob(sys.argv[1] + "/*.npy"))]
b = [np.load(f) for f in sorted(glob.glob(sys.argv[2] + "/*.npy"))]
assert len(a) == len(b) == 1 and a[0].dtype == b[0].dtype and np.array_equal(a[0], b[0]), (a, b)
PY
done
expect 1 "from-context on a wrong SoC" -- "$kiln" from-context "$work/ctx_fp16/forward_lowered_module_0.bin" --soc SM8550 -o "$work/x.kpte"
contains "from-context SoC message" "$err" "built for SoC SM8650, not SM8550"
expect 1 "from-context on a non-context" -- "$kiln" from-context "$work/q.kir" -o "$work/x.kpte"
contains "from-context non-context message" "$err" "not a kiln HTP context binary"
# Several graphs in one context (the prefill / decode example): one copy of the weights in the
# file, both methods run and match the float model.
dec="$src/examples/decoder"
expect 0 "multiple graphs compile" -- "$kiln" compile --method "prefill=$dec/prefill.onnx" --method "decode=$dec/decode.onnx" --backend htp --precision fp16 --multiple-graphs -o "$work/dec.kpte"
contains "multiple graphs shared" "$out" "multiple graphs: 2 graph(s) in one context binary"
expect 0 "prefill alone" -- "$kiln" compile "$dec/prefill.onnx" --backend htp --precision fp16 -o "$work/prefill.kpte"
expect 0 "decode alone" -- "$kiln" compile "$dec/decode.onnx" --backend htp --precision fp16 -o "$work/decode.kpte"
for m in prefill decode; do
  expect 0 "run $m from the shared file" -- "$kiln" run "$work/dec.kpte" --method $m --inputs "$dec/$m.npz" --output-dir "$work/dec_$m"
  expect 0 "float $m" -- "$kiln" run "$dec/$m.onnx" --interpreter --inputs "$dec/$m.npz" --output-dir "$work/decf_$m"
done
/usr/bin/python3 - "$work" <<'PY' || { echo "FAIL: the multiple-graph file"; failures=$((failures + 1)); }
import os, sys, numpy as np
w = sys.argv[1]
shared, alone = os.path.getsize(f"{w}/dec.kpte"), os.path.getsize(f"{w}/prefill.kpte") + os.path.getsize(f"{w}/decode.kpte")
assert shared < 0.6 * alone, (shared, alone)  # the weights once, not twice
for m in ("prefill", "decode"):
    for o in ("hidden", "k_new", "v_new"):
        got, want = np.load(f"{w}/dec_{m}/{o}.npy"), np.load(f"{w}/decf_{m}/{o}.npy")
        assert got.shape == want.shape and np.abs(got - want).max() < 1e-2 * max(1, np.abs(want).max()), (m, o)
PY
# Multi contexts: a model sharded into several contexts (--max-partition-nodes) that share one
# spill-fill buffer; the outputs are those of one context.
expect 0 "multi contexts" -- "$kiln" compile "$dec/prefill.onnx" --backend htp --precision fp16 --soc SXR1230P --multi-contexts --max-partition-nodes 20 -o "$work/mc.kpte"
contains "multi contexts shards" "$out" "4 partition(s), 75 of 75 calls delegated to htp"
contains "multi contexts buffer" "$out" "multi contexts: 4 HTP context(s) share one spill-fill buffer of"
expect 0 "run multi contexts" -- "$kiln" run "$work/mc.kpte" --inputs "$dec/prefill.npz" --output-dir "$work/mc_out"
cmp -s "$work/mc_out/hidden.npy" "$work/dec_prefill/hidden.npy" || { echo "FAIL: sharded contexts changed the outputs"; failures=$((failures + 1)); }
expect 1 "multiple graphs without htp" -- "$kiln" compile --method "a=$src/examples/tinynet.onnx" --multiple-graphs --dim batch=1..1 -o "$work/x.kpte"
contains "multiple graphs without htp message" "$err" "--multiple-graphs needs --backend htp"
expect 1 "emit-context without htp" -- "$kiln" compile "$src/examples/tinynet.onnx" --dim batch=1..1 --emit-context "$work/ctx_none" -o "$work/x.kpte"
contains "emit-context without htp message" "$err" "no HTP partition"

# Mixed precision (skip_annotation): the softmax kept in floating point, on the CPU or on the HTP
# in fp16; the partition report says which delegate is which.
expect 0 "mixed precision partition" -- "$kiln" partition "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --dim batch=1..1 --fp-op softmax --report
contains "mixed keeps softmax in float" "$out" "(fp_node_op_set has 'softmax')"
contains "mixed quantized delegate" "$out" "lowered_module_0   htp      quantized"
contains "mixed softmax on the cpu" "$out" "nodes delegated: 51 / 52"
contains "mixed groups" "$err" "annotated_group_0: quantized, 14 node(s) -> lowered_module_0"
expect 0 "mixed precision fp16 partition" -- "$kiln" partition "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --dim batch=1..1 --fp-op softmax --fp16-fallback --report
contains "mixed fp16 delegate" "$out" "lowered_module_1   htp      fp16           1 node(s)  softmax"
expect 0 "mixed precision compile" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --dim batch=1..1 --fp-node _Softmax --fp-op linear --fp16-fallback -o "$work/mixed.kpte"
expect 0 "mixed precision run" -- "$kiln" run "$work/mixed.kpte" --inputs "$calib/00.npz" --output-dir "$work/mixed_out"
/usr/bin/python3 - "$work" <<'PY' || { echo "FAIL: mixed precision outputs against the float model"; failures=$((failures + 1)); }
import sys, numpy as np
w = sys.argv[1]
got, want = np.load(f"{w}/mixed_out/probs.npy"), np.load(f"{w}/hfi/probs.npy")
assert np.abs(got - want).max() < 5e-3, np.abs(got - want).max()
PY
# A skipped relu whose value two quantized groups read (the stem's relu feeds a conv and a cat):
# each group reads the codes, not a float another delegate dequantized.
expect 0 "mixed precision shared skipped value" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --dim batch=1..1 --fp-op relu --fp16-fallback -o "$work/mixed_relu.kpte"
expect 0 "mixed precision shared skipped value run" -- "$kiln" run "$work/mixed_relu.kpte" --inputs "$calib/00.npz" --output-dir "$work/mixed_relu_out"
/usr/bin/python3 - "$work" <<'PY' || { echo "FAIL: mixed precision (relu skipped) outputs against the float model"; failures=$((failures + 1)); }
import sys, numpy as np
w = sys.argv[1]
got, want = np.load(f"{w}/mixed_relu_out/probs.npy"), np.load(f"{w}/hfi/probs.npy")
assert np.abs(got - want).max() < 2e-2, np.abs(got - want).max()
PY
expect 0 "mixed precision on a V68 SoC" -- "$kiln" partition "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --dim batch=1..1 --fp-op softmax --fp16-fallback --soc SM8350
contains "mixed precision V68 warning" "$err" "the skipped operators fall back to the CPU"
expect 1 "mixed precision unknown node" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --quant 8a8w --calib "$calib" --dim batch=1..1 --fp-node nope -o "$work/x.kpte"
contains "mixed precision unknown node message" "$err" "fp_node_id_set names 'nope'"
expect 1 "mixed precision without quant" -- "$kiln" compile "$src/examples/tinynet.onnx" --backend htp --dim batch=1..1 --fp-op softmax -o "$work/x.kpte"
contains "mixed precision without quant message" "$err" "need --quant"

# draw_graph: kiln draw writes DIR/TITLE.svg through Graphviz, delegates as clusters.
mkdir -p "$work/draw"
expect 0 "draw" -- "$kiln" draw "$src/examples/tinynet.onnx" -o "$work/draw" --title mixed --backend htp --quant 8a8w --calib "$calib" --dim batch=1..1 --fp-op softmax --fp16-fallback
contains "draw says where" "$out" "wrote $work/draw/mixed.svg"
svg=$(cat "$work/draw/mixed.svg" 2>/dev/null)
contains "draw clusters" "$svg" "lowered_module_1: htp, fp16"
contains "draw boxes" "$svg" ">softmax</text>"
expect 0 "draw a float model" -- "$kiln" draw "$src/examples/tinynet.onnx" -o "$work/draw"
[[ -s "$work/draw/tinynet.svg" ]] || { echo "FAIL: draw without --title writes MODEL.svg"; failures=$((failures + 1)); }
expect 1 "draw into a missing dir" -- "$kiln" draw "$src/examples/tinynet.onnx" -o "$work/nowhere"
contains "draw missing dir message" "$err" "is not a directory"
expect 1 "profile without html" -- "$kiln" partition "$src/examples/tinynet.onnx" --backend demo --profile "$work/x.json"
contains "profile without html message" "$err" "--profile goes with --html"
printf '{"traceEvents": [{"name": "x"}]}' > "$work/bad_trace.json"
expect 1 "html with a bad profile" -- "$kiln" partition "$src/examples/tinynet.onnx" --backend demo --html "$work/r.html" --profile "$work/bad_trace.json"
contains "html bad profile message" "$err" "--profile $work/bad_trace.json: HTP profile: event 0: no string 'cat'"

echo "kiln_tool_e2e: $passes passed, $failures failed"
[[ $failures -eq 0 ]]
