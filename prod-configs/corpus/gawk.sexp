; GNU awk 5.2.1, Debian source package `gawk` (1:5.2.1-2), built by its
; configure script and Makefile: runs the word-frequency program the package
; ships (awklib/eg/prog/wordfreq.awk) over its change logs and news
; (input.txt, put together at fetch time).
; corpus: language C; domain interpreter (awk), text processing; build configure+make
((name gawk) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/gawk")
 (build ("sh" "-c" "./configure CC=clang --disable-nls && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true"))
 (run ("./gawk" "-f" "awklib/eg/prog/wordfreq.awk" "input.txt"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
