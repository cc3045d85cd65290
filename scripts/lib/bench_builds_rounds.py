#!/usr/bin/env python3
"""Usage: bench_builds_rounds.py AFTER LIMIT ROUNDS

scripts/bench-builds' rounds of "after" (AFTER.1 ... AFTER.N, their steps.tsv) and of the limit
(LIMIT.1 ... LIMIT.N, a step's seconds a line): prints "build-s kiln-s limit-s kiln/limit
lowest-round highest-round", seconds the medians over every round's steps, kiln/limit the
median of step-matched ratios, and the range of the rounds' own kiln/limit.
"""
import statistics, sys
after, limit, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
builds, kiln, lim, paired, per_round = [], [], [], [], []
for r in range(1, n + 1):
    rows = [line.split("\t") for line in open(f"{after}.{r}/steps.tsv") if line.strip()]
    k = [float(row[1]) for row in rows]
    l = [float(line) for line in open(f"{limit}.{r}") if line.strip()]
    assert len(k) == len(l), f"round {r}: {len(k)} kiln steps, {len(l)} limit steps"
    builds += [float(row[0]) for row in rows]
    kiln += k
    lim += l
    paired += [a / b for a, b in zip(k, l)]
    per_round.append(statistics.median(k) / statistics.median(l))
print(f"{statistics.median(builds):.3f} {statistics.median(kiln):.3f} {statistics.median(lim):.3f} "
      f"{statistics.median(paired):.2f} {min(per_round):.2f} {max(per_round):.2f}")
