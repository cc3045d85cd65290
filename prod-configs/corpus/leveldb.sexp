; LevelDB 1.23, Debian source package `leveldb` (1.23-4), a C++ key-value store
; built by its CMake (googletest from Debian's libgmock-dev, as the package
; builds it): its own benchmark, db_bench, fills, overwrites and reads (at
; random, forwards and backwards) a database of 10,000 entries in the run's
; folder (~330 M instructions: key comparisons, skip lists, CRC32C, block
; encoding). Its lines of timings ("micros/op") are left out of the output
; check; printing them moves the count by about 1e-5 from run to run. No
; `compact`: its background thread moved the count by 2.5e-4, so every step
; would be measured three times.
; corpus: language C++; domain database (key-value); build CMake; package Debian leveldb 1.23-4; licence BSD-3-Clause
((name leveldb) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/leveldb")
 (build ("sh" "-c" "(test -f build/CMakeCache.txt || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLEVELDB_BUILD_TESTS=OFF -DLEVELDB_INSTALL=OFF) && cmake --build build -j2 --target db_bench"))
 (run ("./build/db_bench" "--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readreverse" "--num=10000" "--db=bench-db"))
 (check-output (lines-except "micros/op"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 60))
