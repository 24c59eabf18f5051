#!/usr/bin/env bash
# Sets up, builds and runs every kiln test: the full suite on the release build, then the unit
# tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
# Usage: scripts/test.sh            (everything)
#        KILN_SKIP_SANITIZE=1 scripts/test.sh   (release only, for quick local runs)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/setup.sh
echo "== build (release)"
scripts/build.sh release
echo "== test (release)"
ctest --test-dir build/release --output-on-failure -j "$jobs" --timeout 600 >build/release/ctest.log 2>&1 ||
  { grep -v "Passed" build/release/ctest.log; exit 1; }
grep -E "tests passed|Total Test time" build/release/ctest.log

if [[ -z ${KILN_SKIP_SANITIZE:-} ]]; then
  echo "== build (asan+ubsan)"
  scripts/build.sh sanitize
  echo "== test (asan+ubsan, unit tests)"
  # allocator_may_return_null: an impossible allocation returns null, as it does without ASan, so
  # the tests of kiln's checked allocations see what users see.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan_suppressions.txt \
    ctest --test-dir build/sanitize --output-on-failure -j "$jobs" -L unit --timeout 900 >build/sanitize/ctest.log 2>&1 ||
    { grep -v "Passed" build/sanitize/ctest.log; exit 1; }
  grep -E "tests passed|Total Test time" build/sanitize/ctest.log
fi
