;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9676 of stock's instructions (6200678221 against 6408434630), kiln policy, 2026-11-30.
(decisions
  (benchmark bc)
  (values
    ("_bc_simp_mul @ _bc_rec_mul:11:5" no-inline)
    ("bc_new_num @ _bc_simp_mul:8:11" no-inline)
    ("new_sub_num @ _bc_rec_mul:21:10" no-inline)
    ("new_sub_num @ _bc_rec_mul:23:10" no-inline)))
