;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9989 of stock's instructions (543011297 against 543584035), kiln policy, 2026-11-30.
(decisions
  (benchmark gzip)
  (values
    ("rsync_roll @ deflate:103:13" no-inline)))
