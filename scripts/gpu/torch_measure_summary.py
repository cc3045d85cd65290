"""Usage: torch_measure_summary.py FILE

The outcome, the summary's medians and each run's metrics of a `kiln-worker measure --json`
output (gpu-check.sh's torch-trace step: FILE is its torch-measure.json), a line each.
"""
import json
import sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
m = json.load(open(sys.argv[1]))
print("outcome", m.get("outcome"))
for k, v in m.get("summary", {}).items(): print("summary", k, v.get("median"))
for r in m.get("runs", []): print("run", {k: v for k, v in r.get("metrics", {}).items()})
