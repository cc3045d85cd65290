; FLAC 1.4.2, Debian source package `flac` (1.4.2+ds-2), the flac encoder built
; by its CMake (without Ogg): encodes ten seconds of 44.1 kHz stereo made by
; sox at fetch time (input.wav: two sine sweeps) at -8 to stdout. Without its
; AVX and FMA routines (WITH_AVX=OFF, chosen at run time where the CPU has them):
; valgrind 3.19 stops at their VEX-encoded vmovq (SIGILL), so no count could be had.
; corpus: language C; domain audio codec; build CMake; package Debian flac 1.4.2+ds-2; licence GPL-2.0-or-later OR LGPL-2.1-or-later
((name flac) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/flac")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DWITH_OGG=OFF -DWITH_AVX=OFF -DBUILD_CXXLIBS=OFF -DBUILD_DOCS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_TESTING=OFF -DINSTALL_MANPAGES=OFF && cmake --build build -j2 --target flacapp"))
 (run ("./build/src/flac/flac" "--silent" "-8" "-c" "input.wav"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
