;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9961 of stock's instructions (180530173 against 181236028), kiln policy, 2026-11-30.
(decisions
  (benchmark xz)
  (values
    ("get_dist_slot @ fill_dist_prices:35:30" no-inline)
    ("mf_ptr @ lzma_mf_bt4_find:2:2" no-inline)
    ("move_pending @ lzma_mf_bt4_find:2:2" no-inline)
    ("rc_encode @ lzma_lzma_encode:90:7" inline)))
