;; Many effects a step, validated: five corpus programs screened twice from the
;; stock decisions, each hottest site flipped alone (100 steps) and in shared
;; builds of up to 32 flips whose functions do not overlap (each flip's effect
;; read from callgrind's instructions per function). results/effects.md
;; compares the two, site by site, and the effects each gave per core-hour.
(campaign
  (name corpus-shared)
  (store "../target/corpus-shared")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((name zlib-alone) (benchmark zlib) (search (screening (steps 100))) (seed 1))
    ((name zlib-shared) (benchmark zlib) (search (screening (steps 30) (flips-per-step 32))) (seed 1))
    ((name bzip2-alone) (benchmark bzip2) (search (screening (steps 100))) (seed 2))
    ((name bzip2-shared) (benchmark bzip2) (search (screening (steps 30) (flips-per-step 32))) (seed 2))
    ((name libyaml-alone) (benchmark libyaml) (search (screening (steps 100))) (seed 3))
    ((name libyaml-shared) (benchmark libyaml) (search (screening (steps 30) (flips-per-step 32))) (seed 3))
    ((name expat-alone) (benchmark expat) (search (screening (steps 100))) (seed 4))
    ((name expat-shared) (benchmark expat) (search (screening (steps 30) (flips-per-step 32))) (seed 4))
    ((name lzip-alone) (benchmark lzip) (search (screening (steps 100))) (seed 5))
    ((name lzip-shared2) (benchmark lzip) (search (screening (steps 30) (flips-per-step 32))) (seed 5)))
  (benchmarks (include "corpus"))
  (workers (local (slots 2))))
