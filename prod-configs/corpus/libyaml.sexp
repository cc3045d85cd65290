; LibYAML 0.2.5, Debian source package `libyaml` (0.2.5-1), built by its CMake:
; its test-suite parser (run-parser-test-suite) prints the events of
; twitter.json (631 kB of JSON, which is YAML; from Debian's `simdjson`
; source package, copied at fetch time).
; corpus: language C; domain parsing (YAML); build CMake; package Debian libyaml 0.2.5-1; licence MIT
((name libyaml) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/libyaml")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DBUILD_TESTING=ON && cmake --build build -j2 --target run-parser-test-suite"))
 (run ("./build/run-parser-test-suite" "twitter.json"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
