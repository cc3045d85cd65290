;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9824 of stock's instructions (351321033 against 357604585), kiln policy, 2026-11-30.
(decisions
  (benchmark bzip2)
  (values
    ("copy_input_until_stop @ handle_compress:22:25" no-inline)
    ("fallbackQSort3 @ fallbackSort:85:13" no-inline)
    ("fallbackSimpleSort @ fallbackQSort3:22:10" no-inline)
    ("fallbackSort @ BZ2_blockSort:48:10" inline)
    ("mainQSort3 @ mainSort:146:19" no-inline)
    ("mainSimpleSort @ mainQSort3:30:10" no-inline)))
