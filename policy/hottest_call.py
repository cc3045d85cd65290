"""Inline the hottest call the stock inliner left as a call, where it runs at least
once per 100,000 of the program's instructions; decide nothing else.

The one rule that held on most programs when every simple rule was chosen by
leaving each program out (results/policy.md, 2026-11-30): it was found by
looking at every program of the dataset, so it is a hypothesis to be measured
on programs the dataset does not hold. A `kiln policy` command:

    kiln policy CONFIG -- python policy/hottest_call.py

The benchmark's sites on stdin (JSON lines, the `sites` table's columns), its
name in KILN_BENCHMARK; the decision file on stdout.
"""

import json
import os
import sys

import pandas as pd

from decisions import decision_file
from features import normalise
from lopo import with_shares

# Runs of the call per instruction of the program below which it is not inlined.
FLOOR = 1e-5


def hottest_call(sites: pd.DataFrame) -> pd.DataFrame:
    """The hottest site stock left as a call, hotter than FLOOR (none or one row)."""
    calls = sites[(sites["stock"] == "no-inline") & (sites["heat_share"] >= FLOOR)]
    return calls.sort_values(["heat_share", "index"], ascending=[False, True]).head(1)


def main() -> int:
    benchmark = os.environ["KILN_BENCHMARK"]
    sites = pd.DataFrame([json.loads(line) for line in sys.stdin if line.strip()])
    chosen = hottest_call(with_shares(normalise(sites)))
    for site, heat in zip(chosen["site"], chosen["heat_share"]):
        print(f"hottest_call.py: {benchmark}: inlining {site} ({heat:.2e} a program instruction)",
              file=sys.stderr)
    if chosen.empty:
        print(f"hottest_call.py: {benchmark}: no call as hot as {FLOOR:g}", file=sys.stderr)
    values = [(site, "inline") for site in chosen["site"]]
    sys.stdout.write(decision_file("policy/hottest_call.py", benchmark, values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
