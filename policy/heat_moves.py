"""How often a flip of a site as hot as each bin moved its program's count: the
table `(proposals profile)` draws by (MOVED_BY_HEAT in controller/src/plan/search.rs).

Reads the dataset's effects around stock that were read apart (`separable`),
leaves out the programs named by --leave-out (results/search.md's evaluation
half, which the search is judged on), and prints, per bin of the site's heat as
a share of its program's instructions (`lopo.with_shares`, the heat kiln's
screening ranks by), how many flips there are and the share that moved the count
by more than 0.1 %; with --by-direction, per stock decision too, the shares that
helped and hurt (the sign that a draw by heat alone does not know).

    python policy/heat_moves.py --effects dataset/effects.parquet --sites dataset/sites.parquet \
        --leave-out jsoncpp libdeflate libyaml lz4 pcre2 yaml-cpp
"""

import argparse

import pandas as pd

from features import normalise
from lopo import with_shares

# Lower edges of the bins, hottest first, as MOVED_BY_HEAT writes them.
EDGES = [1e-4, 10**-4.5, 1e-5, 1e-7, 0.0]
# A flip "moves" the count beyond this share of it.
MOVED = 0.001


def heat_bin(share: float) -> str:
    if pd.isna(share):
        return "no heat"
    return next(f"{edge:.3g}" for edge in EDGES if share >= edge)


def table(effects: pd.DataFrame, sites: pd.DataFrame, leave_out: list[str],
          by_direction: bool = False) -> pd.DataFrame:
    sites = sites.drop_duplicates(["benchmark", "site"], keep="last").reset_index(drop=True)
    shares = with_shares(normalise(sites))[["benchmark", "site", "heat_share"]]
    around_stock = effects[(effects["context"] == "stock") & effects["separable"]]
    kept = around_stock[~around_stock["benchmark"].isin(leave_out)]
    flips = kept.merge(shares, on=["benchmark", "site"], how="left")
    flips = flips.assign(bin=flips["heat_share"].map(heat_bin),
                         moved=flips["effect"].abs() > MOVED)
    print(f"{len(flips)} effects over {flips['benchmark'].nunique()} programs")
    order = [heat_bin(edge) for edge in EDGES] + [heat_bin(float("nan"))]
    if by_direction:
        flips = flips.assign(helped=flips["effect"] < -MOVED, hurt=flips["effect"] > MOVED)
        bins = flips.groupby(["stock", "bin"]).agg(
            flips=("moved", "size"), helped=("helped", "mean"), hurt=("hurt", "mean"))
        return bins.reindex(pd.MultiIndex.from_product([sorted(flips["stock"].unique()), order]))
    bins = flips.groupby("bin").agg(flips=("moved", "size"), moved=("moved", "mean"))
    return bins.reindex(order)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effects", required=True)
    parser.add_argument("--sites", required=True)
    parser.add_argument("--leave-out", nargs="*", default=[])
    parser.add_argument("--by-direction", action="store_true")
    args = parser.parse_args()
    effects, sites = pd.read_parquet(args.effects), pd.read_parquet(args.sites)
    print(table(effects, sites, args.leave_out, args.by_direction).round(4).to_string())


if __name__ == "__main__":
    main()
