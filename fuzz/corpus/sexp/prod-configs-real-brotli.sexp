; brotli 9.1.1, Dropbox's rust-brotli, from crates.io (fetched by
; scripts/fetch-real-programs with its shipped Cargo.lock and its dependencies
; vendored, linked by scripts/real-programs): a cargo project whose library and
; `brotli` binary (src/bin/brotli.rs) are built by an unchanged
; `cargo build --release` (its own profile: fat LTO). kiln's flags reach the
; workspace's own crate through RUSTC_WORKSPACE_WRAPPER; the vendored
; dependencies build as cargo builds them.
; The run compresses one of the crate's own sources at quality 9 to stdout.
(campaign
  (name brotli)
  (store "../../target/real-programs/brotli")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark brotli)
     (search (simulated-annealing (steps 20) (t-max 0.002) (t-min 0.00005) (flips 2)))
     (seed 1) (parallel 2)))
  (benchmarks
    ((name brotli) (kind llvm-inline) (compiler rustc) (sources "../../target/real-programs/src/brotli")
     (build ("cargo" "build" "--release"))
     (run ("./target/release/brotli" "-c" "-q9" "src/enc/encode.rs"))
     (timeout-s 60) (build-timeout-s 600)))
  (workers (local (slots 2))))
