;; kiln decision file
(decisions
  (benchmark torch-conv)
  (values
    (channels-last off)
    (cudnn-benchmark off)
    (dtype bfloat16)
    (tf32 on)))
