"""The measured policy: flips every site whose one-flip effect around stock,
as an effects table holds it, saved more than MARGIN of the program's count.

Not a policy for a program it never saw (it reads the program's own
measurements), but the ceiling of every policy that predicts a flip's sign
and adds the flips up: what the screened effects give when built together,
and how far from the sum of their one-flip effects that lands. A `kiln
policy` command:

    kiln policy CONFIG -- python policy/measured.py [--effects FILE] [--margin M]
    python policy/measured.py --benchmark NAME [--effects FILE] [--margin M] >FILE

The benchmark's sites on stdin (JSON lines, the `sites` table's columns), its
name in KILN_BENCHMARK; the decision file on stdout. A site measured in
several experiments (alone and in a shared build) counts with its mean
effect; a site the benchmark no longer has, or whose stock value changed, is
left out and said on stderr.
"""

import argparse
import json
import os
import sys

import pandas as pd

from decisions import decision_file

HERE = os.path.dirname(os.path.abspath(__file__))


def helpful(effects: pd.DataFrame, benchmark: str, margin: float) -> pd.DataFrame:
    """The benchmark's flips away from stock, around stock, that saved more than
    `margin`: one row per site, its mean effect, the flip and its stock value."""
    rows = effects[(effects["benchmark"] == benchmark) & (effects["context"] == "stock")
                   & (effects["value"] != effects["stock"])]
    per_site = rows.groupby(["site", "stock", "value"], as_index=False)["effect"].mean()
    return per_site[per_site["effect"] < -margin].sort_values("effect")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effects", default=os.path.join(HERE, "..", "dataset", "effects.parquet"))
    parser.add_argument("--margin", type=float, default=0.001,
                        help="the least saving a flip must have measured (0.001: 0.1 %%)")
    parser.add_argument("--benchmark", help="decide this benchmark without its sites on stdin "
                        "(a context file for a campaign, which checks each site itself)")
    args = parser.parse_args()
    benchmark = args.benchmark or os.environ.get("KILN_BENCHMARK")
    if benchmark is None:
        sys.exit("measured.py: no benchmark: give --benchmark NAME, or run it under kiln policy")
    try:
        chosen = helpful(pd.read_parquet(args.effects), benchmark, args.margin)
    except (OSError, KeyError) as e:
        sys.exit(f"measured.py: {args.effects} is no effects table: {e}")
    kept = chosen
    if args.benchmark is None:
        rows = [json.loads(line) for line in sys.stdin if line.strip()]
        sites = {row["site"]: row["stock"] for row in rows}
        known = [sites.get(s) == v for s, v in zip(chosen["site"], chosen["stock"])]
        # A Series, not a list: an empty list would select no columns rather than no rows.
        kept = chosen[pd.Series(known, index=chosen.index, dtype=bool)]
    for site in sorted(set(chosen["site"]) - set(kept["site"])):
        print(f"measured.py: {benchmark}: {site} left out (not a site of stock value as measured)",
              file=sys.stderr)
    print(f"measured.py: {benchmark}: flipping {len(kept)} site(s), their one-flip effects "
          f"summing to {kept['effect'].sum():+.4%}", file=sys.stderr)
    values = sorted(zip(kept["site"], kept["value"]))
    sys.stdout.write(decision_file("policy/measured.py", benchmark, values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
