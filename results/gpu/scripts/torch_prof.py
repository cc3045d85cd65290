# The workload of torch_events.py under PyTorch's own profiler (Kineto, CUPTI inside PyTorch),
# without kiln: its kernel count, kernel-time sum and busy union, to compare with kiln's
# gpu-kernel-count, gpu-kernel-sum and gpu-time of the same program.
import sys, torch
from torch.profiler import profile, ProfilerActivity
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    x = torch.randn(32, 128, 56, 56, device="cuda")
    conv = torch.nn.Conv2d(128, 128, 3, padding=1, bias=False).cuda()
    with torch.no_grad():
        for _ in range(3):
            y = conv(x)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            y = conv(x)
        b.record()
        torch.cuda.synchronize()
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
      f"event-timed loop {a.elapsed_time(b):.1f} ms")
