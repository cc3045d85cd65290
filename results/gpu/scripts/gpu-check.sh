#!/bin/bash
# kiln GPU checks, run on the device machine from the repo root: bash .gpu/gpu-check.sh
set -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$(pwd); G=$ROOT/.gpu; R=/tmp/res; mkdir -p $R /tmp/kstores
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
stamp() { echo "=== $(date +%s.%N) $*"; }
pack() { tar czf $OUT/res.tgz -C /tmp res kstores 2>/dev/null; }
SMIQ=timestamp,power.draw,power.draw.instant,clocks.sm,temperature.gpu,utilization.gpu
nvidia-smi --query-gpu=$SMIQ --format=csv >/dev/null 2>&1 || SMIQ=timestamp,power.draw,clocks.sm,temperature.gpu,utilization.gpu
smi_on() { nvidia-smi --query-gpu=$SMIQ --format=csv,nounits -lms 100 > $R/smi-$1.csv 2>&1 & SMI=$!; }
smi_off() { kill $SMI 2>/dev/null; wait $SMI 2>/dev/null; }
nvml_energy() { python3 -c 'import pynvml as n; n.nvmlInit(); h=n.nvmlDeviceGetHandleByIndex(0); print("nvml-counter-mJ", n.nvmlDeviceGetTotalEnergyConsumption(h))' 2>&1; }

stamp setup
echo "pwd=$ROOT"; date -u; uname -a; nvidia-smi; nvidia-smi -q -d POWER,CLOCK,PERFORMANCE | head -80
echo "smi query: $SMIQ"
PY=$(command -v python3); NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "python3=$PY nvcc=$NVCC"; $NVCC --version | tail -2
echo "clean-PATH python3 imports torch?"; env -i PATH=/usr/local/bin:/usr/bin:/bin python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>&1 | tail -1
$PY -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
ls -d /usr/local/cuda*/extras/CUPTI/lib64/libcupti* 2>&1 | head; ldconfig -p | grep -i 'cupti\|nvidia-ml\|libcuda.so' | head
timeout 20 find / -xdev -name 'libcupti.so*' 2>/dev/null | head
# The test binary's compiled-in paths: /work/main/target/release/kiln-worker, /work/main/worker.
# (built in the worktree /work/wt/gpu: its paths are /work/wt/gpu/...)
for P in /work/main /work/wt/gpu; do if [ "$ROOT" != $P ]; then mkdir -p $(dirname $P); [ -e $P ] || ln -s "$ROOT" $P; fi; done
mkdir -p $ROOT/target/release/deps
cp $G/bin/kiln-worker $G/bin/libkiln_cupti.so $ROOT/target/release/
cp $G/gpu-test-* $ROOT/target/release/deps/
chmod +x $G/bin/* $ROOT/target/release/kiln-worker $ROOT/target/release/deps/gpu-test-*
sed -i "s|\"python3\"|\"$PY\"|" $G/torch-conv.sexp
sed -i "s|/usr/local/cuda/bin:|$(dirname $NVCC):|" $G/gpu-gemm.sexp
grep -n 'run (\|PATH' $G/*.sexp
# kiln report reads a TrueType font; this image has none under /usr/share/fonts, but matplotlib ships DejaVu Sans.
export KILN_FONT=$($PY -c 'import matplotlib,os;print(os.path.join(matplotlib.get_data_path(),"fonts","ttf","DejaVuSans.ttf"))'); ls -la $KILN_FONT

stamp probe
timeout 30 $G/bin/kiln-worker probe --compiler nvcc 2>&1 | tee $R/probe.txt
timeout 30 $G/bin/kiln-worker probe --json > $R/probe.json 2>&1; echo "probe rc=$?"
pack

stamp gpu-tests
cd $ROOT/worker && timeout 150 $ROOT/target/release/deps/gpu-test-* --test-threads=1 --nocapture 2>&1 | tee $R/gpu-tests.txt; echo "gpu tests rc=$?"; cd $ROOT
pack

stamp calibrate-by-hand
mkdir -p /tmp/cal && cd /tmp/cal && $NVCC -O2 -arch=native -o calibrate $ROOT/benchmarks/gpu-calibrate/calibrate.cu && \
  { nvml_energy; smi_on cal; stamp cal-measure-start
    timeout 60 $G/bin/kiln-worker measure --runs 3 --warmup 1 --objective gpu-time --metric gpu-kernel-sum --metric gpu-kernel-count --metric gpu-memcpy-time --metric energy --metric power-avg --metric power-peak --metric sm-clock --metric gpu-throttled -- ./calibrate 1000 800 2 2>&1 | tee $R/calibrate-measure.txt
    stamp cal-measure-end; smi_off; nvml_energy; }
cd $ROOT; pack

stamp torch-trace
cd $G && { nvml_energy; smi_on torch; stamp torch-measure-start
  timeout 90 $G/bin/kiln-worker measure --json --runs 3 --warmup 1 --objective gpu-time --metric gpu-kernel-sum --metric gpu-kernel-count --metric gpu-memcpy-time --metric gpu-dropped-records --metric energy --metric power-avg --metric power-peak --metric sm-clock --env EVENTS_FILE=$R/events.txt -- $PY torch_events.py 3000 > $R/torch-measure.json 2> $R/torch-measure.err; echo "torch measure rc=$?"
  stamp torch-measure-end; smi_off; nvml_energy; }
tail -20 $R/torch-measure.err; cat $R/events.txt
$PY - <<'PYEOF'
import json
m = json.load(open("/tmp/res/torch-measure.json"))
print("outcome", m.get("outcome"))
for k, v in m.get("summary", {}).items(): print("summary", k, v.get("median"))
for r in m.get("runs", []): print("run", {k: v for k, v in r.get("metrics", {}).items()})
PYEOF
timeout 90 $PY $G/torch_prof.py 3000 2>&1 | tail -5 | tee $R/torch-prof.txt
cd $ROOT; pack

for C in gpu-gemm:150 torch-conv:170; do
  N=${C%%:*}; T=${C##*:}
  stamp campaign $N
  cd $G && { nvml_energy; smi_on $N
    timeout $T $G/bin/kiln run $N.sexp --progress-every 5 2>&1 | tee $R/$N-run.txt; echo "$N run rc=$?"
    smi_off; nvml_energy
    S=/tmp/kstores/$N
    timeout 20 $G/bin/kiln status $S 2>&1 | tee $R/$N-status.txt
    timeout 20 $G/bin/kiln status $S --json > $R/$N-status.json 2>&1
    timeout 20 $G/bin/kiln export $S --table steps 2>&1 | tee $R/$N-steps.csv
    timeout 30 $G/bin/kiln export $S --all -o $R/$N-export 2>&1 | tail -5
    timeout 60 $G/bin/kiln report $S -o $R/$N-report 2>&1 | tail -20; ls -la $R/$N-report; }
  cd $ROOT; pack
done
stamp done
du -sh $R /tmp/kstores; pack; ls -la $OUT
