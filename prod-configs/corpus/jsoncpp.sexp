; JsonCpp 1.9.5, Debian source package `libjsoncpp` (1.9.5-4), built by its
; CMake: its test runner (jsontestrunner_exe) parses twitter.json (631 kB, from
; Debian's `simdjson` source package) and prints every value with its path.
; corpus: language C++; domain parsing (JSON); build CMake; package Debian libjsoncpp 1.9.5-4; licence MIT OR public domain
((name jsoncpp) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/jsoncpp")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DBUILD_SHARED_LIBS=OFF -DBUILD_OBJECT_LIBS=OFF -DJSONCPP_WITH_POST_BUILD_UNITTEST=OFF && cmake --build build -j2 --target jsontestrunner_exe"))
 (run ("./build/bin/jsontestrunner_exe" "twitter.json"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
