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

# The release build's Python package becomes importable by Debian's python3 (`import kiln`): a
# kiln.pth in its site-packages (the user site when that is not writable) names the build's
# python/ folder. The last release build made wins.
if [[ $kind == release && -d $dir/python/kiln ]]; then
  /usr/bin/python3 - "$PWD/$dir/python" <<'PY'
import os, site, sys
target = sys.argv[1]
for folder in site.getsitepackages()[:1] + [site.getusersitepackages()]:
    pth = os.path.join(folder, "kiln.pth")
    try:
        if os.path.exists(pth) and open(pth).read().strip() == target:
            break
        os.makedirs(folder, exist_ok=True)
        with open(pth, "w") as f:
            f.write(target + "\n")
        break
    except OSError:
        continue
PY
fi
