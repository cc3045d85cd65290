"""Leave-one-program-out inlining policies from a corpus's per-site effects.

`train` reads kiln's `effects` table (each screened site's exact one-flip
effect from the stock decisions) and `sites` table (every site of every
program, with its features) and, for each program P, fits a model of a flip's
effect on the sites of every other program, then picks how conservative the
policy is by validation on those training programs alone (each left out of an
inner fit in turn): flip a site only where the predicted gain is at least
`margin`, at most `limit` sites a program, only among the program's `hottest`
sites by the stock profile. P's own effects are never read for P's policy.

`decide` is the policy command `kiln policy` runs: the benchmark's sites on
stdin (JSON lines, the `sites` table's columns), its name in KILN_BENCHMARK,
the decision file on stdout, from the model trained without that benchmark.

`fit` writes one model trained on every program, its rule validated the
same way: the model shipped with the dataset (dataset/model.joblib), which
`decide --model` applies to any program (policy/decide).

    lopo.py train --effects effects.parquet --sites sites.parquet --out DIR
    kiln policy CONFIG -- python lopo.py decide --models DIR
    lopo.py fit --effects effects.parquet --sites sites.parquet --out model.joblib
    kiln policy CONFIG -- python lopo.py decide --model model.joblib
"""

import argparse
import itertools
import json
import os
import sys

import joblib
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor

from decisions import FLIP, decision_file
from features import FEATURES, exit_skipping_teardown, normalise

# Profile features, read as fractions of the program's instructions so that
# one program's hot site means the same as another's.
COSTS = ["caller_self_cost", "caller_inclusive_cost", "callee_self_cost",
         "callee_inclusive_cost", "site_calls", "caller_calls"]
MODEL_FEATURES = ([f for f in FEATURES if f not in COSTS] + [f"{c}_share" for c in COSTS]
                  + ["heat_share"])

# The conservative rule's choices, each tried by the inner validation.
MARGINS = [0.0005, 0.001, 0.002, 0.005, 0.01]
LIMITS = [1, 2, 3, 5]
# Programs with at least this many flips have a Spearman rho worth a median.
MANY_FLIPS = 20
# The most a rule may make a validation program worse: half the 0.5 % a
# held-out program may lose, as summed one-flip effects only approximate.
WORST = 0.0025


