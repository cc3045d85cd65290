(campaign
  (name tiny)
  (store "store")
  (experiments
    ((benchmark synth)
     (search (simulated-annealing (steps 10) (t-max 0.002) (t-min 0.00000000000000000000000000000000000000000000000000000000000000000000000000005)))))
  (benchmarks
    ((name synth) (kind knobs) (knobs (tile 8 16)) (sources "b") (run ("./run"))))
  (workers (local)))
