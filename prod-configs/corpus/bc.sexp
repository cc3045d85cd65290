; GNU bc 1.07.1, Debian source package `bc` (1.07.1-3), built by its configure
; script and Makefile: runs the factorial test the package ships (Test/fact.b:
; every factorial up to 599 in arbitrary precision).
; corpus: language C; domain numerics (arbitrary precision), interpreter; build configure+make; package Debian bc 1.07.1-3; licence GPL-2.0-or-later
((name bc) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/bc")
 (build ("sh" "-c" "./configure CC=clang && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true"))
 (run ("./bc/bc" "-q" "Test/fact.b"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