def heat_order(sites: pd.DataFrame) -> pd.DataFrame:
    """Each site's heat and rank by it, hottest first, as kiln's screening ranks them
    (controller/src/plan/search.rs, `heat` and `heats`): its calls in the build
    that inlines nothing, else the calls through it where the stock build kept
    the call, else how often its caller's body ran (the caller's own instructions
    over its size); a site with none takes the heat of the hottest site calling
    the function that holds it."""
    calls = sites["site_calls"].astype("Float64")
    # Discoveries before kiln profiled the uninlined build have no such column.
    uninlined = sites.get("uninlined_calls", pd.Series(pd.NA, index=sites.index))
    size = sites["caller_instructions"].astype("Float64")
    body = (sites["caller_self_cost"].astype("Float64") // size).where(size > 0)
    own = uninlined.astype("Float64").fillna(calls).fillna(body)
    callee = sites["site"].str.split(" @ ").str[0]
    outer = sites["site"].str.split(" @ ").str[-1]
    function = outer.str.rsplit(":", n=2).str[0]
    heats = own.copy()
    while True:
        known = pd.Series(heats.to_numpy(), index=callee.to_numpy()).dropna()
        of_function = known.groupby(level=0).max()
        inherited = pd.Series(function.map(of_function).to_numpy(), index=sites.index,
                              dtype="Float64")
        new = heats.where(own.notna(), inherited)
        if new.equals(heats):
            break
        heats = new
    # Ties and sites without heat keep discovery order, coldest last.
    key = pd.DataFrame({"heat": heats.fillna(-1).astype(float), "index": sites["index"]})
    order = key.sort_values(["heat", "index"], ascending=[False, True], kind="stable").index
    rank = pd.Series(range(len(sites)), index=order).reindex(sites.index)
    return pd.DataFrame({"rank": rank, "heat": heats.astype(float)})


def with_shares(sites: pd.DataFrame) -> pd.DataFrame:
    """Adds the profile features as shares of the program's instructions (the
    largest inclusive cost of any caller: the entry function's)."""
    sites = sites.copy()
    total = sites.groupby("benchmark")["caller_inclusive_cost"].transform("max").astype(float)
    for c in COSTS:
        # A feature of a later kiln than the data's discovery is null throughout.
        cost = sites[c] if c in sites else pd.Series(np.nan, index=sites.index)
        sites[f"{c}_share"] = cost.astype("Float64").astype(float) / total
    heats = pd.concat(heat_order(group) for _, group in sites.groupby("benchmark"))
    sites["rank"] = heats["rank"]
    # How often the site ran per instruction of the program: what a flip's
    # change per execution is multiplied by.
    sites["heat_share"] = heats["heat"] / total
    return sites


def matrix(frame: pd.DataFrame, features=MODEL_FEATURES) -> np.ndarray:
    return np.column_stack([
        frame[name].astype("Float64").astype(float).to_numpy() if name in frame
        else np.full(len(frame), np.nan)
        for name in features
    ])


def fit(train: pd.DataFrame, features=MODEL_FEATURES):
    """A model of a flip's effect (its share of the program's instructions) on
    the site's features. Small and regularised: a few hundred sites."""
    model = HistGradientBoostingRegressor(max_iter=150, max_depth=3, learning_rate=0.05,
                                          min_samples_leaf=8, random_state=0)
    return model.fit(matrix(train, features), train["effect"].to_numpy())


def choose(predicted: pd.Series, rank: pd.Series, margin: float, limit: int,
           hottest: int) -> list:
    """The sites the rule flips: predicted gain of at least `margin`, among the
    `hottest` sites, the `limit` largest gains."""
    candidates = predicted[(predicted <= -margin) & (rank < hottest)]
    return list(candidates.sort_values().index[:limit])


def validate(train: pd.DataFrame, hottest: int, features=MODEL_FEATURES) -> dict:
    """Picks margin and limit by leaving each training program out of an inner
    fit: the sum of the measured effects of the flips the rule would make, a
    program at a time (one-flip effects add to a first approximation). The
    rule kept is the one with the best median (then mean) among those that
    make no validation program worse by more than WORST; flipping nothing is
    one of them, so a model that does not transfer flips nothing."""
    predictions = []
    for program in sorted(train["benchmark"].unique()):
        inner = train[train["benchmark"] != program]
        held = train[train["benchmark"] == program]
        if inner.empty or held.empty:
            continue
        p = pd.Series(fit(inner, features).predict(matrix(held, features)), index=held.index)
        predictions.append((held, p))
    nothing = {"margin": None, "limit": 0, "median": 0.0, "worst": 0.0, "mean": 0.0}
    if not predictions:
        return nothing
    scores = [nothing]
    for margin, limit in itertools.product(MARGINS, LIMITS):
        gains = [held.loc[choose(p, held["rank"], margin, limit, hottest), "effect"].sum()
                 for held, p in predictions]
        scores.append({"margin": margin, "limit": limit, "median": float(np.median(gains)),
                       "worst": float(max(gains)), "mean": float(np.mean(gains))})
    safe = [s for s in scores if s["worst"] <= WORST]
    return min(safe, key=lambda s: (s["median"], s["mean"], s["limit"]))


def flips(effects_path: str, sites_path: str) -> pd.DataFrame:
    """Each screened flip away from stock once, with its site's features: a
    flip measured alone is taken over its shared-build estimate, a
    shared-build estimate that could not be separated is left out, and so are
    flips measured around other contexts than stock (the policy decides from stock)."""
    effects = normalise(pd.read_parquet(effects_path))
    sites = with_shares(normalise(pd.read_parquet(sites_path)))
    keys = ["benchmark", "site"]
    effects = effects.merge(sites[keys + [c for c in sites if c not in effects]], on=keys)
    effects = effects[effects["value"] == effects["stock"].map(FLIP)]
    # An experiment no longer in its config is named in parentheses, not by its
    # program: it could not be held out with that program, so it is left out.
    effects = effects[~effects["benchmark"].str.startswith("(")]
    for column, kept in [("context", "stock"), ("separable", True)]:
        if column in effects:
            effects = effects[effects[column] == kept]
    if "estimate" in effects:
        effects = effects.sort_values("estimate", key=lambda e: e != "alone", kind="stable")
    return effects.drop_duplicates(keys)


def trained(train: pd.DataFrame, hottest: int, features=MODEL_FEATURES) -> dict:
    """A model fitted on `train` and its rule, validated on `train` alone."""
    # The features are kept with the model: a model file outlives this list's changes.
    return {"model": fit(train, features), "rule": validate(train, hottest, features),
            "hottest": hottest, "trained_on": sorted(train["benchmark"].unique()),
            "features": features}


def rule_flips(model: dict, held: pd.DataFrame) -> list:
    """The flips a trained model's rule makes among `held`'s sites."""
    rule = model["rule"]
    if rule["limit"] == 0:
        return []
    features = model["features"]
    predicted = pd.Series(model["model"].predict(matrix(held, features)), index=held.index)
    return choose(predicted, held["rank"], rule["margin"], rule["limit"], model["hottest"])


def default_hottest(effects: pd.DataFrame, hottest) -> int:
    """The policy flips only among a program's hottest sites, as many as the
    screening measured: the sites its validation could judge."""
    return hottest or int(effects.groupby("benchmark")["site"].nunique().max())


def rule_line(name: str, model: dict) -> str:
    rule = model["rule"]
    return (f"{name}: trained on {len(model['trained_on'])} programs' flips "
            f"({', '.join(model['trained_on'])}); rule: gain >= {rule['margin']}, "
            f"at most {rule['limit']} flips (validation median {rule['median']:+.4%}, "
            f"mean {rule['mean']:+.4%}, worst {rule['worst']:+.4%})")


def train_all(args) -> int:
    effects = flips(args.effects, args.sites)
    hottest = default_hottest(effects, args.hottest)
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for program in sorted(effects["benchmark"].unique()):
        train = effects[effects["benchmark"] != program]
        model = trained(train, hottest)
        joblib.dump(model, os.path.join(args.out, f"{program}.joblib"))
        summary[program] = {"sites": int(len(train)), **model["rule"]}
        print(rule_line(program, model), file=sys.stderr)
    with open(os.path.join(args.out, "rules.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 0


def evaluate(args) -> int:
    """How well the model ranks flips on programs it never saw, without building anything:
    per program, Spearman's rho between the held-out predictions and the measured effects,
    the share of effects beyond 0.1 % whose sign it predicts, and the measured effect of the
    flip it predicts best against the best measured flip (the one-flip oracle)."""
    from scipy.stats import spearmanr

    effects = flips(args.effects, args.sites)
    features = [f for f in MODEL_FEATURES if not any(part in f for part in args.leave_out)]
    lines = ["| held-out program | flips | Spearman rho | sign right (effects > 0.1 %) | "
             "predicted best flip, measured | best measured flip |", "|---|---:|---:|---:|---:|---:|"]
    hottest = default_hottest(effects, None)
    if args.rule:
        lines[0] += " rule's flips | their summed effect |"
        lines[1] += "---:|---:|"
    rhos, rights, bigs, summed = [], 0, 0, []
    for program in sorted(effects["benchmark"].unique()):
        held = effects[effects["benchmark"] == program]
        train = effects[effects["benchmark"] != program]
        model = fit(train, features)
        predicted = model.predict(matrix(held, features))
        big = (held["effect"].abs() > 0.001).to_numpy()
        right = (np.sign(predicted[big]) == np.sign(held["effect"].to_numpy()[big])).sum()
        rho = spearmanr(predicted, held["effect"]).statistic
        # A program whose flips all measured the same has no ranking to match (rho undefined).
        if len(held) >= MANY_FLIPS and np.isfinite(rho):
            rhos.append(rho)
        rights, bigs = rights + right, bigs + big.sum()
        lines.append(f"| {program} | {len(held)} | {rho:+.3f} | {right} of {big.sum()} | "
                     f"{held['effect'].iloc[int(np.argmin(predicted))]:+.4%} | "
                     f"{held['effect'].min():+.4%} |")
        if args.rule:
            chosen = rule_flips(trained(train, hottest, features), held)
            gain = held.loc[chosen, "effect"].sum()
            summed.append(gain)
            lines[-1] += f" {len(chosen)} | {gain:+.4%} |"
    lines.append(f"\n{len(features)} features; the {len(rhos)} programs of at least {MANY_FLIPS} "
                 f"flips whose effects differ: median Spearman rho {np.median(rhos):+.3f}; signs right {rights} of "
                 f"{bigs} effects beyond 0.1 % ({rights / max(bigs, 1):.0%}).")
    if args.rule:
        lines.append(f"The rule's flips, summed one-flip effects over all {len(summed)} programs: "
                     f"median {np.median(summed):+.4%}, best {min(summed):+.4%}, worst "
                     f"{max(summed):+.4%}; {sum(g != 0 for g in summed)} programs flipped.")
    print("\n".join(lines))
    return 0


def fit_one(args) -> int:
    """The model shipped with the dataset: trained on every program, its rule
    validated by leaving each out in turn."""
    effects = flips(args.effects, args.sites)
    model = trained(effects, default_hottest(effects, args.hottest))
    joblib.dump(model, args.out, compress=3)
    print(rule_line(args.out, model), file=sys.stderr)
    return 0


def decide(args) -> int:
    benchmark = os.environ["KILN_BENCHMARK"]
    if args.model is not None:
        model = joblib.load(args.model)
        if benchmark in model["trained_on"]:
            print(f"lopo.py: {benchmark} is one of the programs {args.model} was trained on",
                  file=sys.stderr)
    else:
        model = joblib.load(os.path.join(args.models, f"{benchmark}.joblib"))
        if benchmark in model["trained_on"]:
            sys.exit(f"lopo.py: the model for {benchmark} was trained on it")
    sites = pd.DataFrame([json.loads(line) for line in sys.stdin if line.strip()])
    sites = with_shares(normalise(sites)).set_index("site", drop=False)
    model.setdefault("features", MODEL_FEATURES)
    predicted = pd.Series(model["model"].predict(matrix(sites, model["features"])),
                          index=sites.index)
    chosen = set(rule_flips(model, sites))
    print(f"lopo.py: {benchmark}: flipping {len(chosen)} site(s): "
          + ", ".join(f"{s} ({predicted[s]:+.4%})" for s in sorted(chosen)), file=sys.stderr)
    values = [(site, FLIP[sites.loc[site, "stock"]]) for site in sorted(chosen)]
    sys.stdout.write(decision_file("policy/lopo.py", benchmark, values))
    return 0


def evidence(effects: pd.DataFrame) -> str:
    """What the screened flips offered each program: how many were measured,
    how many of them inlined a call the stock build kept, how many helped or
    hurt by more than 0.1 %, and the best one (a bound on a one-flip policy)."""
    lines = ["| program | flips measured | of them inlining a kept call | helped > 0.1 % | "
             "hurt > 0.1 % | best flip |", "|---|---:|---:|---:|---:|---:|"]
    for name, flips in effects.groupby("benchmark"):
        lines.append(
            f"| {name} | {len(flips)} | {(flips['stock'] == 'no-inline').sum()} | "
            f"{(flips['effect'] < -0.001).sum()} | {(flips['effect'] > 0.001).sum()} | "
            f"{1 + flips['effect'].min():.4f} |")
    return "\n".join(lines)


def report(args) -> int:
    """results/policy.md's table from `kiln policy --json` rows and the rules."""
    with open(args.rows) as f:
        rows = json.load(f)
    with open(os.path.join(args.models, "rules.json")) as f:
        rules = json.load(f)

    def ratio(row, key):
        return row[key] / row["stock"] if row.get(key) and row.get("stock") else None

    def cell(x):
        return "-" if x is None else f"{x:.4f}"

    def rule_text(rule):
        if not rule.get("limit"):
            return "flip nothing"
        return f"gain >= {rule['margin']:.2%}, at most {rule['limit']}"

    lines = ["| held-out program | flips | rule chosen by validation | policy | inline nothing | "
             "search best (one flip) | failure |", "|---|---:|---|---:|---:|---:|---|"]
    measured = []
    for row in rows:
        name = row["benchmark"]
        rule = rules.get(name, {})
        policy = ratio(row, "policy")
        if policy is not None:
            measured.append(policy)
        lines.append(
            f"| {name} | {row.get('changed', '-')} | "
            f"{rule_text(rule)} | {cell(policy)} | "
            f"{cell(ratio(row, 'nothing'))} | {cell(ratio(row, 'best_step'))} | "
            f"{(row.get('failure') or '-').replace('|', '/')} |")
    if args.effects:
        lines += ["", evidence(normalise(pd.read_parquet(args.effects)))]
    if measured:
        median, worst = float(np.median(measured)), max(measured)
        met = median <= 0.995 and worst <= 1.005 and len(measured) >= 20
        lines += ["", f"{len(measured)} held-out programs measured: median policy ratio "
                  f"{median:.4f}, worst {worst:.4f}, best {min(measured):.4f}; target (median "
                  f"<= 0.995, none above 1.005, 20 or more programs) "
                  f"{'met' if met else 'not met'}."]
    with open(args.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="one model per left-out program")
    train.add_argument("--effects", required=True, help="kiln's effects table as Parquet")
    train.add_argument("--sites", required=True, help="kiln's sites table as Parquet")
    train.add_argument("--hottest", type=int, default=None,
                       help="sites a program's policy may flip, its hottest (default: as many "
                            "as the screening measured of any program)")
    train.add_argument("--out", required=True, help="the folder of models")
    one = commands.add_parser("fit", help="one model trained on every program")
    one.add_argument("--effects", required=True, help="kiln's effects table as Parquet")
    one.add_argument("--sites", required=True, help="kiln's sites table as Parquet")
    one.add_argument("--hottest", type=int, default=None, help="as for train")
    one.add_argument("--out", required=True, help="the model file to write")
    judge = commands.add_parser("evaluate", help="held-out ranking of the flips, as Markdown")
    judge.add_argument("--effects", required=True, help="kiln's effects table as Parquet")
    judge.add_argument("--sites", required=True, help="kiln's sites table as Parquet")
    judge.add_argument("--leave-out", action="append", default=[], metavar="PART",
                       help="leave out the features whose names hold PART (an ablation)")
    judge.add_argument("--rule", action="store_true",
                       help="also the flips each held-out model's validated rule makes, and "
                            "their measured one-flip effects summed (slow: a validation each)")
    use = commands.add_parser("decide", help="the policy command of `kiln policy`")
    source = use.add_mutually_exclusive_group(required=True)
    source.add_argument("--models", help="the folder `train` wrote: each program's held-out model")
    source.add_argument("--model", help="one model `fit` wrote, for every program")
    summary = commands.add_parser("report", help="the held-out table, as Markdown")
    summary.add_argument("--rows", required=True, help="`kiln policy --json` output")
    summary.add_argument("--models", required=True, help="the folder `train` wrote")
    summary.add_argument("--effects", help="the effects table, for what the flips offered")
    summary.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    commands = {"train": train_all, "fit": fit_one, "evaluate": evaluate, "decide": decide,
                "report": report}
    return commands[args.command](args)


if __name__ == "__main__":
    exit_skipping_teardown(main())
