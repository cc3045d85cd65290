"""results/policy.md's table of the measured policy: each program's flips built
together (`kiln policy ... --json -- python policy/measured.py` rows) beside the
sum of their one-flip effects and the best one-flip effect.

    python policy/measured_report.py ROWS.json... [--effects FILE] [--margin M]
"""

import argparse
import json
import os
import sys

import numpy as np
import pandas as pd

from measured import HERE, helpful


def table(rows: list, effects: pd.DataFrame, margin: float) -> str:
    lines = ["| program | sites flipped | together (time ratio) | their one-flip effects summed "
             "| best one flip | inline nothing |", "|---|---:|---:|---:|---:|---:|"]
    ratios = []
    for row in sorted(rows, key=lambda r: r["benchmark"]):
        name = row["benchmark"]
        if row.get("failure"):
            lines.append(f"| {name} | - | failed: {row['failure']} | | | |")
            continue
        flips = helpful(effects, name, margin)
        ratio = row["policy"] / row["stock"]
        ratios.append(ratio)
        lines.append(f"| {name} | {row['changed']} | {ratio:.4f} | {1 + flips['effect'].sum():.4f} "
                     f"| {1 + flips['effect'].min():.4f} | {row['nothing'] / row['stock']:.4f} |")
    lines.append("")
    lines.append(f"{len(ratios)} programs: median {np.median(ratios):.4f}, best {min(ratios):.4f}, "
                 f"worst {max(ratios):.4f}; {sum(r < 1 for r in ratios)} below stock.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", help="`kiln policy --json` output files")
    parser.add_argument("--effects", default=os.path.join(HERE, "..", "dataset", "effects.parquet"))
    parser.add_argument("--margin", type=float, default=0.001)
    args = parser.parse_args()
    rows = [row for path in args.rows for row in json.load(open(path))]
    print(table(rows, pd.read_parquet(args.effects), args.margin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
