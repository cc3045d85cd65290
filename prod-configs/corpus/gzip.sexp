; GNU gzip 1.12, Debian source package `gzip` (1.12-1), built by its configure
; script and Makefile (the AUTO*/MAKEINFO variables keep make from
; regenerating its build files: a worker's copy of the sources has fresh
; timestamps): compresses its own sources (input.txt, made at fetch time) at
; -9 to stdout; -n keeps the input's name and time out of the header (a worker's
; copy of input.txt is new every step, and the output check failed every step).
; corpus: language C; domain compression; build configure+make; package Debian gzip 1.12-1; licence GPL-3.0-or-later
((name gzip) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/gzip")
 (build ("sh" "-c" "./configure CC=clang && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true"))
 (run ("./gzip" "-9" "-n" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
