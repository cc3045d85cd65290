# Energy/power plausibility: kiln's NVML figures against nvidia-smi samples taken alongside.
import csv, json, re, sys, datetime as dt
d = sys.argv[1]  # extracted res folder
log = open(sys.argv[2]).read()
def load(f):
    rows = []
    for r in list(csv.reader(open(f)))[1:]:
        try:
            t = dt.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc).timestamp()
            rows.append((t, float(r[1]), float(r[2])))
        except Exception:
            pass
    return rows
def integ(rows, col):
    return sum((b[0]-a[0])*(a[col]+b[col])/2 for a, b in zip(rows, rows[1:]))
counters = [int(x) for x in re.findall(r"nvml-counter-mJ (\d+)", log)]
stages = ["cal", "torch", "gpu-gemm", "torch-conv"]
for i, name in enumerate(stages):
    rows = load(f"{d}/smi-{name}.csv")
    span = rows[-1][0]-rows[0][0]
    c = (counters[2*i+1]-counters[2*i])/1e3 if len(counters) > 2*i+1 else float('nan')
    print(f"{name:10s} nvidia-smi: {len(rows)} samples over {span:.2f} s, integral of power.draw.instant {integ(rows,2):.1f} J, "
          f"of power.draw {integ(rows,1):.1f} J, max instant {max(r[2] for r in rows):.1f} W, max power.draw {max(r[1] for r in rows):.1f} W; "
          f"NVML counter (pynvml) over the stage {c:.1f} J")
m = json.load(open(f"{d}/torch-measure.json"))
runs = m["runs"]
g = lambda r, k: r["metrics"][k]["measured"]
print("torch measure: runs (warm-up first):")
for r in runs:
    print(f"  wall {g(r,'wall-time')/1e9:.3f} s energy {g(r,'energy')/1e3:.1f} J power-avg {g(r,'power-avg')/1e3:.1f} W power-peak {g(r,'power-peak')/1e3:.1f} W gpu-time {g(r,'gpu-time')/1e6:.1f} ms kernel-sum {g(r,'gpu-kernel-sum')/1e6:.1f} ms kernels {g(r,'gpu-kernel-count'):.0f}")
print(f"  sum of kiln energies {sum(g(r,'energy') for r in runs)/1e3:.1f} J over {sum(g(r,'wall-time') for r in runs)/1e9:.2f} s of runs")
ev = [float(x) for x in open(f"{d}/events.txt").read().split()]
print("  CUDA-event ms of the timed loop per run:", ev)
