#!/bin/sh
# Runs `kiln partition` and compares its stdout with a golden file.
# Usage: partition_cli_test.sh KILN GOLDEN ARGS...   (KILN_UPDATE_GOLDEN=1 rewrites GOLDEN)
set -u
kiln="$1"; golden="$2"; shift 2
out=$("$kiln" partition "$@")
rc=$?
if [ $rc -ne 0 ]; then
  echo "kiln partition $* exited with $rc" >&2
  exit 1
fi
if [ "${KILN_UPDATE_GOLDEN:-0}" = "1" ]; then
  printf '%s\n' "$out" > "$golden"
  exit 0
fi
expected=$(cat "$golden") || exit 1
if [ "$out" != "$expected" ]; then
  echo "output differs from $golden:" >&2
  printf '%s\n' "$out" | diff "$golden" - >&2
  exit 1
fi
