"""The dataset kept in the repository: measured site effects and the sites' features, added
to by each campaign, never replaced (see scripts/dataset).

    python dataset.py store SETTINGS
    python dataset.py add --settings SETTINGS --effects E.parquet --sites S.parquet
                          --kiln VERSION --out DIR
    python dataset.py programs --out DIR
    python dataset.py features --discoveries FOLDER --kiln VERSION --out DIR

SETTINGS is `kiln check CONFIG --json`'s output: `store` prints the campaign's store, `add`
reads one campaign's `kiln export` tables and merges them into DIR/effects.parquet and
DIR/sites.parquet: an effect whose key is already there (campaign, experiment, site, value,
context, estimate) replaces the old one (a resumed campaign's effect over more steps); a site
already there (campaign, experiment, site) keeps its features, only its missing ones filled
(`features` may have taken them again from a newer discovery than the store's); every other row
is added. DIR/DATASHEET.md is written
anew from what the tables then hold.

`programs` prints the programs of DIR/sites.parquet, one a line, most effects first; `features` takes each
program's features from FOLDER/PROGRAM.json (`kiln sites CONFIG PROGRAM --rediscover --json`)
into every row of DIR/sites.parquet for that program and site: features a newer kiln records
for sites already measured (DATASHEET.md written anew). A site the new discovery does not have
keeps its row as it was.
"""

import argparse
import json
import os
import sys

import pandas as pd

EFFECT_KEY = ["campaign", "experiment", "site", "value", "context", "estimate"]
SITE_KEY = ["campaign", "experiment", "site"]


def merged(path, new, key):
    """The table at `path` (if any) with `new`'s rows, one row per key, new rows winning."""
    if os.path.exists(path):
        old = pd.read_parquet(path)
        new = pd.concat([old, new], ignore_index=True)
    return new.drop_duplicates(subset=key, keep="last").reset_index(drop=True)


def merged_sites(path, new, key):
    """The sites at `path` (if any) with `new`'s, one row per key: a site already there keeps its
    features, which `features` may have taken again from a newer discovery than the store's, and
    only its missing ones are filled from the new row; new sites are added."""
    new = new.drop_duplicates(subset=key, keep="last")
    if not os.path.exists(path):
        return new.reset_index(drop=True)
    old = pd.read_parquet(path)
    sites = old.set_index(key).combine_first(new.set_index(key)).reset_index()
    # combine_first widens nullable integers to floats: each old column gets its type back.
    return sites.astype(old.dtypes.to_dict())


def tagged(frame, settings, kiln):
    """A campaign's export rows, with where they came from."""
    frame = frame.copy()
    # An experiment no longer in the campaign's config has no benchmark in the export.
    unnamed = frame["benchmark"].isna() | (frame["benchmark"] == "")
    frame.loc[unnamed, "benchmark"] = "(" + frame.loc[unnamed, "experiment"] + ")"
    frame.insert(0, "campaign", settings["name"])
    frame["objective"] = settings["objective"]["metric"]
    frame["kiln"] = kiln
    return frame


def with_code(sites):
    """Site rows whose discovery read the optimised code (a later kiln's)."""
    if "callee_code_kept" not in sites:
        return 0
    return int(sites["callee_code_kept"].notna().sum())


def with_flipped_code(effects):
    """Effect rows that hold their caller's optimised code before and after the flip."""
    if "caller_flipped_instructions" not in effects:
        return 0
    both = effects["caller_start_instructions"].notna()
    return int((both & effects["caller_flipped_instructions"].notna()).sum())


