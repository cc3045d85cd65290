#!/usr/bin/env python3
"""Usage: fuzz_report.py LOGS TARGET...

scripts/fuzz's report, results/fuzzing.md (on stdout): per fuzz target, from LOGS/TARGET.log
(libFuzzer's output), seconds, executions, coverage, corpus, peak memory and the outcome; then
fuzz/FINDINGS.md, and the Summary line scripts/faults reads.
"""
import os, re, sys
logs, targets = sys.argv[1], sys.argv[2:]
rows, total_s, total_runs, crashed = [], 0, 0, []
for t in targets:
    path = os.path.join(logs, f"{t}.log")
    if not os.path.exists(path):
        rows.append(f"| {t} | not run | | | | | | |")
        continue
    text = open(path, errors="replace").read()
    done = re.search(r"^Done (\d+) runs in (\d+) second", text, re.M)
    pulses = re.findall(r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)", text, re.M)
    rss = re.search(r"peak_rss_mb:\s+(\d+)", text)
    crash = re.search(r"(panicked at [^\n]*|SUMMARY: [^\n]*|out-of-memory[^\n]*|timeout after[^\n]*)", text)
    runs = int(done.group(1)) if done else (int(pulses[-1][0]) if pulses else 0)
    secs = int(done.group(2)) if done else None
    cov = f"{pulses[-1][1]} / {pulses[-1][2]}" if pulses else ""
    corp = f"{pulses[-1][3]} ({pulses[-1][4]})" if pulses else ""
    outcome = "finding: " + crash.group(1)[:120] if crash else ("clean" if done else "stopped early")
    if crash:
        crashed.append(t)
    total_runs += runs
    total_s += secs or 0
    rows.append(f"| {t} | {secs if secs is not None else '-'} | {runs:,} | "
                f"{runs // secs if secs else '-'} | {cov} | {corp} | "
                f"{rss.group(1) if rss else '-'} | {outcome} |")
print("# Fuzzing kiln's readers (issue 30)\n")
print("Written by `scripts/fuzz` from the logs of its last runs (cargo-fuzz, libFuzzer, nightly; "
      "`--sanitizer none --debug-assertions`, inputs up to 64 KiB, 2 GiB memory limit, 30 s per "
      "input), one target after another on a 2-core machine busy with other work. Coverage is "
      "libFuzzer's edges / features at the end.\n")
print("| target | seconds | executions | per second | coverage (edges / features) | corpus (inputs) | peak MB | outcome |")
print("|---|---:|---:|---:|---|---|---:|---|")
for r in rows:
    print(r)
print()
findings, fixed = "fuzz/FINDINGS.md", 0
if os.path.exists(findings):
    text = open(findings).read().rstrip()
    # The table's rows: every line that starts a cell, less the header and its rule.
    fixed = max(0, sum(1 for l in text.splitlines() if l.startswith("| ")) - 1)
    print(text + "\n")
summary = (f"{total_s / 3600:.1f} h over {len(targets)} targets, {total_runs:,} executions, "
           f"{fixed} findings fixed; "
           + ("open findings in " + ", ".join(crashed) if crashed else "no open finding in the last runs"))
print(f"Summary: {summary}")
