;; A GPU knob campaign: the tiling of a CUDA GEMM (bench-programs/gpu-gemm), compiled with nvcc in
;; every step, searched by simulated annealing on GPU busy time measured with CUPTI. It needs a
;; worker with an NVIDIA GPU, the CUDA toolkit in /usr/local/cuda, and libkiln_cupti.so beside
;; kiln-worker (`cargo build --release` builds both); where GPU time is unsupported the
;; baseline has no objective and the campaign stops.
(campaign
  (name gpu-gemm)
  (store "/tmp/kstores/gpu-gemm")
  (objective (metric gpu-time) (statistic median))
  (runs (warmup 1) (min 3) (max 5) (target-rel-ci 0.02) (max-time-s 20))
  (experiments
    ((benchmark gpu-gemm)
     (search (simulated-annealing (steps 6) (t-max 0.05) (t-min 0.002)))
     (chains 1)
     (seed 11)))
  (benchmarks
    ((name gpu-gemm)
     (kind knobs)
     ;; tile: the block's square tile of C; work: outputs per thread (register blocking).
     (knobs
       (tile 16 8 32)
       (work 1 2 4 8))
     (sources "../bench-programs/gpu-gemm")
     (build ("nvcc" "-O3" "-arch=native" "-DTILE={tile}" "-DWORK={work}" "gemm.cu" "-o" "gemm"))
     (run ("./gemm" "2048" "20"))
     ;; nvcc is not on the clean PATH builds and runs get.
     (env ("PATH" "/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"))
     (timeout-s 60)
     (build-timeout-s 120)))
  (workers
    (local (slots 1) (gpus (0)))))
