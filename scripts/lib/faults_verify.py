#!/usr/bin/env python3
"""scripts/faults' check of a campaign's steps: lost, doubled, identical to the reference.

Usage: faults_verify.py TRAJECTORY REF EXPECTED VERIFY

TRAJECTORY is the store's steps as `faults_export.py trajectory` prints them
(experiment,chain,step,decision_hash,accepted,outcome, one line per stored row); REF the
reference run's, or - where there is none (n.a.); EXPECTED the steps each experiment/chain must
have ("walk:0:10 walk:1:10 anneal:0:10"); VERIFY what `kiln store verify` said (ok or failed),
passed through. Prints "LOST DOUBLED IDENTICAL VERIFY".
"""
import collections
import sys


def main(trajectory, ref, expected, verify):
    rows = [l.rstrip("\n").split(",") for l in open(trajectory) if l.strip()]
    keys = collections.Counter((r[0], r[1], int(r[2])) for r in rows)
    doubled = sum(n - 1 for n in keys.values())
    lost = 0
    for e in expected.split():
        exp, chain, steps = e.split(":")
        lost += sum(1 for s in range(int(steps)) if (exp, chain, s) not in keys)
    if ref == "-":
        same = "n.a."
    else:
        want = [l.rstrip("\n") for l in open(ref) if l.strip()]
        got = [",".join(r) for r in rows]
        same = "yes" if got == want else "no"
    print(lost, doubled, same, verify)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
