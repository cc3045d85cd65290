#!/usr/bin/env python3
"""Usage: corpus_scale_report.py OUT CORES PROGRAMS

scripts/corpus-scale's report (markdown, on stdout): the local and Slurm campaigns' steps
(OUT/local.store/steps.csv, OUT/slurm.store/steps.csv) compared step for step, and their steps
per hour on CORES cores. PROGRAMS: the programs' names, one argument.
"""
import csv, sys
out, cores, programs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def steps(kind):
    rows = list(csv.DictReader(open(f"{out}/{kind}.store/steps.csv")))
    return sorted(rows, key=lambda r: (r["experiment"], int(r["step"])))
local, slurm = steps("local"), steps("slurm")
same = len(local) == len(slurm) and all(a["decision_hash"] == b["decision_hash"] for a, b in zip(local, slurm))
apart = max(abs(float(a["time_ratio"]) - float(b["time_ratio"])) for a, b in zip(local, slurm))
print("# The corpus through Slurm, as locally\n")
print(f"`scripts/corpus-scale` on {cores} cores: screening campaigns over {programs} (8 steps each),")
print("once on a local worker with 2 slots, once on two Slurm workers of one CPU each on the")
print("single-node rig, from the same kept discoveries and reference measurements.\n")
print(f"Same decisions step for step: **{'yes' if same else 'NO'}** ({len(local)} and {len(slurm)} steps); time ratios")
print(f"apart by at most {apart:.2e} (a program's count depends on the folder it runs in, whose")
print("path differs: a few thousand instructions of hundreds of millions).\n")
print("| workers | steps | first dispatch to last record s | steps/h | steps/h per core |")
print("|---|---:|---:|---:|---:|")
for kind, rows in (("local", local), ("slurm", slurm)):
    start = min(int(r["dispatched_ms"]) for r in rows)
    end = max(int(r["recorded_ms"]) for r in rows)
    secs = (end - start) / 1000
    rate = len(rows) / secs * 3600
    print(f"| {kind} | {len(rows)} | {secs:.1f} | {rate:.0f} | {rate / cores:.0f} |")
