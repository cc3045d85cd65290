; GNU grep 3.8, the upstream tarball of Debian's source package `grep` (3.8-5;
; Debian's patches need a newer C than clang 14's), built by its configure script
; and Makefile with gnulib's own regex (--with-included-regex: the matcher is the
; program's code, not the C library's): prints every match of a case-insensitive
; alternation in its change logs, news and manual (input.txt, 807 kB, put
; together at fetch time) three times over (~110 M instructions, in its DFA and
; regex matchers). DWARF 4: valgrind 3.19 cannot read clang 14's DWARF 5 here.
; corpus: language C; domain text processing (regex); build configure+make; package Debian grep 3.8 (upstream tarball); licence GPL-3.0-or-later
((name grep) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/grep")
 (build ("sh" "-c" "CFLAGS='-O2 -gdwarf-4' ./configure CC=clang --disable-nls --with-included-regex && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true -C lib && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true -C src grep"))
 (run ("./src/grep" "-o" "-i" "-E" "(match|pattern|regexp?)[a-z]*( [a-z]+){2}|[0-9]+[.][0-9]+" "input.txt" "input.txt" "input.txt"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 60))
