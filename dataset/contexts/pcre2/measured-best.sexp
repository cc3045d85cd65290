;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9539 of stock's instructions (234501254 against 245829656), kiln policy, 2026-11-30.
(decisions
  (benchmark pcre2)
  (values
    ("match @ pcre2_match_8:978:8" inline)
    ("match_ref @ match:4365:15" inline)))
