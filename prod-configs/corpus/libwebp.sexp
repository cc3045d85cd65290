; libwebp 1.2.4, Debian source package `libwebp` (1.2.4-0.2+deb12u1), cwebp
; built by its CMake: encodes libjpeg-turbo's test photo scaled 8 times
; (input.ppm, 1816x1192, made at fetch time) as lossy WebP with method 1
; into out.webp, whose digest is checked (~300 M instructions).
; corpus: language C; domain image codec (WebP); build CMake; package Debian libwebp 1.2.4-0.2+deb12u1; licence BSD-3-Clause
((name libwebp) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/libwebp")
 (build ("sh" "-c" "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DWEBP_BUILD_ANIM_UTILS=OFF -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF -DWEBP_BUILD_VWEBP=OFF -DWEBP_BUILD_WEBPINFO=OFF -DWEBP_BUILD_WEBPMUX=OFF -DWEBP_BUILD_EXTRAS=OFF && cmake --build build -j2 --target cwebp"))
 (run ("./build/cwebp" "-quiet" "-m" "1" "input.ppm" "-o" "out.webp"))
 (check-output (command ("sha256sum" "out.webp")))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
