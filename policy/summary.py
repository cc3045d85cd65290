"""Writes summary.json and summary.md: the policy and the search's best on the
left-out benchmark, each measured by `kiln benchmark` against the stock decisions."""

import json
import sys
from pathlib import Path


def main() -> int:
    left_out, out = sys.argv[1], Path(sys.argv[2])
    rows = {}
    for name in ("policy", "search-best"):
        measured = json.loads((out / f"{name}.json").read_text())
        rows[name] = {
            "time_ratio": measured["time_ratio"],
            "objective": measured["objective"],
            "candidate": measured["candidate_objective"],
            "stock": measured["baseline_objective"],
            "verdict": measured["verdict"],
        }
    (out / "summary.json").write_text(json.dumps({"benchmark": left_out, **rows}, indent=2) + "\n")
    lines = [
        f"Left-out benchmark `{left_out}`, objective `{rows['policy']['objective']}`; "
        "time ratio = candidate / stock (below 1 is better).",
        "",
        "| decisions | time ratio | candidate | stock | verdict |",
        "|---|---|---|---|---|",
        "| stock compiler | 1 | | | |",
    ]
    for name, label in (("policy", "trained policy"), ("search-best", "search's best step")):
        r = rows[name]
        lines.append(
            f"| {label} | {r['time_ratio']:.4f} | {r['candidate']:.6g} | {r['stock']:.6g} | {r['verdict']} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
