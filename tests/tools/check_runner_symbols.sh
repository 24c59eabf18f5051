#!/usr/bin/env bash
# kiln-runner links the runtime and the portable kernels only: no ONNX, no protobuf, no IR, no
# .kir parser. Checks the binary's symbols and its shared libraries.
# Usage: check_runner_symbols.sh KILN_RUNNER
set -uo pipefail
runner=$1
fail=0
libs=$(ldd "$runner")
for lib in libprotobuf libonnx; do
  if grep -q "$lib" <<<"$libs"; then
    echo "FAIL: kiln-runner links $lib"; fail=1
  fi
done
# Demangled symbols of the IR, the importer and the parser; the runtime must need none of them.
pattern='onnx::|google::protobuf|kiln::Graph::|kiln::Node::|kiln::ExportedProgram|kiln::parse_kir|kiln::import_onnx|kiln::plan_memory|kiln::serialize_program'
found=$(nm -C "$runner" | grep -E "$pattern" | head -5)
if [[ -n $found ]]; then
  echo "FAIL: kiln-runner holds compiler symbols:"; echo "$found"; fail=1
fi
count=$(nm -C "$runner" | grep -c "kiln::runtime::Program::load_file")
if [[ $count -eq 0 ]]; then
  echo "FAIL: the check sees no runtime symbol in kiln-runner (stripped binary?)"; fail=1
fi
[[ $fail -eq 0 ]] && echo "kiln-runner: runtime and portable kernels only ($(stat -c %s "$runner") bytes)"
exit $fail