def in_two_contexts(effects):
    """The datasheet's lines on flips measured around stock and around a random context: how
    far a flip's effect depends on the decisions beside it."""
    separable = effects[effects["separable"]]
    key = ["benchmark", "site", "value"]
    stock = separable[separable["context"] == "stock"].groupby(key)["effect"].median()
    around = separable[separable["context"].str.startswith("random")]
    random = around.groupby(key)["effect"].median()
    both = pd.concat([stock.rename("stock"), random.rename("random")], axis=1, join="inner")
    if both.empty:
        return []
    moved = both[(both.abs() > 0.001).any(axis=1)]
    opposite = moved[(moved["stock"] * moved["random"] < 0) & (moved.abs() > 0.001).all(axis=1)]
    apart = (moved["stock"] - moved["random"]).abs().sort_values(ascending=False)
    lines = [
        "## Effects in two contexts",
        "",
        f"{len(both):,} flips were measured around stock and around a random context "
        f"(Spearman's rho of the two effects {both.corr(method='spearman').iloc[0, 1]:+.3f}); "
        f"{len(moved):,} moved the count by more than 0.1 % in either, and "
        f"{len(opposite):,} of those went opposite ways beyond 0.1 % in the two. "
        "The furthest apart:",
        "",
        "| program | site | value | around stock | around random |",
        "|---|---|---|---:|---:|",
    ]
    for (program, site, value) in apart.index[:5]:
        row = both.loc[(program, site, value)]
        lines.append(
            f"| {program} | `{site[:70]}` | {value} | "
            f"{row['stock'] * 100:+.3f} % | {row['random'] * 100:+.3f} % |"
        )
    return lines + [""]


def distinct_effects(effects) -> int:
    """How many (program, site, context) effects the rows measure soundly."""
    sound = effects[(effects["estimate"] == "alone") | effects["separable"]]
    return len(sound[["benchmark", "site", "context"]].drop_duplicates())


CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "prod-configs", "corpus")


def corpus_header(program):
    """The fields of a corpus entry's `; corpus:` line (language, domain, build, package,
    licence), empty for a program the corpus does not hold."""
    path = os.path.join(CORPUS, f"{program}.sexp")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        line = next((l for l in f if l.startswith("; corpus: ")), "")
    fields = (part.strip().split(" ", 1) for part in line[len("; corpus: "):].split(";"))
    return {field[0]: field[1] for field in fields if len(field) == 2}


def programs_table(programs):
    """Each program's package, version and licence, as its corpus entry names them."""
    lines = ["## Programs", "",
             "Each program's source package and version, and its licence (the package's: "
             "Debian's copyright file, the crate's `license`), from its entry in "
             "prod-configs/corpus/.", "",
             "| program | package and version | licence | language | domain |",
             "|---|---|---|---|---|"]
    for program in sorted(programs):
        h = corpus_header(program)
        cells = [h.get(k, "-") for k in ("package", "licence", "language", "domain")]
        lines.append(f"| {program} | " + " | ".join(cells) + " |")
    return lines


