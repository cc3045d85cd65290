#!/usr/bin/env python3
"""Usage: bench_verify_report.py TIMES SIZE ROUNDS STEPS BEFORE_REV AFTER_REV CPUS

scripts/bench-verify's report, results/bench/verify.md (on stdout), from TIMES (its lines
LABEL ROUND MS RUN_MS, bench_verify_times.py's) and the binary's SIZE in bytes: the median
time per step of each kiln and their ratio.
"""
import statistics, sys
path, size, rounds, steps, before_rev, after_rev, cpus = sys.argv[1:8]
times = {"before": [], "after": []}
runs = []
for line in open(path):
    label, _, ms, run_ms = line.split()
    times[label].append(int(ms))
    runs.append(float(run_ms))
b, a = statistics.median(times["before"]), statistics.median(times["after"])
print("# What checking cached builds costs a step (issue 30)\n")
print(f"Written by `scripts/bench-verify` on {cpus} CPUs: a knob campaign of {steps} steps "
      f"whose binary is {int(size) / 2**20:.1f} MiB (a C program with a large initialised array; "
      f"a run takes {statistics.median(runs):.0f} ms (median), 1 warm-up and 3 measured runs a "
      "step, one local slot), "
      f"{rounds} rounds of each kiln, interleaved. Only steps that laid a cached build over "
      "fresh sources count (the first build of each of the four decision sets does not): "
      "their time from dispatch to result, the restore and the runs. before = "
      f"{before_rev}, which copied cached builds unchecked; after = {after_rev}, which hashes "
      "every file it restores against its record.\n")
print("| kiln | steps | median ms per step | ratio to before |")
print("|---|---:|---:|---:|")
for label, med in (("before", b), ("after", a)):
    print(f"| {label} | {len(times[label])} | {med:.0f} | {med / b:.4f} |")
print(f"\nThe checks cost {a - b:+.0f} ms a step, {100 * (a - b) / b:+.2f} % of its time "
      "(target: under 2 %).")
