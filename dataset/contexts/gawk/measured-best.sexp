;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9900 of stock's instructions (426875375 against 431176432), kiln policy, 2026-11-30.
(decisions
  (benchmark gawk)
  (values
    ("get_a_record @ inrec:12:9" inline)
    ("r_get_field @ r_interpret:397:10" inline)))
