"""Trains an inlining policy from kiln's `dataset` table.

The dataset has one row per (step, site): whether the step's decision at the
site differs from the stock compiler's, the step's objective relative to the
stock build (time ratio, below 1 is better) and the site's features.

Labels: per benchmark, a ridge regression of ln(time ratio) on the
"differs from stock" indicators gives each site the effect of flipping it away
from the stock decision; a site whose flip lowered the objective is labelled 1.
Sites that no step varied carry no label and are left out.

Model: a gradient-boosted classifier on the site features (which handles the
features a compiler could not give, null in the dataset, natively), weighted by
the size of each effect, so that the sites that matter most count most.
"""

import argparse
import json
import sys

import joblib
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import Ridge

from features import FEATURES, exit_skipping_teardown, feature_matrix, normalise


def site_effects(rows: pd.DataFrame) -> pd.DataFrame:
    """The effect of flipping each varied site of one benchmark, from ridge regression."""
    ok = rows[rows["outcome"] == "ok"]
    wide = ok.pivot_table(
        index=["experiment", "chain", "step"],
        columns="site",
        values="differs",
        aggfunc="first",
    ).astype(float)
    target = np.log(
        ok.groupby(["experiment", "chain", "step"])["time_ratio"].first().loc[wide.index]
    )
    varied = [s for s in wide.columns if wide[s].nunique() > 1]
    if not varied or len(wide) < 3:
        return pd.DataFrame(columns=["site", "effect"])
    model = Ridge(alpha=1.0).fit(wide[varied].to_numpy(), target.to_numpy())
    return pd.DataFrame({"site": varied, "effect": model.coef_})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="kiln's dataset table as Parquet")
    parser.add_argument("--leave-out", default=None, help="a benchmark kept out of training")
    parser.add_argument("--model", required=True, help="where to write the trained model")
    args = parser.parse_args()

    data = normalise(pd.read_parquet(args.dataset))
    if args.leave_out is not None:
        data = data[data["benchmark"] != args.leave_out]
    if data.empty:
        sys.exit("train.py: no training rows (is the left-out benchmark the only one?)")

    labelled = []
    for benchmark, rows in data.groupby("benchmark"):
        effects = site_effects(rows)
        site_features = rows.drop_duplicates("site").set_index("site")
        effects = effects.join(site_features, on="site")
        effects["benchmark"] = benchmark
        labelled.append(effects)
        print(f"{benchmark}: {len(effects)} varied sites of {rows['site'].nunique()}")
    table = pd.concat(labelled, ignore_index=True)
    labels = (table["effect"] < 0).astype(int).to_numpy()
    weights = table["effect"].abs().to_numpy() + 1e-9
    x = feature_matrix(table)

    if len(set(labels)) < 2:
        # One class only: nothing to separate; the policy then predicts that class.
        constant = int(labels[0]) if len(labels) else 0
        model = {"constant": constant}
        print(f"only one label in the data: the policy always answers {constant}")
    else:
        classifier = HistGradientBoostingClassifier(max_iter=200, random_state=0)
        classifier.fit(x, labels, sample_weight=weights)
        model = {"classifier": classifier}
        print(
            f"trained on {len(labels)} sites of {table['benchmark'].nunique()} benchmarks, "
            f"{labels.sum()} of them better flipped; training accuracy "
            f"{classifier.score(x, labels):.3f}"
        )
    model["features"] = FEATURES
    joblib.dump(model, args.model)
    summary = {
        "sites": int(len(labels)),
        "better_flipped": int(labels.sum()),
        "benchmarks": sorted(table["benchmark"].unique().tolist()),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    exit_skipping_teardown(main())
