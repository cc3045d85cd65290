#!/usr/bin/env python3
"""Usage: search_report.py KEPT OUT STEPS PROGRAMS METHODS MODE SPLIT_SEED TUNING EVALUATION

scripts/search-bench's report, written to OUT (and printed): from the kept steps tables
(KEPT/PROGRAM-N.csv, search_kept_columns.py's), the best/stock curves of each method at each
budget in STEPS (space-separated), for PROGRAMS and METHODS (space-separated). MODE is grid
(kiln's own grid, results/search-grid.md), split (the tuning and evaluation halves, TUNING and
EVALUATION, drawn by SPLIT_SEED: results/search.md) or large (a short guided campaign against a
long uniform one: results/search-large.md). The hand-written notes of OUT ("## Run notes" to
its end) stay.
"""
import csv, os, statistics, sys, subprocess, platform
from collections import defaultdict
kept, out = sys.argv[1], sys.argv[2]
budgets_run = [int(n) for n in sys.argv[3].split()]
programs, methods = sys.argv[4].split(), sys.argv[5].split()
mode, split_seed = sys.argv[6], sys.argv[7]
split = mode == "split"
# The campaigns' names: a program's at each budget, or its one --large campaign.
campaigns = ["large"] if mode == "large" else budgets_run
tuning, evaluation = sys.argv[8].split(), sys.argv[9].split()
names = {"guided": "guided annealing", "uniform": "uniform annealing", "profile": "profile annealing", "helping": "helping annealing",
         "random": "random search", "greedy": "greedy hill climbing"}
later_about = {"profile": "Annealing with `(proposals profile)`: uniform's moves (3 points a proposal, the same "
    "temperatures), the points drawn by their site's heat, how often its call ran in a build that inlines nothing "
    "(`uninlined_calls`), weighted by the share of flips that hot that moved a count in kiln's dataset "
    "(docs/configs.md). The table was read from the dataset without the evaluation half's programs "
    "(policy/heat_moves.py), but the heat was changed after profile's libyaml result with the old heat was known "
    "(a call stock inlined took its caller's heat; results/search-runs/split-caller-heat/): here it is not judged "
    "unseen.",
    "helping": "Annealing with `(proposals helping)`: profile's draws with the sign, each point drawn by the share of "
    "flips that hot, of calls the stock build decided alike, that saved some of a count in kiln's dataset "
    "(docs/configs.md), with profile's heat. Its table was read without the evaluation half's programs "
    "(policy/heat_moves.py --by-direction), but the idea and the heat came after profile's libyaml result was "
    "known: here it is not judged unseen."}
# Methods run after the split's first two, each in campaigns of its own: KEPT/METHOD/PROGRAM-N.csv.
later = sorted(d for d in os.listdir(kept) if os.path.isdir(os.path.join(kept, d)) and not d.startswith("seed-")) \
    if mode == "split" else []
# The same methods run again with other seeds (search-bench --seed S): KEPT/seed-S/PROGRAM-N.csv.
other_seeds = sorted((int(d[5:]) for d in os.listdir(kept) if d.startswith("seed-")) if mode == "split" else [])

def curves(path):
    """Per experiment, per chain: best/stock after each step; the start (the stock set) counts, failed steps keep the best."""
    rows = defaultdict(lambda: defaultdict(list))
    with open(path) as f:
        for row in csv.DictReader(f):
            rows[row["experiment"]][int(row["chain"])].append(row)
    out = {}
    for experiment, chains in rows.items():
        out[experiment] = []
        for chain in sorted(chains):
            best, curve = 1.0, []
            for row in sorted(chains[chain], key=lambda r: int(r["step"])):
                if row["objective"]:
                    best = min(best, float(row["objective"]) / float(row["baseline"]))
                curve.append(best)
            out[experiment].append(curve)
    return out
def at(c, b):
    return c[min(b, len(c)) - 1]
def fmt(vals):
    if len(vals) == 1:
        return f"{vals[0]:.4f}"
    return f"{statistics.median(vals):.4f} [{min(vals):.4f}-{max(vals):.4f}]"
def reach(c, target):
    return next((i + 1 for i, v in enumerate(c) if v <= target), None)
