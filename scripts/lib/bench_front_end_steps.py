#!/usr/bin/env python3
"""Usage: bench_front_end_steps.py KILN

scripts/bench-front-end's summary of one campaign, run in the campaign's folder: from its
steps.csv (the steps built afresh, after the first) and each step's build log (found with
`KILN show --json`), prints "build-s-median limit-s-median steps", the limit being the
wrapper's timings of the optimiser on the changed units.
"""
import csv, json, re, statistics, subprocess, sys
rows = [r for r in csv.DictReader(open("steps.csv")) if not r["cached_from"] and r["build_ns"] and r["build_reused"] != "true"]
rows.sort(key=lambda r: int(r["step"]))
builds, limits = [], []
for r in rows[1:]:
    shown = json.loads(subprocess.run([sys.argv[1], "show", "store", f"{r['experiment']}/{r['chain']}/{r['step']}", "--json"],
                                      capture_output=True, text=True, check=True).stdout)
    log = open(f"store/artifacts/{shown['artifacts']['build-log']}.txt", errors="replace").read()
    backend = sum(float(s) for s in re.findall(r"optimised from its kept IR \(front end skipped\) in ([0-9.]+) s", log))
    builds.append(int(r["build_ns"]) / 1e9)
    limits.append(backend)
print(f"{statistics.median(builds):.3f} {statistics.median(limits):.3f} {len(builds)}")
