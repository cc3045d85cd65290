    ((name bzip2) (kind llvm-inline) (compiler clang) (sources "@REAL@/bzip2")
     (build ("make" "CC=clang" "bzip2")) (run ("./bzip2" "-9" "-c" "sample1.ref"))
     (env ("LD_LIBRARY_PATH" ".")) (timeout-s 60) (build-timeout-s 300))
