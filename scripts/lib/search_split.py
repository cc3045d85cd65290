#!/usr/bin/env python3
"""Usage: search_split.py SEED PROGRAM...

scripts/search-bench's halves of the split: the programs sorted, shuffled by SEED, cut in two;
prints the tuning half and the evaluation half, each comma-separated and sorted.
"""
import random, sys
pool = sorted(sys.argv[2:])
random.Random(int(sys.argv[1])).shuffle(pool)
half = len(pool) // 2
print(",".join(sorted(pool[:half])), ",".join(sorted(pool[half:])))
