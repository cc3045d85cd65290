#!/bin/bash
# kiln GPU checks, run on the device machine from the repo root after scripts/gpu/stage.sh staged
# them in .gpu/: bash .gpu/gpu-check.sh [--steps LIST] [--test-rounds N] [--test-timeout S]
#
#   --steps LIST      comma-separated, run in this order (default: probe,tests,calibrate,torch-trace,campaigns):
#                       probe        kiln-worker probe, text and JSON
#                       tests        the worker's gpu:: integration tests
#                       calibrate    bench-programs/gpu-calibrate measured by hand (kiln-worker measure)
#                       torch-trace  torch_events.py traced (measure --json), then under torch.profiler
#                       torch-table  torch_events.py measured for the energy/power table (text)
#                       campaigns    the gpu-gemm and torch-conv campaigns, status, export, report
#   --test-rounds N   runs of the gpu:: tests (default 1: gpu-tests.txt; more: gpu-tests-1.txt ...)
#   --test-timeout S  seconds a run of the tests may take (default 150)
#
# results/gpu/README.md's runs: 1, 2 and the H200's with the defaults; run 3 with
# --steps probe,tests,calibrate,torch-table; run 4 with --steps tests --test-rounds 2 --test-timeout 100.
STEPS=probe,tests,calibrate,torch-trace,campaigns TEST_ROUNDS=1 TEST_TIMEOUT=150
while [ $# -gt 0 ]; do
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --test-rounds) TEST_ROUNDS=$2; shift 2 ;;
    --test-timeout) TEST_TIMEOUT=$2; shift 2 ;;
    -h | --help) sed -n '2,/^STEPS=/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
  esac
done
for S in ${STEPS//,/ }; do
  case $S in probe | tests | calibrate | torch-trace | torch-table | campaigns) ;;
    *) echo "gpu-check: unknown step $S" >&2; exit 2 ;;
  esac
done
want() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
. "$(dirname "$0")/setup.sh"

if want probe; then
stamp probe
timeout 30 $G/bin/kiln-worker probe --compiler nvcc 2>&1 | tee $R/probe.txt
timeout 30 $G/bin/kiln-worker probe --json > $R/probe.json 2>&1; echo "probe rc=$?"
pack
fi

if want tests; then
stamp gpu-tests
for i in $(seq "$TEST_ROUNDS"); do
  T=$R/gpu-tests.txt; [ "$TEST_ROUNDS" = 1 ] || T=$R/gpu-tests-$i.txt
  cd $ROOT/worker && timeout "$TEST_TIMEOUT" $ROOT/target/release/deps/gpu-test-* gpu:: --test-threads=1 --nocapture 2>&1 | tee "$T"; echo "gpu tests rc=$?"; cd $ROOT
done
pack
fi

if want calibrate; then
stamp calibrate-by-hand
mkdir -p /tmp/cal && cd /tmp/cal && $NVCC -O2 -arch=native -o calibrate $ROOT/bench-programs/gpu-calibrate/calibrate.cu && \
  { nvml_energy; smi_on cal; stamp cal-measure-start
    timeout 60 $G/bin/kiln-worker measure --runs 3 --warmup 1 --objective gpu-time --metric gpu-kernel-sum --metric gpu-kernel-count --metric gpu-memcpy-time --metric energy --metric power-avg --metric power-peak --metric sm-clock --metric gpu-throttled -- ./calibrate 1000 800 2 2>&1 | tee $R/calibrate-measure.txt
    stamp cal-measure-end; smi_off; nvml_energy; }
cd $ROOT; pack
fi

if want torch-trace; then
stamp torch-trace
cd $G && { nvml_energy; smi_on torch; stamp torch-measure-start
  timeout 90 $G/bin/kiln-worker measure --json --runs 3 --warmup 1 --objective gpu-time --metric gpu-kernel-sum --metric gpu-kernel-count --metric gpu-memcpy-time --metric gpu-dropped-records --metric energy --metric power-avg --metric power-peak --metric sm-clock --env EVENTS_FILE=$R/events.txt -- $PY torch_events.py 3000 > $R/torch-measure.json 2> $R/torch-measure.err; echo "torch measure rc=$?"
  stamp torch-measure-end; smi_off; nvml_energy; }
tail -20 $R/torch-measure.err; cat $R/events.txt
$PY $G/torch_measure_summary.py $R/torch-measure.json
timeout 90 $PY $G/torch_prof.py 3000 2>&1 | tail -5 | tee $R/torch-prof.txt
cd $ROOT; pack
fi

if want torch-table; then
stamp torch-table
cd $G && { smi_on torch; timeout 60 $G/bin/kiln-worker measure --runs 3 --warmup 1 --objective gpu-time --metric gpu-kernel-sum --metric energy --metric power-avg --metric power-peak --env EVENTS_FILE=$R/events.txt -- $PY torch_events.py 3000 2>&1 | tee $R/torch-measure.txt; smi_off; }
cd $ROOT; pack
fi

if want campaigns; then
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
fi
stamp done
du -sh $R /tmp/kstores; pack; ls -la $OUT
