#!/usr/bin/env python3
"""Usage: bench_verify_times.py LABEL ROUND

Reads `kiln export --table steps` (CSV) on stdin and prints, for each step that laid a cached
build over its sources (build reused, not a cached result), one line for scripts/bench-verify:
LABEL ROUND MS RUN_MS (its dispatch to its result, and its objective, a wall time in ns, as ms).
"""
import csv
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
label, rnd = sys.argv[1:3]
for r in csv.DictReader(sys.stdin):
    if r["build_reused"] == "true" and r["cached_from"] == "":
        print(label, rnd, int(r["recorded_ms"]) - int(r["dispatched_ms"]), float(r["objective"]) / 1e6)
