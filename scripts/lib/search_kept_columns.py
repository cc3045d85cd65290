#!/usr/bin/env python3
"""Usage: search_kept_columns.py STEPS_CSV OUT

Copies the columns of a steps table (`kiln export --table steps`) that scripts/search-bench's
report reads (experiment, chain, step, objective, baseline, dispatched_ms, recorded_ms) from
STEPS_CSV to OUT: a few kilobytes a campaign, kept in git.
"""
import csv, sys
columns = ["experiment", "chain", "step", "objective", "baseline", "dispatched_ms", "recorded_ms"]
with open(sys.argv[1]) as f, open(sys.argv[2], "w", newline="") as out:
    w = csv.DictWriter(out, columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(csv.DictReader(f))
