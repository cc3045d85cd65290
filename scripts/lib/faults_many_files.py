#!/usr/bin/env python3
"""Usage: faults_many_files.py DIR

Writes 50,000 small files (about 15 MB) into DIR, 100 a folder in 500 folders d000..d499:
the sources of scripts/faults' bundle_50k fault.
"""
import os
import sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
for i in range(50000):
    d = os.path.join(sys.argv[1], "d%03d" % (i % 500))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d.txt" % i), "w") as f:
        f.write(("x%d " % i) * 60)
