"""Reads `kiln export --table steps` (CSV) on stdin and prints, for each step decided after the
first `skip`, one line: LABEL ROUND STEP_MS RUN_MS (its dispatch to its result, and its
objective, a wall time in ns, as ms)."""

import csv
import sys


def main() -> int:
    label, round_, skip = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for row in csv.DictReader(sys.stdin):
        if int(row["step"]) < skip or row["outcome"] != "ok":
            continue
        step_ms = int(row["recorded_ms"]) - int(row["dispatched_ms"])
        print(label, round_, step_ms, float(row["objective"]) / 1e6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
