; libjpeg-turbo 2.1.5, Debian source package `libjpeg-turbo` (1:2.1.5-2), cjpeg
; built by its CMake without SIMD (its assembly needs nasm; the C code paths
; run instead): encodes its test photo scaled 8 times by netpbm at fetch time
; (input.ppm, 1816x1192) as an optimized JPEG to stdout.
; corpus: language C; domain image codec (JPEG); build CMake; package Debian libjpeg-turbo 1:2.1.5-2; licence IJG AND BSD-3-Clause AND Zlib
((name libjpeg-turbo) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/libjpeg-turbo")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DWITH_SIMD=0 -DENABLE_SHARED=0 && cmake --build build -j2 --target cjpeg-static"))
 (run ("./build/cjpeg-static" "-quality" "90" "-optimize" "input.ppm"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
