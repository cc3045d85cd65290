;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9736 of stock's instructions (361178894 against 370963317), kiln policy, 2026-11-30.
(decisions
  (benchmark zlib)
  (values
    ("flush_pending @ deflate_slow:95:17" no-inline)
    ("longest_match @ deflate_slow:41:31" inline)
    ("slide_hash @ fill_window:36:13" no-inline)))