def datasheet(effects, sites):
    """DATASHEET.md: what the dataset holds, program by program, and how it was measured."""
    lines = [
        "# kiln's dataset of measured inlining effects",
        "",
        "Written by `scripts/dataset` from the campaigns' stores; do not edit by hand.",
        "",
        f"- effects: {len(effects):,} rows over {effects['benchmark'].nunique()} programs "
        f"({(effects['estimate'] == 'alone').sum():,} measured alone, "
        f"{(effects['estimate'] == 'shared-build').sum():,} read from shared builds, "
        f"{(~effects['separable']).sum():,} of those not separable; "
        f"{with_flipped_code(effects):,} with their caller's code before and after the flip);",
        f"- distinct site effects: {distinct_effects(effects):,} (a program's site around one "
        "context, measured alone or read separably from a shared build; the rows repeat some: "
        "measured by several experiments, or alone again after a build they could not be "
        "separated in);",
        f"- sites: {len(sites):,} rows, each a call site's features at discovery "
        f"({with_code(sites):,} with features of the optimised code);",
        f"- campaigns: {', '.join(sorted(effects['campaign'].unique()))}; exported by kiln "
        f"{', '.join(sorted(effects['kiln'].unique()))}; objectives: "
        f"{', '.join(sorted(effects['objective'].unique()))}.",
        "",
        "| program | sites | effects | alone | shared builds | contexts | "
        "effects beyond ±0.1 % |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for program, rows in effects.groupby("benchmark"):
        n_sites = sites.loc[sites["benchmark"] == program, "site"].nunique()
        moved = (rows["effect"].abs() > 0.001).sum()
        lines.append(
            f"| {program} | {n_sites:,} | {len(rows):,} | "
            f"{(rows['estimate'] == 'alone').sum():,} | "
            f"{(rows['estimate'] == 'shared-build').sum():,} | "
            f"{', '.join(sorted(rows['context'].unique()))} | {moved:,} |"
        )
    lines += [""] + programs_table(effects["benchmark"].unique())
    lines += [""] + in_two_contexts(effects)
    lines += [open(os.path.join(os.path.dirname(__file__), "datasheet-notes.md")).read()]
    return "\n".join(lines)


def add(args):
    with open(args.settings) as f:
        settings = json.load(f)
    effects = merged(
        os.path.join(args.out, "effects.parquet"),
        tagged(pd.read_parquet(args.effects), settings, args.kiln),
        EFFECT_KEY,
    )
    sites = merged_sites(
        os.path.join(args.out, "sites.parquet"),
        tagged(pd.read_parquet(args.sites), settings, args.kiln),
        SITE_KEY,
    )
    os.makedirs(args.out, exist_ok=True)
    effects.to_parquet(os.path.join(args.out, "effects.parquet"), index=False)
    sites.to_parquet(os.path.join(args.out, "sites.parquet"), index=False)
    with open(os.path.join(args.out, "DATASHEET.md"), "w") as f:
        f.write(datasheet(effects, sites))
    print(f"{args.out}: {len(effects):,} effects, {len(sites):,} sites", file=sys.stderr)


def programs(args):
    """The programs of the dataset's sites table, one a line: those with the most effects
    first, so that a run stopped part way has rediscovered the programs that teach most."""
    sites = pd.read_parquet(os.path.join(args.out, "sites.parquet"))
    effects = pd.read_parquet(os.path.join(args.out, "effects.parquet"))
    counts = effects["benchmark"].value_counts()
    names = sorted(sites["benchmark"].unique(), key=lambda p: (-counts.get(p, 0), p))
    for name in names:
        print(name)


def discovered(path):
    """One `kiln sites --json` discovery's features: a row per site, snake-case columns."""
    with open(path) as f:
        features = json.load(f).get("features", {})
    frame = pd.DataFrame.from_dict(features, orient="index")
    frame = frame.rename(columns=lambda c: c.replace("-", "_"))
    return frame.rename_axis("site").reset_index()


def features(args):
    """DIR/sites.parquet with each rediscovered program's features in place of its old ones."""
    path = os.path.join(args.out, "sites.parquet")
    sites = pd.read_parquet(path)
    taken = {"kiln"}
    for name in sorted(os.listdir(args.discoveries)):
        program = name.removesuffix(".json")
        new = discovered(os.path.join(args.discoveries, name))
        rows = sites.index[(sites["benchmark"] == program) & sites["site"].isin(new["site"])]
        found = new.set_index("site").loc[sites.loc[rows, "site"]]
        taken.update(found.columns)
        for column in found.columns:
            values = found[column].astype("object").where(found[column].notna(), None)
            if column not in sites:
                sites[column] = pd.Series([None] * len(sites), dtype="object")
            sites[column] = sites[column].astype("object")
            sites.loc[rows, column] = values.to_numpy()
        sites.loc[rows, "kiln"] = args.kiln
        print(f"{program}: features of {len(rows):,} site rows taken again", file=sys.stderr)
    for column in taken:
        sites[column] = sites[column].convert_dtypes()
    sites.to_parquet(path, index=False)
    effects = pd.read_parquet(os.path.join(args.out, "effects.parquet"))
    with open(os.path.join(args.out, "DATASHEET.md"), "w") as f:
        f.write(datasheet(effects, sites))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    store = commands.add_parser("store", help="print the campaign's store")
    store.add_argument("settings")
    one = commands.add_parser("add", help="merge one campaign's exports into the dataset")
    for name in ["settings", "effects", "sites", "kiln", "out"]:
        one.add_argument("--" + name, required=True)
    listing = commands.add_parser("programs", help="print the dataset's programs")
    listing.add_argument("--out", required=True)
    again = commands.add_parser("features", help="take rediscovered programs' features")
    for name in ["discoveries", "kiln", "out"]:
        again.add_argument("--" + name, required=True)
    args = parser.parse_args()
    if args.command == "store":
        with open(args.settings) as f:
            print(json.load(f)["store"])
    else:
        {"add": add, "programs": programs, "features": features}[args.command](args)


if __name__ == "__main__":
    main()
