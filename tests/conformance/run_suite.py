#!/usr/bin/python3
"""ONNX's own conformance suite (Debian libonnx-testdata) through `kiln run`, next to ONNX Runtime.

Usage: run_suite.py --kiln KILN --source-dir SRC --work-dir DIR [--data DIR] [--jobs N]
                    [--no-ort] [--only SUBSTRING ...] [--write-expected] [--failures N]

Every test folder (model.onnx + test_data_set_N/input_K.pb, output_K.pb) under the suite's node,
pytorch-converted, pytorch-operator and simple folders runs as a user would run it:
`kiln run model.onnx --input NAME=input_K.pb ... --output-dir OUT`, one process per data set with
a time limit, and each output is compared with the suite's expected one: the same shape and
dtype, NaN where it has NaN, and |got - want| <= atol + rtol * |want| (rtol 1e-3, atol 1e-7, the
suite's own tolerances). A test passes when all its data sets do. Tests whose data are not
tensors (sequences, optionals, strings, bfloat16) are counted as unreadable and run by neither
side.

The same tests run with onnxruntime-node in one process (tests/ref/ort_run.mjs --jobs) and are
compared the same way, so both pass counts come from one run. The run prints both counts per
folder, kiln's refusals grouped by message (what to build next) and its mismatches.

tests/conformance/expected_passes.txt lists the tests kiln passed when it was last written: the
run fails when one of them no longer passes, and prints the tests that pass now but are not
listed (--write-expected rewrites the list). Exit 0 when no listed test regressed.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

FOLDERS = ["node", "pytorch-converted", "pytorch-operator", "simple"]
RTOL, ATOL = 1e-3, 1e-7
TIME_LIMIT_S = 120


def safe(name):
    """The file name kiln run and ort_run.mjs give an output (npy_file_name)."""
    out = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return "_" + out if not out or out[0] == "." else out


def read_tensor(path):
    """The array in a TensorProto file, or None when it holds something else or an unusable type."""
    t = onnx.TensorProto()
    try:
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        if t.data_type in (0, onnx.TensorProto.STRING, onnx.TensorProto.BFLOAT16):
            return None  # .npy has no bfloat16: neither side could be handed it
        a = numpy_helper.to_array(t)
    except Exception:
        return None
    return a if a.dtype.kind in "biuf" else None


class Test:
    """One test folder: its model, its graph inputs and outputs, and its data sets as arrays."""

    def __init__(self, folder, name, path):
        self.id = f"{folder}/{name}"
        self.folder = folder
        self.path = path
        self.model = os.path.join(path, "model.onnx")
        self.sets = []  # [(set dir, [(input name, .pb path, array)], [(output name, array)])]
        self.unreadable = None
        try:
            m = onnx.load(self.model, load_external_data=False)
        except Exception as e:
            self.unreadable = f"model: {e}"
            return
        inits = {i.name for i in m.graph.initializer}
        inputs = [i.name for i in m.graph.input if i.name not in inits]
        outputs = [o.name for o in m.graph.output]
        for d in sorted(os.listdir(path)):
            set_dir = os.path.join(path, d)
            if not d.startswith("test_data_set_") or not os.path.isdir(set_dir):
                continue
            ins, outs = [], []
            for k, name in enumerate(inputs):
                f = os.path.join(set_dir, f"input_{k}.pb")
                if not os.path.exists(f):
                    continue  # an optional input the test leaves out
                a = read_tensor(f)
                if a is None:
                    self.unreadable = f"input {k} is not a numeric tensor"
                    return
                ins.append((name, f, a))
            for k, name in enumerate(outputs):
                a = read_tensor(os.path.join(set_dir, f"output_{k}.pb"))
                if a is None:
                    self.unreadable = f"output {k} is not a numeric tensor"
                    return
                outs.append((name, a))
            self.sets.append((set_dir, ins, outs))
        if not self.sets:
            self.unreadable = "no test data set"


def compare(got_dir, outs):
    """None if every expected output is in got_dir and matches, else why not."""
    for name, want in outs:
        f = os.path.join(got_dir, safe(name) + ".npy")
        if not os.path.exists(f):
            return f"output '{name}' was not written"
        got = np.load(f)
        if got.shape != want.shape:
            return f"output '{name}': shape {got.shape}, expected {want.shape}"
        if got.dtype != want.dtype:
            return f"output '{name}': dtype {got.dtype}, expected {want.dtype}"
        if want.dtype.kind == "f":
            g, w = got.astype(np.float64), want.astype(np.float64)
            if not np.array_equal(np.isnan(g), np.isnan(w)):
                return f"output '{name}': NaN in other places"
            ok = np.isnan(w) | (g == w) | (np.abs(g - w) <= ATOL + RTOL * np.abs(w))
            if not ok.all():
                bad = int(np.argmax(~ok.reshape(-1)))
                return (f"output '{name}': {int((~ok).sum())} of {ok.size} elements differ "
                        f"(first at {bad}: {g.reshape(-1)[bad]:.7g} vs {w.reshape(-1)[bad]:.7g})")
        elif not np.array_equal(got, want):
            return f"output '{name}': {int((got != want).sum())} of {want.size} elements differ"
    return None


def run_kiln(kiln, test, work):
    """(passed, reason) for one test through `kiln run`."""
    for k, (set_dir, ins, outs) in enumerate(test.sets):
        out = os.path.join(work, "kiln", test.id, str(k))
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        cmd = [kiln, "run", test.model, "--output-dir", out] + [f"--input={n}={f}" for n, f, _ in ins]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT_S)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {TIME_LIMIT_S} s"
        if p.returncode != 0:
            lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
            if p.returncode < 0 or p.returncode >= 128 or not lines:
                return False, f"crashed (exit {p.returncode}): {' | '.join(lines[-2:])}"
            return False, "refused: " + lines[-1]
        why = compare(out, outs)
        if why:
            return False, "mismatch: " + why
    return True, ""


def run_ort(source_dir, tests, work):
    """{test id: (passed, reason)} for every test, from one onnxruntime-node process."""
    jobs, owners = [], []
    for test in tests:
        for k, (set_dir, ins, outs) in enumerate(test.sets):
            feeds = {}
            for n, f, a in ins:
                npy = os.path.join(work, "data", test.id, str(k), safe(n) + ".npy")
                os.makedirs(os.path.dirname(npy), exist_ok=True)
                np.save(npy, a)
                feeds[n] = npy
            jobs.append({"model": test.model, "out": os.path.join(work, "ort", test.id, str(k)), "feeds": feeds})
            owners.append((test, k))
    job_file = os.path.join(work, "ort_jobs.json")
    with open(job_file, "w") as f:
        json.dump(jobs, f)
    p = subprocess.run(["node", os.path.join(source_dir, "tests/ref/ort_run.mjs"), "--jobs", job_file],
                       capture_output=True, text=True)
    status = {}
    for line in p.stdout.splitlines():
        m = re.match(r"job (\d+) (ok|error)(?: (.*))?$", line)
        if m:
            status[int(m.group(1))] = m.group(3) if m.group(2) == "error" else None
    results = {}
    for i, (test, k) in enumerate(owners):
        if test.id in results and not results[test.id][0]:
            continue
        if i not in status:
            results[test.id] = (False, f"no result (node exit {p.returncode}: {p.stderr.strip()[-200:]})")
        elif status[i] is not None:
            results[test.id] = (False, "refused: " + status[i])
        else:
            why = compare(jobs[i]["out"], test.sets[k][2])
            results[test.id] = (why is None, "mismatch: " + why if why else "")
    return results


def refusal_key(reason):
    """A refusal message with the test's own names and numbers taken out, to group like refusals."""
    r = re.sub(r"^refused: (kiln: )?(error: )?", "", reason)
    r = re.sub(r"^\S*model\.onnx: ", "", r)
    r = re.sub(r"^node '[^']*' \([^)]*\): ", "", r)
    r = re.sub(r" \(nodes? '[^)]*\)", "", r)  # unsupported ONNX ops: Acos (node 'x')
    if not r.startswith("unsupported ONNX ops"):
        r = re.sub(r"'[^']*'", "'…'", r)
    r = re.sub(r"\b\d+\b", "N", r)
    return r[:150]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--no-ort", action="store_true", help="run kiln only")
    ap.add_argument("--only", nargs="*", help="run the tests whose id contains one of these")
    ap.add_argument("--write-expected", action="store_true", help="rewrite expected_passes.txt")
    ap.add_argument("--failures", type=int, default=40, help="refusal groups and mismatches to print")
    args = ap.parse_args()
    if not os.path.isdir(args.data):
        sys.exit(f"run_suite: {args.data} is missing (scripts/setup.sh installs libonnx-testdata)")
    expected_file = os.path.join(args.source_dir, "tests/conformance/expected_passes.txt")
    os.makedirs(args.work_dir, exist_ok=True)

    tests = []
    for folder in FOLDERS:
        root = os.path.join(args.data, folder)
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            path = os.path.join(root, name)
            if os.path.exists(os.path.join(path, "model.onnx")):
                if args.only and not any(s in f"{folder}/{name}" for s in args.only):
                    continue
                tests.append(Test(folder, name, path))
    readable = [t for t in tests if t.unreadable is None]
    print(f"{len(tests)} tests, {len(readable)} with tensor data (the rest hold sequences, optionals, "
          f"strings or bfloat16 and are not run)")

    t0 = time.time()
    kiln = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for test, result in zip(readable, pool.map(lambda t: run_kiln(args.kiln, t, args.work_dir), readable)):
            kiln[test.id] = result
    kiln_s = time.time() - t0
    ort = {}
    if not args.no_ort:
        t0 = time.time()
        ort = run_ort(args.source_dir, readable, args.work_dir)
        ort_s = time.time() - t0

    print(f"\n{'folder':<20} {'tests':>6} {'kiln':>6} {'ORT':>6}")
    for folder in FOLDERS + ["all"]:
        ids = [t.id for t in readable if folder in ("all", t.folder)]
        if not ids:
            continue
        k = sum(kiln[i][0] for i in ids)
        o = sum(ort[i][0] for i in ids) if ort else "-"
        print(f"{folder:<20} {len(ids):>6} {k:>6} {o:>6}")
    print(f"(kiln {kiln_s:.0f} s over {args.jobs} processes" + (f", ORT {ort_s:.0f} s)" if ort else ")"))

    refusals = Counter(refusal_key(r) for ok, r in kiln.values() if not ok and r.startswith("refused"))
    print(f"\nkiln's refusals, grouped ({sum(refusals.values())} tests):")
    for key, n in refusals.most_common(args.failures):
        print(f"  {n:4d}  {key}")
    other = sorted((i, r) for i, (ok, r) in kiln.items() if not ok and not r.startswith("refused"))
    print(f"\nkiln's wrong results, time-outs and crashes ({len(other)} tests):")
    for i, r in other[:args.failures]:
        print(f"  {i}: {r}")
    if ort:
        both = sorted(i for i in kiln if ort[i][0] and not kiln[i][0])
        print(f"\n{len(both)} tests pass with ORT and not with kiln; "
              f"{sum(1 for i in kiln if kiln[i][0] and not ort[i][0])} pass with kiln and not with ORT")

    passed = sorted(i for i, (ok, _) in kiln.items() if ok)
    expected = []
    if os.path.exists(expected_file):
        with open(expected_file) as f:
            expected = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    if args.write_expected:
        # Tests this run left out (--only) keep their entries.
        run_all = {t.id for t in tests}
        kept = sorted(set(i for i in expected if i not in run_all) | set(passed))
        with open(expected_file, "w") as f:
            f.write("# Tests of tests/conformance/run_suite.py that kiln passes: a test listed here that\n"
                    "# fails is a regression. Rewrite with run_suite.py --write-expected.\n")
            f.write("".join(i + "\n" for i in kept))
        print(f"\nwrote {len(kept)} tests to {expected_file}")
        return 0
    run_ids = {t.id for t in tests}
    expected = [i for i in expected if i in run_ids]
    regressed = [i for i in expected if not kiln.get(i, (False, "no longer readable"))[0]]
    new = sorted(set(passed) - set(expected))
    if new:
        print(f"\n{len(new)} tests pass that expected_passes.txt does not list (--write-expected adds them): "
              + ", ".join(new[:20]) + (" ..." if len(new) > 20 else ""))
    if regressed:
        print(f"\nREGRESSED: {len(regressed)} listed tests no longer pass:")
        for i in regressed:
            print(f"  {i}: {kiln.get(i, (False, 'unreadable'))[1]}")
        return 1
    print(f"\nno regression: all {len(expected)} listed tests pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
