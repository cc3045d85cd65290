    ((name @PROGRAM@) (kind llvm-inline) (sources "@ROOT@/bench-programs/@PROGRAM@")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "@ARG@")) (timeout-s 120))
