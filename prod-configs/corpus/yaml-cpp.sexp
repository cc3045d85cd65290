; yaml-cpp 0.7.0, Debian source package `yaml-cpp` (0.7.0+dfsg-8), built by its
; CMake: its `parse` tool reads twitter.json (631 kB of JSON, which is YAML;
; from Debian's `simdjson` source package) and emits it as YAML.
; corpus: language C++; domain parsing (YAML); build CMake; package Debian yaml-cpp 0.7.0+dfsg-8; licence MIT
((name yaml-cpp) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/yaml-cpp")
 (build ("sh" "-c" "(test -f build/CMakeCache.txt || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=ON) && cmake --build build -j2 --target yaml-cpp-parse"))
 (run ("./build/util/parse" "twitter.json"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
