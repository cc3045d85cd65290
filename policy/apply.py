"""Applies a trained policy to a benchmark it has not seen: a decision file out.

Reads the benchmark's sites and features as `kiln sites CONFIG BENCHMARK --json`
prints them, flips every site the model says is better flipped away from the
stock decision, and writes a kiln decision file that `kiln benchmark` measures.
"""

import argparse
import json
import sys

import joblib
import pandas as pd

from decisions import FLIP, decision_file
from features import feature_matrix, normalise


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--sites", required=True, help="`kiln sites CONFIG BENCHMARK --json` output")
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="flip a site when the model's probability of a gain exceeds this")
    parser.add_argument("-o", "--output", required=True, help="the decision file to write")
    args = parser.parse_args()

    model = joblib.load(args.model)
    with open(args.sites) as f:
        discovery = json.load(f)
    stock = discovery["baseline"]
    features = discovery.get("features", {})
    rows = []
    for point in discovery["points"]:
        site = point["id"]
        row = {"site": site, "stock_inline": stock[site] == "inline"}
        row.update(features.get(site, {}))
        rows.append(row)
    table = normalise(pd.DataFrame(rows))

    if "constant" in model:
        flip = [bool(model["constant"])] * len(table)
    else:
        probability = model["classifier"].predict_proba(feature_matrix(table))[:, 1]
        flip = list(probability > args.threshold)

    values = []
    for site, flip_it in zip(table["site"], flip):
        value = stock[site]
        if flip_it and value in FLIP:
            value = FLIP[value]
        values.append((site, value))
    flipped = sum(value != stock[site] for site, value in values)
    with open(args.output, "w") as f:
        f.write(decision_file("policy/apply.py", args.benchmark, values))
    print(f"{args.output}: {flipped} of {len(table)} sites flipped away from stock")
    return 0


if __name__ == "__main__":
    sys.exit(main())
