; cmark 0.30.2, the CommonMark reference implementation, Debian source package
; `cmark` (0.30.2-6), built by its Makefile (which runs CMake): renders the
; CommonMark spec the package ships (test/spec.txt, 205 kB) eight times over
; to HTML (~190 M instructions).
; corpus: language C; domain parsing (Markdown); build CMake (through make); package Debian cmark 0.30.2-6; licence BSD-2-Clause
((name cmark) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/cmark")
 (build ("make" "CC=clang" "BUILD_TYPE=Release"))
 (run ("./build/src/cmark" "test/spec.txt" "test/spec.txt" "test/spec.txt" "test/spec.txt"
       "test/spec.txt" "test/spec.txt" "test/spec.txt" "test/spec.txt"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
