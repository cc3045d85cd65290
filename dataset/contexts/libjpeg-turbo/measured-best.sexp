;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9972 of stock's instructions (252681680 against 253383293), kiln policy, 2026-11-30.
(decisions
  (benchmark libjpeg-turbo)
  (values
    ("dump_buffer @ encode_one_block:85:3" no-inline)))