def minutes(program):
    """The campaigns' span, first dispatch to last record (a stopped and resumed one's pause included)."""
    spans = []
    for n in campaigns:
        path = f"{kept}/{program}-{n}.csv"
        if os.path.exists(path):
            rows = list(csv.DictReader(open(path)))
            spans.append(max(int(r["recorded_ms"]) for r in rows) - min(int(r["dispatched_ms"]) for r in rows))
    return f"{sum(spans) / 60000:.0f}" if spans else "-"

data, missing = defaultdict(dict), []
for program in programs:
    for n in campaigns:
        path = f"{kept}/{program}-{n}.csv"
        if os.path.exists(path):
            data[program].update(curves(path))
        else:
            missing.append(f"{program} at {n} steps" if n != "large" else program)
        for method in later:
            if os.path.exists(f"{kept}/{method}/{program}-{n}.csv"):
                data[program].update(curves(f"{kept}/{method}/{program}-{n}.csv"))
machine = (f"Machine: {platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} CPUs "
           "shared with other work; each " + ("program" if mode == "large" else "program and budget")
           + " is one campaign (one discovery, one stock baseline) with an experiment "
           "per method, its chains run two steps at a time on a local worker.")
methods_text = ("Methods at default settings: annealing `(simulated-annealing (steps N))` (t-max 0.04, t-min 0.001) with "
                "`(proposals uniform)`, moving 3 points per proposal (one on knobs), or `(proposals guided)`, moving one")
lines = []

def grid():
    budget = max(budgets_run)
    checkpoints = [b for b in (50, 100, 200, 300) if b <= budget]
    lines.extend(["# Search quality at equal step budgets: kiln's own grid", "",
        "Callgrind instructions; best/stock after N steps (1.0 = the stock decisions, where every chain starts; "
        "lower is better), median over the chains (seeds) [min-max]. " + machine, "",
        "Produced by `scripts/bench --search`. " + methods_text + "; `(random-search ...)` uniform over the space on the "
        "knob benchmark, 3 points of the stock set moved per sample on inlining programs; `(hill-climbing ...)` "
        "with restarts kicking 3 points. These programs are where guided annealing was tuned; "
        "[search.md](search.md) judges it on programs it was not tuned on.", ""])
    lines.append("| program | method | chains | " + " | ".join(f"{b} steps" for b in checkpoints)
                 + " | steps to reach uniform's final median (per chain) | campaign minutes |")
    lines.append("|---|---|---:|" + "---|" * len(checkpoints) + "---|---:|")
    for program, got in data.items():
        final = lambda m: statistics.median(at(c, budget) for c in got[f"{m}-{budget}"])
        uniform_final = final("uniform") if f"uniform-{budget}" in got else None
        for m in methods:
            cs = got.get(f"{m}-{budget}")
            if cs is None:
                continue
            reach_s = "-" if uniform_final is None else "/".join(str(reach(c, uniform_final) or "never") for c in cs)
            lines.append(f"| {program} | {names[m]} | {len(cs)} | " + " | ".join(fmt([at(c, b) for c in cs]) for b in checkpoints)
                         + f" | {reach_s} | {minutes(program)} |")

def half_table(title, members):
    lines.extend([f"## {title}", ""])
    header = "| program |"
    rule = "|---|"
    for b in budgets_run:
        header += f" uniform, {b} steps | guided, {b} steps | guided/uniform |"
        rule += "---|---|---:|"
    lines.extend([header + " campaign minutes |", rule + "---:|"])
    ratios = defaultdict(dict)
    for program in members:
        got = data.get(program)
        if got is None:
            continue
        row = f"| {program} |"
        for b in budgets_run:
            u, g = got.get(f"uniform-{b}"), got.get(f"guided-{b}")
            if u is None or g is None:
                row += " - | - | - |"
                continue
            um = statistics.median(at(c, b) for c in u)
            gm = statistics.median(at(c, b) for c in g)
            ratios[b][program] = gm / um
            row += f" {fmt([at(c, b) for c in u])} | {fmt([at(c, b) for c in g])} | {gm / um:.4f} |"
        lines.append(row + f" {minutes(program)} |")
    lines.append("")
    return ratios

