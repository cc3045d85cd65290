;; Many effects a step, with screening that stops where its builds run thin:
;; six corpus programs screened twice from the stock decisions, each hottest site
;; flipped alone (40 steps: the cost of a one-flip step, and the sites to check
;; the shared builds against) and in shared builds of up to 32 flips that end
;; when the next build would hold fewer than 16 (`(min-flips 16)`).
;; `scripts/effects-report target/corpus-min-flips` gives results/effects.md's
;; tables; prod-configs/corpus-shared.sexp is the same without min-flips.
(campaign
  (name corpus-min-flips)
  (store "../target/corpus-min-flips")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((name zlib-alone) (benchmark zlib) (search (screening (steps 40))) (seed 1))
    ((name zlib-shared) (benchmark zlib)
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16))) (seed 1))
    ((name bzip2-alone) (benchmark bzip2) (search (screening (steps 40))) (seed 2))
    ((name bzip2-shared) (benchmark bzip2)
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16))) (seed 2))
    ((name libyaml-alone) (benchmark libyaml) (search (screening (steps 40))) (seed 3))
    ((name libyaml-shared) (benchmark libyaml)
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16))) (seed 3))
    ((name lzip-alone) (benchmark lzip) (search (screening (steps 40))) (seed 5))
    ((name lzip-shared) (benchmark lzip)
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16))) (seed 5))
    ((name cmark-alone) (benchmark cmark) (search (screening (steps 40))) (seed 6))
    ((name cmark-shared) (benchmark cmark)
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16))) (seed 6))
    ((name xz-alone) (benchmark xz) (search (screening (steps 40))) (seed 7))
    ((name xz-shared) (benchmark xz)
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16))) (seed 7)))
  (benchmarks (include "corpus"))
  (workers (local (slots 2))))
