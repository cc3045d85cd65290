; Expat 2.5.0 (xmlwf), the upstream tarball of Debian's source package `expat`
; (2.5.0-1+deb12u2; Debian's patches assume its autotools build), built by its
; CMake: xmlwf parses the 3 MB XML file the package ships for testing
; (testdata/largefiles/nes96.xml, copied into data/ at fetch time) and writes
; its canonical form, whose digest is checked (~320 M instructions).
; corpus: language C; domain parsing (XML); build CMake; package Debian expat 2.5.0 (upstream tarball); licence MIT
((name expat) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/expat/expat")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DEXPAT_BUILD_TESTS=OFF -DEXPAT_BUILD_EXAMPLES=OFF -DEXPAT_BUILD_DOCS=OFF -DEXPAT_SHARED_LIBS=OFF && cmake --build build -j2"))
 (run ("./build/xmlwf/xmlwf" "-d" "." "data/nes96.xml"))
 (check-output (command ("sha256sum" "nes96.xml")))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
