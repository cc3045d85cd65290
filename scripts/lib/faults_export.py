#!/usr/bin/env python3
"""scripts/faults' questions to a `kiln export` table, read as CSV on stdin.

Usage: faults_export.py QUERY [ARGS]

  trajectory              (--table steps) the trajectory: experiment,chain,step,
                          decision_hash,accepted,outcome, one line per stored row
  dispatched-after W MS   (--table steps) how many steps worker W was dispatched after MS
  not-ok                  (--table steps) how many steps have an outcome other than ok
  first-failed            (--table steps) EXPERIMENT/CHAIN/STEP of the first run-failed step,
                          or an empty line
  wrong-built             (--table dataset, scripts/faults' built campaign) how many steps were
                          not measured from the real program: failed, or faster than its sleep
                          of 0.C s (C the knob's value)
  mode-outcomes           (--table dataset, the walk) "WRONG MODED": the steps of knob m
                          recorded otherwise than their mode says (kill: worker-lost, loud:
                          run-failed, fine: ok), and those of a mode other than fine
"""
import csv
import sys


def trajectory(rows):
    for r in rows:
        print(",".join(r[k] for k in ("experiment", "chain", "step", "decision_hash", "accepted", "outcome")))


def dispatched_after(rows, worker, ms):
    t = int(ms)
    print(sum(1 for r in rows if r["worker"] == worker and int(r["dispatched_ms"] or 0) > t))


def not_ok(rows):
    print(sum(1 for r in rows if r["outcome"] != "ok"))


def first_failed(rows):
    rows = [r for r in rows if r["outcome"] == "run-failed"]
    print("%s/%s/%s" % (rows[0]["experiment"], rows[0]["chain"], rows[0]["step"]) if rows else "")


def wrong_built(rows):
    rows = list(rows)
    print(sum(1 for r in rows if r["outcome"] != "ok" or float(r["objective"]) < 0.95 * int(r["value"]) * 1e7))


def mode_outcomes(rows):
    want = {"kill": "worker-lost", "loud": "run-failed", "fine": "ok"}
    rows = [r for r in rows if r["site"] == "m"]
    print(sum(1 for r in rows if r["outcome"] != want[r["value"]]), sum(1 for r in rows if r["value"] != "fine"))


QUERIES = {
    "trajectory": trajectory,
    "dispatched-after": dispatched_after,
    "not-ok": not_ok,
    "first-failed": first_failed,
    "wrong-built": wrong_built,
    "mode-outcomes": mode_outcomes,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in QUERIES:
        sys.exit(__doc__)
    QUERIES[sys.argv[1]](csv.DictReader(sys.stdin), *sys.argv[2:])
