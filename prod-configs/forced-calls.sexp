;; Shared builds on the corpus programs whose builds the dataset could mostly not separate
;; (results/effects.md): two builds of up to 32 flips each, around stock. Run with a kiln
;; whose discovery reads the calls an always_inline attribute forces, and with one before it,
;; to compare how many of their flips each reads.
(campaign
  (name forced-calls)
  (store "../target/forced-calls")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    (each-benchmark (search (screening (steps 2) (flips-per-step 32))) (seed 1)))
  (benchmarks
    (include "corpus/duktape.sexp") (include "corpus/libdeflate.sexp")
    (include "corpus/brotli-c.sexp") (include "corpus/zstd.sexp") (include "corpus/lz4.sexp")
    (include "corpus/jsoncpp.sexp") (include "corpus/yaml-cpp.sexp"))
  (workers (local (slots 2))))
