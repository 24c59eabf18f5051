#!/usr/bin/env bash
# Configures and builds kiln. Usage: scripts/build.sh [release|sanitize] [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}
shift || true
case $kind in
  release) dir=build/release; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  # -O1 -g1: ASan's usual level, with line tables for stack traces; -O2 -g takes 3x as long to
  # build the table-heavy test files and made the sanitizer build most of CI.
  sanitize) dir=build/sanitize; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
                                       "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DKILN_SANITIZE=ON -DKILN_BUILD_BENCH=OFF) ;;
  *) echo "usage: scripts/build.sh [release|sanitize] [targets...]" >&2; exit 2 ;;
esac
if [[ ! -f $dir/build.ninja ]]; then
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
fi
if ! ninja -C "$dir" "$@" >"$dir/ninja.log" 2>&1; then
  grep -v '^\[' "$dir/ninja.log" | tail -60
  echo "build ($kind) failed; full log: $dir/ninja.log" >&2
  exit 1
fi
