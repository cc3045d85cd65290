#!/usr/bin/env python3
"""Usage: faults_malformed_inputs.py HUGE DEEP

Writes scripts/faults' two oversized decision files for the `ladder` benchmark: HUGE, 256 MiB
of decisions, and DEEP, 10 million nested lists.
"""
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
with open(sys.argv[1], "w") as f:  # 256 MiB of decisions
    f.write("(decisions (benchmark ladder) (values\n")
    line = '("c" 10)\n' * 100000
    for _ in range(256 * 2**20 // len(line)):
        f.write(line)
    f.write("))\n")
with open(sys.argv[2], "w") as f:  # 10 million nested lists
    f.write("(decisions (benchmark ladder) (values " + "(" * 10_000_000 + ")" * 10_000_000 + "))\n")
