;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9843 of stock's instructions (313964645 against 318961143), kiln policy, 2026-11-30.
(decisions
  (benchmark expat)
  (values
    ("accountingGetCurrentAmplification @ accountingDiffTolerated:39:9" no-inline)))