def seeds_table():
    """How far a median of 3 chains moves with the seed alone: each method's chains of seed 1 beside
    those of another seed, in campaigns of the same program and budget (each its own discovery and
    baseline, which callgrind makes equal)."""
    lines.extend(["## Other seeds: how far a median of 3 chains moves by chance", "",
        "The same method, program and budget run again with chains of another experiment seed "
        "(`scripts/search-bench --split --seed S`). Issue 53's rule compares medians of 3 chains and "
        "allows 0.5 %; where a method against itself moves further than that, the rule there measures "
        "the seed as much as the method.", "",
        "| program | method | steps | seed 1 | seed | other seed | other / seed 1 | all chains |",
        "|---|---|---:|---|---:|---|---:|---|"])
    apart = []
    for seed in other_seeds:
        for name in sorted(os.listdir(f"{kept}/seed-{seed}")):
            program, n = name.removesuffix(".csv").rsplit("-", 1)
            for experiment, chains in sorted(curves(f"{kept}/seed-{seed}/{name}").items()):
                first = data.get(program, {}).get(experiment)
                if first is None:
                    continue
                b = int(n)
                m1, ms = (statistics.median(at(c, b) for c in cs) for cs in (first, chains))
                method = experiment.rsplit("-", 1)[0]
                if ms / m1 > 1.005 or m1 / ms > 1.005:
                    apart.append(f"{program} {method} at {b} ({ms / m1:.4f})")
                lines.append(f"| {program} | {method} | {b} | {fmt([at(c, b) for c in first])} | {seed} "
                             f"| {fmt([at(c, b) for c in chains])} | {ms / m1:.4f} "
                             f"| {fmt([at(c, b) for c in first + chains])} |")
    lines.extend(["", "- More than 0.5 % apart by the seed alone: " + (", ".join(apart) if apart else "none") + ".", ""])

def median_at(got, experiment, b):
    cs = got.get(experiment)
    return None if cs is None else statistics.median(at(c, b) for c in cs)

def later_table(method, members):
    """Issue 53's rule for a search helped by the data: on the median program of the evaluation half,
    METHOD's 100 steps reach uniform's 300, and it is never more than 0.5 % above uniform at equal steps."""
    short, long = min(budgets_run), max(budgets_run)
    lines.extend([f"## {names[method].capitalize()} on the evaluation half (issue 53's rule)", "",
        later_about.get(method, ""), "",
        f"| program | uniform, {short} steps | uniform, {long} steps | {method}, {short} steps | {method}/uniform at {short} "
        f"| {method}, {long} steps | {method}/uniform at {long} | {method} {short} / uniform {long} |",
        "|---|---:|---:|---|---:|---|---:|---:|"])
    reached, worse = {}, []
    for program in members:
        got = data.get(program, {})
        us, ul = median_at(got, f"uniform-{short}", short), median_at(got, f"uniform-{long}", long)
        ms, ml = median_at(got, f"{method}-{short}", short), median_at(got, f"{method}-{long}", long)
        if ms is None or us is None or ul is None:
            continue
        reached[program] = ms / ul
        worse += [f"{program} at {b} steps ({m / u:.4f})" for b, m, u in ((short, ms, us), (long, ml, ul))
                  if m is not None and m / u > 1.005]
        long_cells = "- | -" if ml is None else f"{fmt([at(c, long) for c in got[f'{method}-{long}']])} | {ml / ul:.4f}"
        lines.append(f"| {program} | {us:.4f} | {ul:.4f} | {fmt([at(c, short) for c in got[f'{method}-{short}']])} "
                     f"| {ms / us:.4f} | {long_cells} | {ms / ul:.5f} |")
    if not reached:
        lines.extend(["", "Not run yet.", ""])
        return
    med = statistics.median(reached.values())
    lines.extend(["", f"- {len(reached)} of {len(members)} programs: {short} steps reach uniform's {long} on the median "
        f"program: {'yes' if med <= 1 else 'no'} (median {method} {short} / uniform {long}: {med:.5f}; reached on "
        f"{sum(v <= 1 for v in reached.values())}); never more than 0.5 % above uniform at equal steps: "
        f"{'yes' if not worse else 'no: ' + ', '.join(worse)}.", ""])

