(campaign
  (name faults-cache)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (timeouts (connect-s 5) (heartbeat-s 1) (lost-after-s 3))
  (experiments
    ((name built) (benchmark built) (search (random-walk (steps @STEPS@) (flips 1)))
     (seed 9) (parallel 2)))
  (benchmarks
    ((name built) (kind knobs) (sources "bench") (knobs (c 34 10 18 26 42 50))
     (build ("sh" "build.sh" "{c}" "@TOKEN@")) (run ("./bench")) (check-output none) (timeout-s 5)))
  @WORKERS@)
