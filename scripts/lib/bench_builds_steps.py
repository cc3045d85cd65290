#!/usr/bin/env python3
"""Usage: bench_builds_steps.py KILN

scripts/bench-builds' summary of one campaign, run in the campaign's folder: reads its
steps.csv (the built steps, not cached, in dispatch order) and, asking KILN (`kiln show
--json`) for each step's build log and replay file, writes steps.tsv (a line a step after the
first: build s, step s, replay file, the units its build compiled) and prints
"build-s step-s units-reused units-compiled build-cache-hits steps steps-per-hour".
"""
import csv, json, re, statistics, subprocess, sys
rows = [r for r in csv.DictReader(open("steps.csv")) if not r["cached_from"] and r["build_ns"]]
rows.sort(key=lambda r: int(r["dispatched_ms"]))
span_h = (max(int(r["recorded_ms"]) for r in rows) - min(int(r["dispatched_ms"]) for r in rows)) / 3.6e6
builds, step_s, reused, compiled, hits = [], [], 0, 0, 0
with open("steps.tsv", "w") as tsv:
    for r in rows[1:]:
        shown = json.loads(subprocess.run([sys.argv[1], "show", "store", f"{r['experiment']}/{r['chain']}/{r['step']}", "--json"],
                                          capture_output=True, text=True, check=True).stdout)
        builds.append(int(r["build_ns"]) / 1e9)
        step_s.append((int(r["recorded_ms"]) - int(r["dispatched_ms"])) / 1e3)
        if r["build_reused"] == "true":
            hits += 1
            units = []
        else:
            log = open(f"store/artifacts/{shown['artifacts']['build-log']}.txt", errors="replace").read()
            # clang's units, or rustc's crates (a crate is one codegen unit).
            reused += len(re.findall(r"^kiln: (?:crate \S+(?: \(\S+\))?|\S+): (?:object|code) reused", log, re.M))
            units = re.findall(r"^kiln: (\S+): optimised from its kept IR", log, re.M)
            # A crate by its name and, unless a library, its kind: "brotli (bin)".
            again = re.findall(r"^kiln: crate (\S+(?: \(\S+\))?): code generated again", log, re.M)
            compiled += len(again) + len(units)
            units += [f"crate:{name}" for name in again]
        replay = shown["artifacts"].get("replay-file")
        print(builds[-1], step_s[-1], f"store/artifacts/{replay}.txt" if replay else "", ",".join(units), sep="\t", file=tsv)
print(f"{statistics.median(builds):.3f} {statistics.median(step_s):.3f} {reused} {compiled} {hits} {len(rows)} {len(rows) / span_h:.0f}")
