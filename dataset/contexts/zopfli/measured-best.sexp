;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9471 of stock's instructions (232623480 against 245605721), kiln policy, 2026-11-30.
(decisions
  (benchmark zopfli)
  (values
    ("BoundaryPM @ BoundaryPM:28:7" inline)
    ("BoundaryPM @ ZopfliLengthLimitedCodeLengths:80:5" inline)
    ("zopfli_min @ GetBestLengths:69:12" no-inline)))
