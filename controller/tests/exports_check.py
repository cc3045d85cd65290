"""Reads every table `kiln export --all` wrote as Parquet, JSON lines and CSV
and checks them against `kiln export --schema --json`: the documented type of
every column, nulls where values are missing, the same cells in each format,
`--drop-constant`, and the `dataset` table's rows against the steps and sites.

Usage: exports_check.py SCHEMA.json FOLDER   (FOLDER/{csv,jsonl,parquet,dropped-csv,
dropped-parquet}/TABLE.EXT). Prints a JSON summary; fails with an assertion.
"""

import csv
import json
import math
import os
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ARROW = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "text": pa.string()}

schema = json.loads(Path(sys.argv[1]).read_text())
root = Path(sys.argv[2])
summary = {"version": schema["version"], "tables": {}}


def column_types(table):
    """Each documented column's type; a name in capitals stands for the
    columns named after metrics."""
    fixed, pattern = {}, {}
    for c in table["columns"]:
        if c["name"].startswith("METRIC"):
            pattern[c["name"].removeprefix("METRIC")] = c["type"]
        else:
            fixed[c["name"]] = c["type"]

    def type_of(name):
        if name in fixed:
            return fixed[name]
        for suffix, ty in pattern.items():
            if suffix == "" or name.endswith(suffix):
                return ty
        raise AssertionError(f"{table['table']}: column {name} is not documented")

    return type_of


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


tables = {}
for table in schema["tables"]:
    name = table["table"]
    if " " in name:  # `decisions --wide`: not among --all's tables
        continue
    type_of = column_types(table)

    # Parquet: the documented Arrow type for every column.
    t = pq.read_table(root / "parquet" / f"{name}.parquet")
    for field in t.schema:
        want = ARROW[type_of(field.name)]
        assert field.type == want, f"{name}.{field.name}: {field.type}, documented {want}"
    rows = t.to_pylist()
    tables[name] = rows

    # pandas reads numbers as numbers.
    df = pd.read_parquet(root / "parquet" / f"{name}.parquet")
    for c in df.columns:
        if type_of(c) in ("int", "float"):
            assert pd.api.types.is_numeric_dtype(df[c]), f"{name}.{c}: {df[c].dtype}"

    # JSON lines: the same cells, keys in column order.
    lines = (root / "jsonl" / f"{name}.jsonl").read_text().splitlines()
    assert len(lines) == len(rows), f"{name}: {len(lines)} JSON lines, {len(rows)} Parquet rows"
    for line, row in zip(lines, rows):
        obj = json.loads(line)
        assert list(obj) == t.column_names, f"{name}: keys {list(obj)}"
        for k, v in obj.items():
            ty = type_of(k)
            if v is None:
                assert row[k] is None, f"{name}.{k}: JSON null, Parquet {row[k]!r}"
                continue
            ok = {
                "int": isinstance(v, int) and not isinstance(v, bool),
                "float": isinstance(v, (int, float)) and not isinstance(v, bool),
                "bool": isinstance(v, bool),
                "text": isinstance(v, str),
            }[ty]
            assert ok, f"{name}.{k}: {v!r} is no {ty}"
            assert same(float(v) if ty == "float" else v, row[k]), f"{name}.{k}: {v!r} vs {row[k]!r}"

    # CSV: the same header; null is an empty field; numbers parse.
    with open(root / "csv" / f"{name}.csv", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        cells = list(reader)
    assert header == t.column_names, f"{name}: CSV header {header}"
    assert len(cells) == len(rows)
    for line, row in zip(cells, rows):
        for k, v in zip(header, line):
            assert v != "unsupported", f"{name}.{k} reads 'unsupported'"
            ty = type_of(k)
            if ty == "text":
                assert v == (row[k] or ""), f"{name}.{k}: {v!r} vs {row[k]!r}"
            elif v == "":
                assert row[k] is None, f"{name}.{k}: empty CSV field, Parquet {row[k]!r}"
            elif ty == "bool":
                assert v in ("true", "false") and (v == "true") == row[k], f"{name}.{k}: {v!r}"
            else:
                assert same(float(v), float(row[k])), f"{name}.{k}: {v!r} vs {row[k]!r}"

    # --drop-constant: exactly the columns with more than one distinct cell.
    varying = [c for c in t.column_names if len({repr(r[c]) for r in rows}) > 1]
    dropped = pq.read_table(root / "dropped-parquet" / f"{name}.parquet")
    assert dropped.column_names == varying, f"{name}: kept {dropped.column_names}, varying {varying}"
    # A table of one row has no varying column, and a file of no columns holds no rows.
    assert dropped.num_rows == len(rows) or not varying
    with open(root / "dropped-csv" / f"{name}.csv", newline="") as f:
        assert next(csv.reader(f)) == varying, f"{name}: CSV kept other columns"
    summary["tables"][name] = {
        "rows": len(rows),
        "columns": len(t.column_names),
        "varying": len(varying),
    }

# The dataset: one row per (step, site), its decisions, differs and ratio.
steps, sites, dataset = tables["steps"], tables["sites"], tables["dataset"]
decisions = tables["decisions"]
assert len(dataset) == len(steps) * len(sites), (len(dataset), len(steps), len(sites))
stock = {(s["experiment"], s["site"]): s["stock"] for s in sites}
by_step = {(s["experiment"], s["chain"], s["step"]): s for s in steps}
value = {(d["experiment"], d["chain"], d["step"], d["site"]): d["value"] for d in decisions}
differing = 0
for d in dataset:
    key = (d["experiment"], d["chain"], d["step"])
    step = by_step[key]
    assert d["value"] == value[key + (d["site"],)]
    assert d["stock"] == stock[(d["experiment"], d["site"])]
    assert d["differs"] == (d["value"] != d["stock"]), d
    differing += d["differs"]
    assert d["outcome"] == step["outcome"]
    assert same(d["objective"], step["objective"])
    if step["objective"] is None:
        assert d["time_ratio"] is None
    else:
        assert d["time_ratio"] == step["objective"] / step["baseline"], d
        assert d["time_ratio"] == step["time_ratio"]
assert differing > 0, "no step differs from the stock decisions anywhere"
summary["differing"] = differing

# Runs carry their kind; support says which metrics a worker measures, and a
# metric it cannot measure is null in every step.
kinds = {r["kind"] for r in tables["runs"]}
assert kinds <= {"warm-up", "timed", "callgrind", "re-measure"}, kinds
summary["run_kinds"] = sorted(kinds)
for s in tables["support"]:
    if not s["supported"]:
        for step in steps:
            if step["worker"] == s["worker"] and f"{s['metric']}.median" in step:
                assert step[f"{s['metric']}.median"] is None, (s, step)
summary["supported"] = sorted(s["metric"] for s in tables["support"] if s["supported"])
summary["unsupported"] = sorted(s["metric"] for s in tables["support"] if not s["supported"])
print(json.dumps(summary))
# Done: leave without the interpreter's teardown, which pyarrow's thread pools may abort
# ("terminate called without an active exception", exit 134: apache/arrow#34314).
sys.stdout.flush()
os._exit(0)
