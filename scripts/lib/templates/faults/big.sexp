(campaign
  (name faults-big)
  (store "store")
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((name big) (benchmark big) (search (random-walk (steps 3))) (seed 1)))
  (benchmarks
    ((name big) (kind knobs) (sources "bench") (knobs (k 0 1 2))
     (run ("sh" "run.sh" "0.1" "@TOKEN@")) (check-output none) (timeout-s 10)))
  @WORKERS@)
