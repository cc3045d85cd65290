#!/bin/bash
# kiln GPU checks, run on the device machine from the repo root: bash .gpu/gpu-check.sh
. "$(dirname "$0")/setup.sh"

stamp probe
timeout 30 $G/bin/kiln-worker probe --compiler nvcc 2>&1 | tee $R/probe.txt
timeout 30 $G/bin/kiln-worker probe --json > $R/probe.json 2>&1; echo "probe rc=$?"
pack

stamp gpu-tests
cd $ROOT/worker && timeout 150 $ROOT/target/release/deps/gpu-test-* gpu:: --test-threads=1 --nocapture 2>&1 | tee $R/gpu-tests.txt; echo "gpu tests rc=$?"; cd $ROOT
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
