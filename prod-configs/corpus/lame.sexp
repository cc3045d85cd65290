; LAME 3.100, Debian source package `lame` (3.100-6), an MP3 encoder built by its
; configure script and Makefile: encodes three seconds of two sine sweeps (input.wav,
; 44.1 kHz 16-bit stereo, made by sox at fetch time) at quality 5 to stdout
; (~390 M instructions: psychoacoustics, MDCT, Huffman bit counting).
; DWARF 4: valgrind 3.19 cannot read clang 14's DWARF 5 in some binaries.
; corpus: language C; domain audio codec; build configure+make; package Debian lame 3.100-6; licence LGPL-2.0-or-later
((name lame) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/lame")
 (build ("sh" "-c" "CFLAGS='-O2 -gdwarf-4' ./configure CC=clang --disable-shared --disable-gtktest && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true"))
 (run ("./frontend/lame" "--quiet" "-q" "5" "input.wav" "-"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 60))
