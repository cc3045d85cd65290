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


stamp torch-table
cd $G && { smi_on torch; timeout 60 $G/bin/kiln-worker measure --runs 3 --warmup 1 --objective gpu-time --metric gpu-kernel-sum --metric energy --metric power-avg --metric power-peak --env EVENTS_FILE=$R/events.txt -- $PY torch_events.py 3000 2>&1 | tee $R/torch-measure.txt; smi_off; }
cd $ROOT; pack
stamp done; ls -la $OUT
