#!/usr/bin/env python3
"""Usage: report_part.py REPORT PART NAME

Puts PART (a file that starts with <!-- NAME --> and ends with <!-- end NAME -->) into the
markdown file REPORT: in place of the part between those markers where REPORT has one, else at
its end.
"""
import re
import sys

if len(sys.argv) != 4:
    sys.exit(__doc__)
report, part, name = open(sys.argv[1]).read(), open(sys.argv[2]).read().rstrip("\n"), re.escape(sys.argv[3])
kept = re.compile(f"<!-- {name} -->.*?<!-- end {name} -->", re.S)
report = kept.sub(lambda _: part, report) if kept.search(report) else report.rstrip("\n") + "\n\n" + part + "\n"
open(sys.argv[1], "w").write(report)
