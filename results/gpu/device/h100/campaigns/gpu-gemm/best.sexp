;; kiln decision file
(decisions
  (benchmark gpu-gemm)
  (values
    (tile 16)
    (work 8)))
