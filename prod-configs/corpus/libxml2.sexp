; libxml2 2.9.14, Debian source package `libxml2` (2.9.14+dfsg-1.3~deb12u6), built by
; its configure script and Makefile without Python, compression or ICU: xmllint
; parses the 3 MB XML file of expat's test data (nes96.xml, copied at fetch time) and
; writes it out indented (--format) (~285 M instructions: parser, tree, dictionary,
; serialiser). DWARF 4: valgrind 3.19 cannot read clang 14's DWARF 5 in some binaries.
; corpus: language C; domain parsing (XML); build configure+make; package Debian libxml2 2.9.14+dfsg-1.3~deb12u6; licence MIT
((name libxml2) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/libxml2")
 (build ("sh" "-c" "CFLAGS='-O2 -gdwarf-4' ./configure CC=clang --without-python --without-lzma --without-zlib --without-icu --disable-shared && make -j2 ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true MAKEINFO=true xmllint"))
 (run ("./xmllint" "--format" "nes96.xml"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 60))
