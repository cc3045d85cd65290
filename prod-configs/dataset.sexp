;; The dataset kept in the repository (scripts/dataset): every corpus program
;; screened from its stock decisions in shared builds of up to 32 flips whose
;; functions do not overlap (results/effects.md), the hottest sites first,
;; callgrind's exact instruction count as the objective; and from a random context.
;; Sites the kept dataset already holds are not screened again: a campaign started
;; afresh (a new store, on a new machine) adds to it.
(campaign
  (name dataset)
  (store "../target/dataset")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    (each-benchmark (seed 1)
      (search (screening (steps 40) (flips-per-step 32)
        (skip-measured "../dataset/effects.parquet"))))
    ;; The same sites around a random context beside stock's (docs/configs.md): stock with
    ;; 32 sites drawn from the seed and flipped, as far as a searched set strays from it.
    (each-benchmark (suffix random) (baseline (random (flips 32)))
      (search (screening (steps 10) (flips-per-step 32)
        (skip-measured "../dataset/effects.parquet"))) (seed 2)))
  (benchmarks (include "corpus"))
  (workers (local (slots 2))))
