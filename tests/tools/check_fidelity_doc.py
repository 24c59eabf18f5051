#!/usr/bin/env python3
"""Checks docs/reference-fidelity.md against the test binaries: every GoogleTest a row names
must exist, so the table cannot point at tests that were renamed or deleted.

Usage: check_fidelity_doc.py DOC TEST_BINARY...
In the tests column, `Suite.Name` names a test and `.Name` a test of the row's previous suite.
"""
import re
import subprocess
import sys


def listed_tests(binaries):
    tests = set()
    for binary in binaries:
        out = subprocess.run([binary, "--gtest_list_tests"], check=True, capture_output=True,
                             text=True).stdout
        suite = None
        for line in out.splitlines():
            if not line.startswith(" "):
                suite = line.split("#")[0].strip().rstrip(".")
            else:
                tests.add(f"{suite}.{line.split('#')[0].strip()}")
    return tests


def named_tests(doc):
    rows = [line for line in open(doc, encoding="utf-8") if line.startswith("| `")]
    if not rows:
        sys.exit(f"{doc}: no table rows")
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        suite = None
        for token in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)?\.([A-Za-z_][A-Za-z0-9_]*)`", cells[-1]):
            if token[0]:
                suite = token[0]
            if suite is None or token[1] in ("cc", "h", "txt", "kir"):
                continue
            yield cells[0], f"{suite}.{token[1]}"


def main():
    doc, binaries = sys.argv[1], sys.argv[2:]
    have = listed_tests(binaries)
    missing = [(fn, t) for fn, t in named_tests(doc) if t not in have]
    for fn, t in missing:
        print(f"{doc}: row {fn} names test {t}, which no test binary has", file=sys.stderr)
    if missing:
        sys.exit(1)
    print(f"{doc}: every named test exists ({len(have)} tests listed)")


if __name__ == "__main__":
    main()
