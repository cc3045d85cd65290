; Lua 5.4 from Debian's source package (its upstream tarball; see
; scripts/fetch-real-programs): a 33-file interpreter built with its own
; Makefile. Inlining every call makes some of its units blow past any memory
; or time: discovery compiles those again with the stock decisions.
(campaign
  (name lua)
  (store "../../target/real-programs/lua")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark lua)
     (search (simulated-annealing (steps 30) (t-max 0.002) (t-min 0.00005) (flips 2)))
     (seed 1) (parallel 2)))
  (benchmarks
    ((name lua) (kind llvm-inline) (compiler clang) (sources "../../target/real-programs/src/lua")
     (build ("make" "-C" "src" "-j2" "linux-noreadline" "CC=clang" "MYCFLAGS=-g"))
     (run ("./src/lua" "-e" "local t = {} for i = 1, 20000 do t[i] = i * i end local s = 0 for _, v in ipairs(t) do s = s + v % 7 end print(s)"))
     (timeout-s 60) (build-timeout-s 1200)))
  (workers (local (slots 2))))
