;; Annealing started from the screened effects built together (dataset/contexts/PROGRAM/
;; measured-best.sexp, results/policy.md) on the evaluation half's programs that have such a set,
;; as results/search.md's campaigns anneal from stock: 100 steps, uniform proposals, three chains.
;; `PROGRAM-stock` measures stock's count beside them (its baseline), one step.
(campaign
  (name search-from-measured)
  (store "../target/search-from-measured")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((name pcre2-stock) (benchmark pcre2) (search (random-walk (steps 1) (flips 1))) (seed 1))
    ((name pcre2) (benchmark pcre2) (baseline "../dataset/contexts/pcre2/measured-best.sexp")
     (search (simulated-annealing (steps 100))) (proposals uniform) (chains 3) (seed 1))
    ((name libyaml-stock) (benchmark libyaml) (search (random-walk (steps 1) (flips 1))) (seed 1))
    ((name libyaml) (benchmark libyaml) (baseline "../dataset/contexts/libyaml/measured-best.sexp")
     (search (simulated-annealing (steps 100))) (proposals uniform) (chains 3) (seed 1)))
  (benchmarks (include "corpus/pcre2.sexp") (include "corpus/libyaml.sexp"))
  (workers (local (slots 2))))
