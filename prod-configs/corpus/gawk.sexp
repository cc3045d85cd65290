; GNU awk 5.2.1, Debian source package `gawk` (1:5.2.1-2), built by its
; configure script and Makefile: runs the word-frequency program the package
; ships (awklib/eg/prog/wordfreq.awk) over its change logs and news
; (input.txt, put together at fetch time). Only the program and its support
; library are made: the package leaves out the manual's sources (gawktexi.in),
; which `make all` asks for. DWARF 4: valgrind 3.19 cannot read clang 14's
; default DWARF 5 in this binary ("possibly corrupted debuginfo") and gives up.
; corpus: language C; domain interpreter (awk), text processing; build configure+make; package Debian gawk 1:5.2.1-2; licence GPL-3.0-or-later
((name gawk) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/gawk")
 (build ("sh" "-c" "CFLAGS='-O2 -gdwarf-4' ./configure CC=clang --disable-nls && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true -C support && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true gawk"))
 (run ("./gawk" "-f" "awklib/eg/prog/wordfreq.awk" "input.txt"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
