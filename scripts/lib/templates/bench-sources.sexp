(campaign
  (name sources)
  (store "@STORE@")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((name s) (benchmark big) (search (random-walk (steps @STEPS@) (flips 1))) (seed 1)))
  (benchmarks
    ((name big) (kind knobs) (sources "src") (knobs (k 1 2 3))
     (run ("sh" "-c" "ls d0 | wc -l")) (check-output none) (timeout-s 600)))
  (workers (local (slots 1))))
