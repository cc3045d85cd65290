; XZ Utils 5.4.1, Debian source package `xz-utils` (5.4.1-1+deb12u1), xz built
; by its CMake: compresses its own LZMA encoder and decoder sources
; (input.txt: src/liblzma/lzma, 156 kB, put together at fetch time) at -6 to
; stdout (~220 M instructions).
; corpus: language C; domain compression; build CMake; package Debian xz-utils 5.4.1-1+deb12u1; licence public domain (liblzma, xz)
((name xz) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/xz")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang && cmake --build build -j2 --target xz"))
 (run ("./build/xz" "-6" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
