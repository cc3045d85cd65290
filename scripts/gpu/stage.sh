#!/bin/bash
# Stages the device checks in .gpu/ (run here, from the repo root, before the device call): the
# release binaries stripped (the device has no Rust toolchain), the worker's integration-test
# binary as gpu-test-tests (the checks run its gpu:: tests) and these scripts. .gpu/ is untracked
# and travels with the working tree; remove it after the call.
set -euo pipefail
cargo build --release -p kiln-controller -p kiln-worker
T=$(cargo test --release -p kiln-worker --test tests --no-run --message-format=json 2>/dev/null |
  python3 scripts/lib/cargo_executable.py tests)
mkdir -p .gpu/bin
for b in kiln kiln-worker libkiln_cupti.so; do strip -o .gpu/bin/$b target/release/$b; done
strip -o .gpu/gpu-test-tests "$T"
cp scripts/gpu/* .gpu/
du -sh .gpu
