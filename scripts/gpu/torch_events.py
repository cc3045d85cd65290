# The conv2d of bench-programs/torch-conv timed by CUDA events, for comparison with kiln's CUPTI
# GPU time of the same process. Prints a fixed line on stdout (kiln's output check) and appends
# the event-timed milliseconds to $EVENTS_FILE.
import os, sys, torch


def workload(iters):
    """The conv2d, three warm-up passes then `iters` timed ones; the timed loop's milliseconds."""
    x = torch.randn(32, 128, 56, 56, device="cuda")
    conv = torch.nn.Conv2d(128, 128, 3, padding=1, bias=False).cuda()
    with torch.no_grad():
        for _ in range(3):
            conv(x)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            conv(x)
        b.record()
        torch.cuda.synchronize()
    return a.elapsed_time(b)


if __name__ == "__main__":
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ms = workload(iters)
    with open(os.environ.get("EVENTS_FILE", "/tmp/events.txt"), "a") as f:
        f.write(f"{ms:.3f}\n")
    print(f"conv iters={iters} ok")
