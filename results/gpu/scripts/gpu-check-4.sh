#!/bin/bash
# kiln GPU checks, run on the device machine from the repo root: bash .gpu/gpu-check.sh
. "$(dirname "$0")/setup.sh"

stamp gpu-tests
for i in 1 2; do cd $ROOT/worker && timeout 100 $ROOT/target/release/deps/gpu-test-* gpu:: --test-threads=1 --nocapture 2>&1 | tee $R/gpu-tests-$i.txt; echo "gpu tests rc=$?"; cd $ROOT; done
pack; stamp done