def large():
    short, long = budgets_run
    sites = {}
    for row in open("results/corpus.md"):
        cells = [c.strip() for c in row.split("|")]
        if len(cells) > 5 and cells[5].isdigit():
            sites[cells[1]] = int(cells[5])
    lines.extend(["# Large programs: a short guided campaign against a long uniform one", "",
        f"Issue 33, requirement 3: on programs of more than 1,000 sites, a campaign of {short} steps must reach at "
        f"least half of the improvement that {long} uniform steps reach. Callgrind instructions; best/stock at the end "
        "(1.0 = the stock decisions, where every chain starts; lower is better), median over the chains (seeds) "
        "[min-max]; share = (1 - guided) / (1 - uniform), the part of uniform's improvement guided reached (above 1: "
        "more than all of it). " + machine, "",
        f"Produced by `scripts/bench --search --large`: one campaign a program, experiments guided-{short} and "
        f"uniform-{long}. " + methods_text + ". Sites: results/corpus.md.", "",
        f"| program | sites | uniform, {long} steps | uniform after {short} of its {long} | guided, {short} steps "
        "| share | at least half | campaign minutes |",
        "|---|---:|---|---|---|---:|---|---:|"])
    for program, got in data.items():
        u, g = got.get(f"uniform-{long}"), got.get(f"guided-{short}")
        if u is None or g is None:
            continue
        um = statistics.median(at(c, long) for c in u)
        gm = statistics.median(at(c, short) for c in g)
        share = (1 - gm) / (1 - um) if um < 1 else None
        held = "yes (uniform found nothing)" if share is None else ("yes" if share >= 0.5 else "no")
        lines.append(f"| {program} | {sites.get(program, '-')} | {fmt([at(c, long) for c in u])} "
                     f"| {fmt([at(c, short) for c in u])} | {fmt([at(c, short) for c in g])} "
                     f"| {'-' if share is None else f'{share:.2f}'} | {held} | {minutes(program)} |")

if mode == "grid":
    grid()
elif mode == "large":
    large()
else:
    lines.extend(["# Search that generalises: judged on programs it was not tuned on", "",
        "Callgrind instructions; best/stock at the end of a campaign of N steps (1.0 = the stock decisions, where "
        "every chain starts; lower is better), median over 3 chains (seeds) [min-max]; guided/uniform is the ratio of "
        "the medians (below 1: guided annealing ended lower). " + machine, "",
        "Produced by `scripts/bench --search --split`. " + methods_text + ". "
        f"The programs: the corpus programs whose 2-step check built in at most 12 s a step, drawn into two halves by "
        f"SPLIT_SEED {split_seed} (scripts/search-bench), before any of them ran a search campaign. "
        f"Tuning half: {', '.join(tuning)}. Evaluation half: {', '.join(evaluation)}. "
        "Methods and their parameters are tuned on the tuning half only; kiln's own grid, where guided annealing was "
        "tuned before the split, is [search-grid.md](search-grid.md).", ""])
    ratios = half_table("Evaluation half", evaluation)
    checks = ["## Issue 33's rule on the evaluation half", ""]
    for b in budgets_run:
        r = ratios.get(b, {})
        if not r:
            checks.append(f"- {b} steps: not run.")
            continue
        worse = [f"{p} ({v:.4f})" for p, v in r.items() if v > 1.005]
        med = statistics.median(r.values())
        done = f"{len(r)} of {len(evaluation)} programs"
        checks.append(f"- {b} steps ({done}): guided never worse than uniform by more than 0.5 %: "
                      f"{'yes' if not worse else 'no: ' + ', '.join(worse)}; better on the median program: "
                      f"{'yes' if med < 1 else 'no'} (median guided/uniform {med:.4f}).")
    lines.extend(checks + [""])
    for method in later:
        later_table(method, evaluation)
    if other_seeds:
        seeds_table()
    half_table("Tuning half", tuning)
if missing:
    lines += ["", "Not run yet: " + ", ".join(missing) + "."]
# The hand-written notes of the file written before ("## Run notes" to its end) stay.
notes = open(out).read().partition("\n## Run notes")[1:] if os.path.exists(out) else ()
open(out, "w").write("\n".join(lines) + "\n" + ("\n" + "".join(notes).lstrip("\n") if any(notes) else ""))
print("\n".join(lines))
