; PCRE2 10.42, Debian source package `pcre2` (10.42-1), pcre2grep built by its
; CMake (no JIT, its default): counts the lines of its own documentation
; (input.txt, doc/*.txt put together at fetch time) that match a
; case-insensitive alternation.
; corpus: language C; domain text processing (regex); build CMake; package Debian pcre2 10.42-1; licence BSD-3-Clause WITH PCRE2-exception
((name pcre2) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/pcre2")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang && cmake --build build -j2 --target pcre2grep"))
 (run ("./build/pcre2grep" "-c" "-i" "(match|pattern|subject)[a-z]*( [a-z]+){2}|[0-9]+[.][0-9]+" "input.txt" "input.txt" "input.txt"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
