; lzip 1.23, Debian source package `lzip` (1.23-5), a C++ LZMA compressor built
; by its own configure script and Makefile: compresses its own sources
; (input.txt, 150 kB, made at fetch time) at -9 to stdout (~340 M instructions).
; corpus: language C++; domain compression; build configure+make; package Debian lzip 1.23-5; licence GPL-2.0-or-later
((name lzip) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/lzip")
 (build ("sh" "-c" "./configure CXX=clang++ && make -j2"))
 (run ("./lzip" "-9" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 300) (discovery-cpu-s 20))
