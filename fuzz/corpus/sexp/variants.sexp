(campaign
  (name variants)
  (store "s")
  (objective (metric instructions) (statistic trimmed-mean))
  (experiments
    ((name hc) (benchmark k) (search (hill-climbing (steps 10) (kick 2))) (race off))
    ((name rs) (benchmark k) (search (random-search (steps 10) (flips 1))))
    ((name rs2) (benchmark k) (search (random-search (steps 10))))
    ((name sa) (benchmark r) (search (simulated-annealing (steps 5) (schedule linear))) (proposals guided) (race 0.5)))
  (benchmarks
    ((name k) (kind knobs) (knobs (tile 8 16 "x y" -3) ("algo" fast slow)) (sources "k")
     (run ("./k" "{tile}")) (check-output (lines "^sum")) (build-memory 1073741824)
     (container (engine docker) (image "debian:12") (cpus 0.5) (memory "64KiB")))
    ((name r) (kind llvm-inline) (sources "r") (build ("cargo" "build" "--release"))
     (dependency-crates ("regex")) (run ("./target/release/r"))
     (check-output (command ("sha256sum" "out.bin"))) (fallback original)))
  (workers
    ((local (slots 2) (cpus (0 1))))
    (slurm (rundir "/shared") (nodes 3) (partition "p") (time "1:00:00"))
    (ssh (host "h") (rundir "/r") (port 2222) (host-key-check accept-new) (worker-binary "kw"))))
