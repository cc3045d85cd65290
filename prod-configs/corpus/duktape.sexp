; Duktape 2.7.0, Debian source package `duktape` (2.7.0-2): the `duk` command
; line interpreter built by the distribution's Makefile.cmdline, running the
; Mandelbrot script the package ships (mandel.js, ~45 M instructions).
; corpus: language C; domain interpreter (JavaScript); build make; package Debian duktape 2.7.0-2; licence MIT
((name duktape) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/duktape")
 (build ("make" "-f" "Makefile.cmdline" "CC=clang"))
 (run ("./duk" "mandel.js"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
