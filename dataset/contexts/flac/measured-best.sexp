;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9984 of stock's instructions (573136925 against 574028371), kiln policy, 2026-11-30.
(decisions
  (benchmark flac)
  (values
    ("format_input @ flac__encode_file:470:12" inline)))
