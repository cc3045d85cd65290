;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9960 of stock's instructions (295078149 against 296254014), kiln policy, 2026-11-30.
(decisions
  (benchmark libwebp)
  (values
    ("PutCoeffs @ CodeResiduals:27:42" inline)))
