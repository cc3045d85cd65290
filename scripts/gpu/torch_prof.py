# The workload of torch_events.py under PyTorch's own profiler (Kineto, CUPTI inside PyTorch),
# without kiln: its kernel count, kernel-time sum and busy union, to compare with kiln's
# gpu-kernel-count, gpu-kernel-sum and gpu-time of the same program.
import sys, torch
from torch.profiler import profile, ProfilerActivity
from torch_events import workload
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    loop_ms = workload(iters)
ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
def iv(pred):
    return sorted((e.time_range.start, e.time_range.end) for e in ev if pred(e.name))
kern = iv(lambda n: not (n.startswith("Memcpy") or n.startswith("Memset")))
mem = iv(lambda n: n.startswith("Memcpy") or n.startswith("Memset"))
union, cur = 0.0, None
for s, t in kern:
    if cur is None or s > cur[1]:
        if cur: union += cur[1] - cur[0]
        cur = [s, t]
    else:
        cur[1] = max(cur[1], t)
if cur: union += cur[1] - cur[0]
print(f"torch.profiler: kernels {len(kern)}, kernel sum {sum(t-s for s,t in kern)/1e3:.1f} ms, "
      f"busy union {union/1e3:.1f} ms, memcpy+memset {sum(t-s for s,t in mem)/1e3:.2f} ms ({len(mem)}), "
      f"event-timed loop {loop_ms:.1f} ms")
