"""How many flips of shared builds two stores read separably, program by program.

Reads the `effects` table of each store (the same config run by two kilns, such as
prod-configs/forced-calls.sexp before and after discovery read forced calls) and prints
results/effects.md's table (markdown): per program, the shared-build rows, how many were
separable, and the largest residual, in each store.

Usage: python3 scripts/lib/separability_report.py BEFORE AFTER [--kiln KILN]
"""

import argparse
import json
import subprocess
import sys
from collections import defaultdict


def shared_rows(kiln, store):
    """The store's shared-build effect rows, by program."""
    out = subprocess.run([kiln, "export", store, "--table", "effects", "--format", "jsonl"],
                         check=True, capture_output=True, text=True).stdout
    rows = defaultdict(list)
    for line in out.splitlines():
        row = json.loads(line)
        if row["estimate"] == "shared-build":
            rows[row["benchmark"]].append(row)
    return rows


def cells(rows):
    if not rows:
        return "-", "-", "-"
    separable = sum(bool(r["separable"]) for r in rows)
    residual = max(abs(r["residual"] or 0.0) for r in rows)
    return str(len(rows)), f"{separable} ({100 * separable / len(rows):.0f} %)", f"{residual:.4%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--kiln", default="kiln")
    args = parser.parse_args()
    before, after = shared_rows(args.kiln, args.before), shared_rows(args.kiln, args.after)
    print("| program | before: rows | separable | largest residual | after: rows | separable "
          "| largest residual |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for program in sorted(set(before) | set(after)):
        print(f"| {program} | {' | '.join(cells(before[program]))} | "
              f"{' | '.join(cells(after[program]))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
