;; Per-site effects over the corpus: each program's hottest sites (by the stock
;; build's profile) flipped one at a time away from stock, measured in
;; callgrind instructions (exact, one run a step). The data policy
;; trains leave-one-program-out policies on (results/policy.md).
(campaign
  (name corpus-effects)
  (store "../target/corpus-effects")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark brotli-c) (search (screening (steps 16))) (seed 1))
    ((benchmark bzip2) (search (screening (steps 16))) (seed 2))
    ((benchmark claxon) (search (screening (steps 16))) (seed 3))
    ((benchmark cmark) (search (screening (steps 16))) (seed 4))
    ((benchmark duktape) (search (screening (steps 16))) (seed 5))
    ((benchmark expat) (search (screening (steps 16))) (seed 6))
    ((benchmark flate2) (search (screening (steps 16))) (seed 7))
    ((benchmark gzip) (search (screening (steps 16))) (seed 8))
    ((benchmark jsoncpp) (search (screening (steps 16))) (seed 9))
    ((benchmark libdeflate) (search (screening (steps 16))) (seed 10))
    ((benchmark libyaml) (search (screening (steps 16))) (seed 11))
    ((benchmark lz4) (search (screening (steps 16))) (seed 12))
    ((benchmark lzip) (search (screening (steps 16))) (seed 13))
    ((benchmark pulldown-cmark) (search (screening (steps 16))) (seed 14))
    ((benchmark xz) (search (screening (steps 16))) (seed 15))
    ((benchmark yaml-cpp) (search (screening (steps 16))) (seed 16))
    ((benchmark yaml-rust) (search (screening (steps 16))) (seed 17))
    ((benchmark zlib) (search (screening (steps 16))) (seed 18))
    ((benchmark zopfli) (search (screening (steps 16))) (seed 19))
    ((benchmark zstd) (search (screening (steps 16))) (seed 20))
  )
  (benchmarks (include "corpus"))
  (workers (local (slots 2))))
