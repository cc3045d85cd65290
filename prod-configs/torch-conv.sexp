;; A PyTorch operator campaign: execution settings of a conv2d (bench-programs/torch-conv) searched
;; by simulated annealing on the GPU energy of each run (NVML's energy counter). The knobs reach
;; the script as KILN_KNOB_* environment variables. `python3` on the clean PATH must import
;; torch with CUDA: runs get HOME set to their slot folder, so a `pip install --user` is not
;; seen; use a system-wide install, or name a virtual environment's python in `run`.
;;
;; Energy counts the whole run, Python's start and CUDA's initialisation included, so `--iters`
;; is set for a few seconds of convolutions: NVML's counter updates every 20-100 ms and the
;; differences between settings must stand out from the start-up's share.
(campaign
  (name torch-conv)
  (store "../results/gpu/torch-conv")
  (objective (metric energy) (statistic median))
  (runs (warmup 1) (min 3) (max 8) (target-rel-ci 0.02) (max-time-s 120))
  (experiments
    ((benchmark torch-conv)
     (search (simulated-annealing (steps 16) (t-max 0.05) (t-min 0.002)))
     (chains 1)
     (seed 5)))
  (benchmarks
    ((name torch-conv)
     (kind knobs)
     (knobs
       (cudnn-benchmark off on)
       (channels-last off on)
       (dtype float32 float16 bfloat16)
       (tf32 off on))
     (sources "../bench-programs/torch-conv")
     (run ("python3" "conv.py" "--iters" "3000"))
     (timeout-s 300)))
  (workers
    (local (slots 1) (gpus (0)))))
