;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9991 of stock's instructions (44955748 against 44994151), kiln policy, 2026-11-30.
(decisions
  (benchmark duktape)
  (values
    ("duk__mark_hobject @ duk__mark_heaphdr:45:3" no-inline)))
