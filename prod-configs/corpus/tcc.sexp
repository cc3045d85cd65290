; Tiny C Compiler 0.9.27 (git 2020-08-14), Debian source package `tcc`
; (0.9.27+git20200814.62c30a4a-1), built by its configure script and Makefile
; (--debug: its Makefile strips the binary otherwise, and callgrind needs its
; symbols): compiles its own sources as one unit (tcc.c with ONE_SOURCE, 445 kB
; of C and the system's headers) to an object file, which the output check reads
; (~220 M instructions: preprocessing, parsing, x86-64 code generation).
; corpus: language C; domain compiler (C); build configure+make; package Debian tcc 0.9.27+git20200814.62c30a4a-1; licence LGPL-2.1-or-later
((name tcc) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/tcc")
 (build ("sh" "-c" "./configure --cc=clang --debug --extra-cflags='-O2 -gdwarf-4' && make -j2 tcc"))
 (run ("./tcc" "-B." "-I." "-I./include" "-DONE_SOURCE=1" "-DCONFIG_TRIPLET=\"x86_64-linux-gnu\""
       "-DTCC_TARGET_X86_64" "-c" "tcc.c" "-o" "self.o"))
 (check-output (file "self.o"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 60))
