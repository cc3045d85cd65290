"""Where each way of drawing a search's flips lands, program by program: the share of draws
that fall on a site whose one flip around stock helped (saved more than 0.1 % of the count) or
hurt, and what a draw does to the count on average (its drift), drawing every site alike (`uniform`), by heat (`profile`, the share of flips that hot that
moved a count) or by heat and stock decision (`helping`, the share of such flips that helped).

Each program's weights are read from the other programs' effects, as a program the search
never saw would get them. A site never measured around stock counts as neither helping nor
hurting, and the coverage column says how much of the draw that is: the dataset measured the
hottest sites first, so a scheme that draws cold sites draws more that were not measured.

    python policy/draw_odds.py --effects dataset/effects.parquet --sites dataset/sites.parquet
"""

import argparse

import pandas as pd

from features import normalise
from heat_moves import MOVED, heat_bin
from lopo import with_shares

SCHEMES = ["uniform", "profile", "helping"]


def site_table(effects: pd.DataFrame, sites: pd.DataFrame) -> pd.DataFrame:
    """Every site of every program: its heat bin, stock decision and (where measured apart
    around stock) its one-flip effect."""
    sites = sites[~sites["benchmark"].str.startswith("(")]
    sites = sites.drop_duplicates(["benchmark", "site"], keep="last").reset_index(drop=True)
    sites = with_shares(normalise(sites))[["benchmark", "site", "stock", "heat_share"]]
    around_stock = effects[(effects["context"] == "stock") & effects["separable"]]
    measured = around_stock.groupby(["benchmark", "site"], as_index=False)["effect"].mean()
    table = sites.merge(measured, on=["benchmark", "site"], how="left")
    return table.assign(bin=table["heat_share"].map(heat_bin),
                        helped=table["effect"] < -MOVED, hurt=table["effect"] > MOVED,
                        moved=table["effect"].abs() > MOVED)


def weights(table: pd.DataFrame, program: str) -> pd.DataFrame:
    """The program's sites with each scheme's drawing weight, read from the other programs."""
    others = table[(table["benchmark"] != program) & table["effect"].notna()]
    moved = others.groupby("bin")["moved"].mean()
    helped = others.groupby(["stock", "bin"])["helped"].mean()
    own = table[table["benchmark"] == program]
    return own.assign(
        uniform=1.0,
        profile=own["bin"].map(moved).fillna(0.0),
        helping=[helped.get((s, b), 0.0) for s, b in zip(own["stock"], own["bin"])])


def odds(own: pd.DataFrame) -> dict:
    """Per scheme: the share of its draws on helping sites, on hurting ones, on measured ones."""
    row = {"program": own["benchmark"].iloc[0], "sites": len(own),
           "helping sites": int(own["helped"].sum())}
    for scheme in SCHEMES:
        w = own[scheme] / own[scheme].sum()
        row[f"{scheme} helps"] = float((w * own["helped"]).sum())
        row[f"{scheme} hurts"] = float((w * own["hurt"]).sum())
        row[f"{scheme} measured"] = float((w * own["effect"].notna()).sum())
        # What one draw does to the count on average, in %: a walk that accepts most of
        # its proposals (annealing at its default temperatures) drifts by this a flip.
        row[f"{scheme} drift %"] = float((w * own["effect"].fillna(0.0)).sum() * 100)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effects", required=True)
    parser.add_argument("--sites", required=True)
    parser.add_argument("--csv", help="also write the table, a row a program, to this file")
    args = parser.parse_args()
    table = site_table(pd.read_parquet(args.effects), pd.read_parquet(args.sites))
    rows = pd.DataFrame([odds(weights(table, p)) for p in sorted(table["benchmark"].unique())])
    for scheme in SCHEMES[1:]:
        rows[f"{scheme}/uniform helps"] = rows[f"{scheme} helps"] / rows["uniform helps"]
    print(rows.round(4).to_string(index=False))
    if args.csv:
        rows.to_csv(args.csv, index=False)
    found = rows[rows["helping sites"] > 0]
    print(f"\n{len(found)} of {len(rows)} programs hold a measured helping flip; medians over them:")
    print(found.drop(columns=["program"]).median().round(4).to_string())


if __name__ == "__main__":
    main()
