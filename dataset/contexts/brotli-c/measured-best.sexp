;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9934 of stock's instructions (380426392 against 382959763), kiln policy, 2026-11-30.
(decisions
  (benchmark brotli-c)
  (values
    ("ContextBlockSplitterFinishBlock @ ContextBlockSplitterAddSymbol:7:5" inline)
    ("StoreSymbol @ BrotliStoreMetaBlock:115:11" inline)
    ("StoreSymbol @ BrotliStoreMetaBlock:84:5" inline)))
