#!/usr/bin/python3
"""Python side of bench/python_overhead.sh: loads a .kpte with kiln.Runtime, calls its method
with the arrays of an .npz (in the method's input order) 3 times untimed, as `kiln bench` warms
up, then RUNS times CALLS calls, each batch timed with time.perf_counter_ns. Prints one line:
  python median_us <median over the RUNS batches of the time per call, in microseconds>
Usage: /usr/bin/python3 bench/python_overhead.py KPTE NPZ THREADS RUNS CALLS
(kiln from PYTHONPATH, e.g. BUILD_DIR/python)
"""
import statistics
import sys
import time

import numpy as np

try:
    import kiln
except ImportError:  # the extension may be mid-rebuild (replaced under us): one more try
    time.sleep(2)
    import kiln


def main():
    kpte, npz, threads, runs, calls = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    method = kiln.Runtime.load(kpte).method("forward", num_threads=threads)
    feeds = np.load(npz)
    arrays = [feeds[name] for name in method.input_names]
    for _ in range(3):
        method(*arrays)
    per_call_ns = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            method(*arrays)
        per_call_ns.append((time.perf_counter_ns() - t0) / calls)
    print(f"python median_us {statistics.median(per_call_ns) / 1e3:.3f}")


if __name__ == "__main__":
    main()
