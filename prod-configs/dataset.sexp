;; The dataset kept in the repository (scripts/dataset): every corpus program
;; screened from its stock decisions in shared builds of up to 32 flips whose
;; functions do not overlap (results/effects.md), the hottest sites first, each
;; screening ending where its next build would hold fewer than 16 (the slots go to
;; the next program's full builds: results/effects.md, "min-flips"),
;; callgrind's exact instruction count as the objective; and from a random context and,
;; where the flips that helped built together beat stock, from that set.
;; Sites the kept dataset already holds are not screened again: a campaign started
;; afresh (a new store, on a new machine) adds to it.
(campaign
  (name dataset)
  (store "../target/dataset")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    (each-benchmark (seed 1)
      (search (screening (steps 100) (flips-per-step 32) (min-flips 16)
        (skip-measured "../dataset/effects.parquet"))))
    ;; The same sites around a random context beside stock's (docs/configs.md): stock with
    ;; 32 sites drawn from the seed and flipped, as far as a searched set strays from it.
    (each-benchmark (suffix random) (baseline (random (flips 32)))
      (search (screening (steps 30) (flips-per-step 32) (min-flips 16)
        (skip-measured "../dataset/effects.parquet"))) (seed 2))
    ;; And around the best set the screened effects made (dataset/contexts/PROGRAM/measured-best.sexp:
    ;; every flip that saved more than 0.1 % around stock, built together; results/policy.md), for
    ;; each program where it beat stock: how the flips that helped alone act beside each other.
    ((name bc-measured) (benchmark bc) (baseline "../dataset/contexts/bc/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name brotli-c-measured) (benchmark brotli-c) (baseline "../dataset/contexts/brotli-c/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name bzip2-measured) (benchmark bzip2) (baseline "../dataset/contexts/bzip2/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name claxon-measured) (benchmark claxon) (baseline "../dataset/contexts/claxon/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name duktape-measured) (benchmark duktape) (baseline "../dataset/contexts/duktape/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name expat-measured) (benchmark expat) (baseline "../dataset/contexts/expat/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name flac-measured) (benchmark flac) (baseline "../dataset/contexts/flac/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name flate2-measured) (benchmark flate2) (baseline "../dataset/contexts/flate2/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name gawk-measured) (benchmark gawk) (baseline "../dataset/contexts/gawk/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name gzip-measured) (benchmark gzip) (baseline "../dataset/contexts/gzip/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name libjpeg-turbo-measured) (benchmark libjpeg-turbo) (baseline "../dataset/contexts/libjpeg-turbo/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name libwebp-measured) (benchmark libwebp) (baseline "../dataset/contexts/libwebp/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name libyaml-measured) (benchmark libyaml) (baseline "../dataset/contexts/libyaml/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name lzip-measured) (benchmark lzip) (baseline "../dataset/contexts/lzip/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name pcre2-measured) (benchmark pcre2) (baseline "../dataset/contexts/pcre2/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name xz-measured) (benchmark xz) (baseline "../dataset/contexts/xz/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name zlib-measured) (benchmark zlib) (baseline "../dataset/contexts/zlib/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3))
    ((name zopfli-measured) (benchmark zopfli) (baseline "../dataset/contexts/zopfli/measured-best.sexp")
     (search (screening (steps 30) (flips-per-step 32) (min-flips 16) (skip-measured "../dataset/effects.parquet")))
     (seed 3)))
  (benchmarks (include "corpus"))
  (workers (local (slots 2))))
