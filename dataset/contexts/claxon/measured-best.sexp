;; kiln decision file, written by policy/measured.py
;; The flips policy/measured.py chose from dataset/effects.parquet of commit 1fb5c3c (6,389 rows), built together: 0.9796 of stock's instructions (88940882 against 90788842), kiln policy, 2026-11-30.
(decisions
  (benchmark claxon)
  (values
    ("_RNvXsB_NtNtCsgEmfK2I1SDS_4core4iter5rangemNtB5_4Step17forward_unchecked @ _ZN89_$LT$core..ops..range..Range$LT$T$GT$$u20$as$u20$core..iter..range..RangeIteratorImpl$GT$9spec_next17h3c1bc8e9e78424d1E:4:35" no-inline)
    ("_ZN102_$LT$core..iter..adapters..map..Map$LT$I$C$F$GT$$u20$as$u20$core..iter..traits..iterator..Iterator$GT$4fold17h2ceaa5b616bb805bE @ _ZN54_$LT$i64$u20$as$u20$core..iter..traits..accum..Sum$GT$3sum17hcf4741e32d851ed0E:1:22" no-inline)
    ("_ZN102_$LT$core..iter..adapters..zip..Zip$LT$A$C$B$GT$$u20$as$u20$core..iter..traits..iterator..Iterator$GT$4fold17h785236baca3f2045E @ _ZN102_$LT$core..iter..adapters..map..Map$LT$I$C$F$GT$$u20$as$u20$core..iter..traits..iterator..Iterator$GT$4fold17h2ceaa5b616bb805bE:4:19" no-inline)
    ("_ZN111_$LT$core..iter..adapters..zip..Zip$LT$A$C$B$GT$$u20$as$u20$core..iter..adapters..zip..ZipImpl$LT$A$C$B$GT$$GT$3new17h55ecf6ac91e2a5c4E @ _ZN4core4iter8adapters3zip16Zip$LT$A$C$B$GT$3new17hc5f39a7803d37d62E:1:9 @ _ZN4core4iter6traits8iterator8Iterator3zip17hc07b9940217720e3E:5:9" no-inline)
    ("_ZN111_$LT$core..iter..adapters..zip..Zip$LT$A$C$B$GT$$u20$as$u20$core..iter..adapters..zip..ZipImpl$LT$A$C$B$GT$$GT$4fold17h7fa29e5c2d31aeafE @ _ZN102_$LT$core..iter..adapters..zip..Zip$LT$A$C$B$GT$$u20$as$u20$core..iter..traits..iterator..Iterator$GT$4fold17h785236baca3f2045E:4:9" no-inline)
    ("_ZN111_$LT$core..iter..adapters..zip..Zip$LT$A$C$B$GT$$u20$as$u20$core..iter..adapters..zip..ZipImpl$LT$A$C$B$GT$$GT$9size_hint17h6104cdb546b62e18E @ _ZN111_$LT$core..iter..adapters..zip..Zip$LT$A$C$B$GT$$u20$as$u20$core..iter..adapters..zip..ZipImpl$LT$A$C$B$GT$$GT$4fold17h7fa29e5c2d31aeafE:5:19" no-inline)
    ("_ZN4core5slice4iter87_$LT$impl$u20$core..iter..traits..collect..IntoIterator$u20$for$u20$$RF$$u5b$T$u5d$$GT$9into_iter17h44ada05cbe5f2910E @ _ZN4core4iter6traits8iterator8Iterator3zip17hc07b9940217720e3E:5:30" no-inline)))
