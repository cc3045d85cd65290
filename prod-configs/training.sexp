;; The week-long training data generation, after the original system:
;; simulated annealing over the inlining decisions of every bundled
;; benchmark, three independent chains each, on wall time measured by
;; air-gapped workers reached over SSH (replace hosts, users and paths with
;; your own; host keys are checked against known_hosts).
(campaign
  (name training)
  (store "../results/training")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 1) (min 5) (max 30) (target-rel-ci 0.005) (max-time-s 120))
  (timeouts (connect-s 30) (heartbeat-s 5) (lost-after-s 60))
  ;; Every slot measures sample-dsp at connect and every 50 jobs; a slot that
  ;; drifts more than 5 % from its first figure is flagged in status and log.
  (calibration (benchmark sample-dsp) (every 50) (max-drift 0.05))
  (experiments
    ((benchmark sample-dsp)
     (search (simulated-annealing (steps 300) (t-max 0.04) (t-min 0.001) (flips 3)))
     (chains 3) (seed 100) (remeasure-every 25))
    ((benchmark tiny-interp)
     (search (simulated-annealing (steps 300) (t-max 0.04) (t-min 0.001) (flips 3)))
     (chains 3) (seed 200) (remeasure-every 25))
    ((benchmark graph-walk)
     (search (simulated-annealing (steps 300) (t-max 0.04) (t-min 0.001) (flips 3)))
     (chains 3) (seed 300) (remeasure-every 25))
    ((benchmark rust-sort)
     (search (simulated-annealing (steps 300) (t-max 0.04) (t-min 0.001) (flips 3)))
     (chains 3) (seed 400) (remeasure-every 25))
    ((name graph-walk-random)
     (benchmark graph-walk)
     (search (random-walk (steps 200) (flips 3)))
     (chains 3) (seed 500)))
  (benchmarks
    ((name sample-dsp) (kind llvm-inline) (sources "../bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "8000"))
     (timeout-s 30) (build-timeout-s 120))
    ((name tiny-interp) (kind llvm-inline) (sources "../bench-programs/tiny-interp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "100"))
     (timeout-s 30) (build-timeout-s 120))
    ((name graph-walk) (kind llvm-inline) (sources "../bench-programs/graph-walk")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "50"))
     (timeout-s 30) (build-timeout-s 120))
    ((name rust-sort) (kind llvm-inline) (sources "../bench-programs/rust-sort")
     (build ("rustc" "-O" "main.rs" "-o" "bench")) (run ("./bench" "60"))
     (timeout-s 30) (build-timeout-s 300)))
  (workers
    (ssh (name worker0) (host "192.168.0.10") (user "bench") (rundir "/home/bench/kiln")
         (slots 2) (cpus (2 3)))
    (ssh (name worker1) (host "192.168.0.11") (user "bench") (rundir "/home/bench/kiln")
         (slots 2) (cpus (2 3)))
    (ssh (name worker2) (host "192.168.0.12") (user "bench") (rundir "/home/bench/kiln")
         (slots 2) (cpus (2 3)))))
