(campaign
  (name faults-busy)
  (store "store")
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((name busy) (benchmark busy) (search (random-walk (steps 200) (flips 1)))
    (seed 4) (parallel 4)))
  (benchmarks
    ((name busy) (kind knobs) (sources "bench") (knobs (k 0 1 2 3))
     (build ("sh" "-c" "cp perl-copy bench && echo {k} > k")) (run ("./bench" "-e" "1"))
     (check-output none) (timeout-s 10)))
  (workers (local (slots 4))))
