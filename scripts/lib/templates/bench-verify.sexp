(campaign
  (name verify)
  (store "@STORE@")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 1) (min 3) (max 3))
  (experiments ((name v) (benchmark big) (search (random-walk (steps @STEPS@) (flips 1))) (seed 3)))
  (benchmarks
    ((name big) (kind knobs) (sources "src") (knobs (o 1 2 3 4))
     (build ("cc" "-O{o}" "main.c" "-o" "bench")) (run ("./bench" "40000000"))
     (check-output none) (timeout-s 60)))
  (workers (local (slots 1))))
