;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9736 of stock's instructions (328689355 against 337615867), kiln policy, 2026-11-30.
(decisions
  (benchmark lzip)
  (values
    ("_Z13price_matchedPK9Bit_modeljj @ price_matched:2:14" no-inline)
    ("_ZN10LZ_encoder15get_match_pairsEPNS_4PairE @ read_match_distances:2:27" inline)
    ("_ZN10LZ_encoder15move_and_updateEi @ sequence_optimizer:33:5" no-inline)
    ("_ZN13Range_encoder9shift_lowEv @ encode_bit:15:47" no-inline)
    ("_ZNK16Matchfinder_base15available_bytesEv @ get_match_pairs:3:19" no-inline)
    ("_ZNK16Matchfinder_base15available_bytesEv @ get_match_pairs:5:17" no-inline)
    ("_ZNK16Matchfinder_base18ptr_to_current_posEv @ get_match_pairs:12:32" no-inline)
    ("_ZNK5CRC32ixEh @ get_match_pairs:14:18" no-inline)
    ("_ZNK5CRC32ixEh @ get_match_pairs:19:32" no-inline)))
