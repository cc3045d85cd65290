#!/usr/bin/env python3
"""Usage: faults_control_bytes.py FILE

Exits 0 when FILE holds a character a terminal acts on (a C0 control but tab and newline,
DEL, or a C1 control), 1 when it holds none. scripts/faults' check that kiln prints a
benchmark's hostile output escaped.
"""
import sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
t = open(sys.argv[1], encoding="utf-8", errors="replace").read()
sys.exit(0 if any((ord(c) < 32 and c not in "\n\t") or 127 <= ord(c) < 160 for c in t) else 1)
