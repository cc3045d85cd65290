"""results/bench/sources.md from the lines scripts/lib/step-times.py wrote for each kiln."""

import statistics
import sys


def main() -> int:
    path, files, rounds, steps, before_rev, after_rev, cpus = sys.argv[1:8]
    times = {"before": [], "after": []}
    runs = []
    for line in open(path):
        label, _, step_ms, run_ms = line.split()
        times[label].append(int(step_ms))
        runs.append(float(run_ms))
    run = statistics.median(runs)
    print("# A step over a large sources folder (issue 56)\n")
    print(f"Written by `scripts/bench-sources` on {cpus} CPUs: a knobs benchmark with no build "
          f"over {files} files, whose run (`ls` of one folder) takes {run:.1f} ms (median); a "
          f"random walk of {steps} steps, one run a step, one local slot; {rounds} round(s) of "
          f"each kiln, interleaved. Each step's time is its dispatch to its result. before = "
          f"{before_rev}, which copied the sources into the slot for every step; after = "
          f"{after_rev}, which reuses the slot's copy while the runs write nothing into it.\n")
    print("| kiln | steps | median ms per step | step minus its run, ms | ratio to before |")
    print("|---|---:|---:|---:|---:|")
    before = statistics.median(times["before"])
    for label in ("before", "after"):
        med = statistics.median(times[label])
        print(f"| {label} | {len(times[label])} | {med:.0f} | {med - run:.0f} | "
              f"{med / before:.4f} |")
    after = statistics.median(times["after"])
    met = "met" if after - run <= 1000 else "not met"
    print(f"\nTarget: a step within 1 s of its run time: {met} ({after - run:.0f} ms beyond it).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
