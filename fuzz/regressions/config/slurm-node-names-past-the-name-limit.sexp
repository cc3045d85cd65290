(campaign (name t) (store "s")
  (experiments ((benchmark k) (search (random-walk (steps 1)))))
  (benchmarks ((name k) (kind knobs) (knobs (a 1)) (sources "k") (run ("./k"))))
  (workers (slurm (name nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn) (rundir "/r") (nodes 10))))
