;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9843 of stock's instructions (115391671 against 117230907), kiln policy, 2026-11-30.
(decisions
  (benchmark flate2)
  (values
    ("_ZN4core3cmp3Ord3min17h237a197085c644a8E @ _ZN4core3cmp3min17hfa190a440feb4462E:1:8" no-inline)
    ("_ZN79_$LT$miniz_oxide..deflate..core..TDEFLFlush$u20$as$u20$core..cmp..PartialEq$GT$2eq17haf8a11e8740581dcE @ _ZN4core3cmp9PartialEq2ne17hcb603e07ea25e939E:1:15" no-inline)))
