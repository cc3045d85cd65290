; bzip2 1.0.8, the upstream tarball of Debian's source package `bzip2`
; (1.0.8-5), built by its own Makefile (bzip2 linked statically with the
; library, as upstream builds it): compresses the three sample files the
; package ships at -9 to stdout (~360 M instructions).
; corpus: language C; domain compression; build make; package Debian bzip2 1.0.8 (upstream tarball); licence bzip2-1.0.6
((name bzip2) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/bzip2")
 (build ("make" "-j2" "CC=clang" "bzip2"))
 (run ("./bzip2" "-9" "-c" "sample1.ref" "sample2.ref" "sample3.ref"))
 (timeout-s 120) (build-timeout-s 300) (discovery-cpu-s 20))
