# Shared set-up of the device check scripts (sourced by gpu-check.sh from the repo root
# on the device machine): folders, helpers, the device and toolchain facts, and the carried
# binaries put where the test binary's compiled-in paths expect them.
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
nvml_energy() { python3 $G/facts.py nvml-energy 2>&1; }

stamp setup
echo "pwd=$ROOT"; date -u; uname -a; nvidia-smi; nvidia-smi -q -d POWER,CLOCK,PERFORMANCE | head -80
echo "smi query: $SMIQ"
PY=$(command -v python3); NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "python3=$PY nvcc=$NVCC"; $NVCC --version | tail -2
echo "clean-PATH python3 imports torch?"; env -i PATH=/usr/local/bin:/usr/bin:/bin python3 $G/facts.py torch 2>&1 | tail -1
$PY $G/facts.py torch-device
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
export KILN_FONT=$($PY $G/facts.py font); ls -la $KILN_FONT
