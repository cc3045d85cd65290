(campaign
  (name faults)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (timeouts (connect-s 5) (heartbeat-s 1) (lost-after-s 3))
  (experiments
    ((name walk) (benchmark grid) (search (random-walk (steps @STEPS@) (flips 1)))
     (chains 2) (seed 7) (parallel 2))
    ((name anneal) (benchmark ladder)
     (search (simulated-annealing (steps @STEPS@) (t-max 0.00001) (t-min 0.000001))) (seed 3)))
  (benchmarks
    ((name grid) (kind knobs) (sources "bench")
     (knobs (a 0 1 2 3 4 5 6 7 8 9) (b 0 1 2 3 4 5 6 7 8 9) @KNOB_MODE@)
     (run ("sh" "run.sh" "0.2" "@TOKEN@" @MODE_ARG@)) (check-output none) (timeout-s 2))
    ((name ladder) (kind knobs) (sources "bench")
     (knobs (c 34 10 18 26 42 50))
     (run ("sh" "run.sh" "0.{c}" "@TOKEN@")) (check-output none) (timeout-s 2)))
  @WORKERS@)
