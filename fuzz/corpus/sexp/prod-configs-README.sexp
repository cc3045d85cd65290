(campaign
  (name training)                 ; required: a name or string
  (store "results/training")      ; required: the store folder (sled db, artifacts, logs)

  ;; What the search minimises. metric: any metric name (below); statistic:
  ;; median | mean | min | trimmed-mean (mean within 3 sigma). Default: wall-time median.
  (objective (metric wall-time) (statistic median))

  ;; How often each candidate runs. After `warmup` unrecorded runs, at least
  ;; `min` runs, then more until the 95 % confidence interval of the median is
  ;; within `target-rel-ci` of it (relative half-width), or `max` runs, or
  ;; `max-time-s` seconds of measuring. Defaults: 1, 3, 10, 0.01, 60.
  (runs (warmup 1) (min 5) (max 30) (target-rel-ci 0.005) (max-time-s 120))

  ;; Infrastructure timeouts (benchmarks carry their own). A worker that answers
  ;; no ping for `lost-after-s` (dead, cut off, or frozen with its link still
  ;; open) is lost and its in-flight steps go to other slots.
  ;; Defaults: 30, 5, 30.
  (timeouts (connect-s 30) (heartbeat-s 5) (lost-after-s 60))

  ;; Optional slot calibration (see "Noise control across machines" below):
  ;; every slot measures `benchmark` (one defined below) when it connects and
  ;; again after every `every` jobs on it (0: only at connect). The slot's first
  ;; figure is its reference; a figure off by more than `max-drift` (relative)
  ;; flags the slot, and with `take-out-of-service` #t the slot gets no jobs
  ;; until a re-check (every 30 s) finds it within bounds again.
  ;; Defaults: every 50, max-drift 0.05, take-out-of-service #f.
  (calibration (benchmark sample-dsp) (every 50) (max-drift 0.05) (take-out-of-service #f))

  (experiments
    ;; One search over one benchmark.
    ((name sample-dsp-sa)         ; optional, default: the benchmark's name
     (benchmark sample-dsp)       ; required: a benchmark defined below
     ;; simulated-annealing: steps (required), t-max 0.04, t-min 0.001,
     ;; flips 3 (decisions changed per proposal; knob benchmarks move one),
     ;; schedule exponential | linear.
     ;; T(k) = t-max * exp(-ln(t-max/t-min) * k/steps); Metropolis acceptance on
     ;; (candidate - current) / baseline.
     (search (simulated-annealing (steps 300) (t-max 0.04) (t-min 0.001) (flips 3)))
     (chains 3)                   ; independent chains, default 1
     (seed 100)                   ; chain i's RNG seed derives from it, default 0
     (baseline "best.sexp")       ; optional decision file to start from (default: stock decisions)
     (remeasure-every 25)         ; re-measure the incumbent every N steps (0: never, default)
     (parallel 2)                 ; proposals of a chain in flight at once, default 1
     ;; uniform (default): every movable point equally likely to change.
     ;; guided: the chain's first steps flip each movable point once away from the
     ;; start (screening, part of the step budget, at most a quarter of it: then the
     ;; hottest points by the stock build's profile); the
     ;; next proposal takes every flip that helped at once; temperatures are scaled
     ;; down to the screened effects (the first accepts the median uphill flip with
     ;; probability 0.8, never above t-max); proposals then move one point (flips
     ;; is for uniform proposals), drawn in proportion to (|effect| + uncertainty,
     ;; plus a floor) times the chance Metropolis takes that flip from the current
     ;; set; each one-flip proposal refreshes its point's effect; with callgrind,
     ;; flips to sets already measured are passed over. Annealing and random-walk only.
     (proposals uniform)
     ;; racing, default 0.01: under a noisy median objective, an annealing (or
     ;; hill-climbing, bound: the incumbent) proposal stops being repeated (after at least `min` runs) once the lower end of its
     ;; median's 95 % interval lies above incumbent + T * ln(1/P) * baseline, where
     ;; Metropolis would accept it with probability below P; `off`: never.
     (race 0.01))
    ((benchmark blocked-mm)
     ;; random-walk: steps (required), flips 3; every measured proposal is accepted.
     ;; random-search: steps (required), flips (default: none, every point drawn
     ;;   uniformly from its domain; K: the start with K points moved); never moves.
     ;; hill-climbing: steps (required), kick 3; one flip of the incumbent at a time,
     ;;   taken only when better; at a local optimum it restarts from the best set
     ;;   with `kick` points moved.
     (search (random-walk (steps 200)))))

  (benchmarks
    ((name sample-dsp)            ; required
     (kind llvm-inline)           ; required: llvm-inline | knobs
     (sources "benchmarks/sample-dsp") ; required: the folder sent to workers (cached by hash)
     (build ("clang" "-O2" "main.c" "-o" "bench")) ; argument list, never a shell string
     ;; llvm-inline: when the build runs clang or rustc itself, kiln appends its replay and
     ;; remark flags to this command. Any other build (("make"), ("cmake" "--build" "b"),
     ;; a script) runs unchanged with (compiler clang): its PATH starts with a folder whose
     ;; clang, clang++, cc and c++ are kiln-worker, adding the flags to each compile of a
     ;; source file (cc and c++ run clang and clang++). (build ("cargo" "build" "--release"))
     ;; runs unchanged too: RUSTC_WORKSPACE_WRAPPER gives the workspace's own crates the
     ;; flags, its dependencies build as cargo builds them; name the binary in `run`
     ;; ("./target/release/NAME"). Dependencies whose crates should take decisions too
     ;; are opted in by package or crate name: (dependency-crates ("regex-automata")).
     (run ("./bench" "8000"))     ; required: run from the build folder
     (timeout-s 30)               ; per run, default 60; the process group is killed on timeout
     (build-timeout-s 120)        ; default 300
     (discovery-cpu-s 60)         ; default 60: CPU seconds of one discovery compile (every call
                                  ; inlined) before it is compiled with the stock decisions instead
     (build-memory "8g")          ; default 8 GiB: the build's processes together (checked every
                                  ; 100 ms); past it the whole build is killed, the step build-failed
     (env ("OMP_NUM_THREADS" "1")) ; extra environment for build and runs
     ;; Runs get a clean environment: PATH=/usr/local/bin:/usr/bin:/bin, HOME=the slot's
     ;; folder, LANG=C, then `env`. Builds get the same plus the worker's own PATH, HOME,
     ;; RUSTUP_HOME and CARGO_HOME (so rustup's toolchains and compilers under /opt are
     ;; found), plus the variables named here, where the worker has them:
     (pass-env ("CC" "RUSTFLAGS"))
     (check-output stdout)        ; stdout | none | (file "out.txt"): must match the baseline's
     ;; or only some lines of stdout, for a program that also prints its own timings:
     ;; (lines "^checksum") compares the lines that match, (lines-except "took .* ms$")
     ;; all lines but those. The baseline's checked output is kept, and `kiln show`
     ;; prints it beside a step's whose output differs. For a program that writes its
     ;; results to files: (command ("sha256sum" "out.bin")) runs after each run, in its
     ;; folder with its environment and timeout, and its stdout is what must match; a
     ;; command that fails fails the run, with its stderr.
     ;; Optional limits on the timed runs, as `docker run --cpus --memory`: CPU bandwidth
     ;; in CPUs and memory in bytes or "512m"/"2g" (no swap beyond it), applied through a
     ;; cgroup v2 per measurement (callgrind runs are not limited). A run the kernel kills
     ;; at the memory limit is run-failed naming the OOM killer. A worker that cannot apply
     ;; them (no cgroup v2 cpu/memory controller, or a cgroup shared with other processes:
     ;; start it with `systemd-run --scope -p Delegate=yes`) takes no steps, and a campaign
     ;; whose workers all cannot stops at once naming why; `kiln-worker probe` shows support.
     (limits (cpus 1.5) (memory "512m"))
     ;; llvm-inline only:
     (compiler clang)             ; clang | rustc, default: from the build command's program
     (fallback never-inline))     ; never-inline | always-inline | original: sites not in the replay file
    ((name blocked-mm)
     (kind knobs)
     ;; knobs only: each knob and its values; the first value is the default.
     ;; Values reach build and run as {block} substitutions in arguments,
     ;; as environment variables KILN_KNOB_BLOCK, and {decisions} is the
     ;; path of the decision file.
     (knobs (block 32 8 16 64) (order IJK IKJ JKI))
     (sources "benchmarks/blocked-mm")
     (build ("clang" "-O2" "-DBLOCK={block}" "-DORDER_{order}" "main.c" "-o" "bench"))
     (run ("./bench" "512"))))

  (workers
    ;; kiln-worker serve as a child process; slots run steps at once, each
    ;; pinned to its share of `cpus` (none: unpinned) and, on GPU machines,
    ;; running on its share of `gpus` (none: every GPU). Both fields work on ssh workers too.
    (local (name local) (slots 1) (cpus (1)) (gpus (0)))
    ;; A worker reached over SSH with the system ssh client. kiln-worker is
    ;; deployed into `rundir` when missing or different. Host keys are checked
    ;; against `known-hosts` (default: ssh's own) — host-key-check strict (default)
    ;; | accept-new | off. `worker-binary` uploads a kiln-worker built for another platform.
    (ssh (name worker0) (host "192.168.0.10") (user "bench") (port 22)
         (identity "/home/me/.ssh/id_ed25519") (known-hosts "/home/me/.ssh/known_hosts")
         (host-key-check strict) (rundir "/home/bench/kiln") (slots 2) (cpus (2 3)))
    ;; Workers in Slurm allocations, one allocation each: srun --unbuffered starts
    ;; kiln-worker serve on a node and the protocol runs over srun's stdin and stdout.
    ;; (nodes N) makes N workers named gpu-1 .. gpu-N (one, named gpu, without it).
    ;; partition, cpus-per-task, gpus-per-task and time go to srun as --partition=,
    ;; --cpus-per-task=, --gpus-per-task= and --time= (each optional: Slurm's defaults);
    ;; srun-args come after them (and can override them). kiln-worker is deployed by
    ;; hash to rundir/kiln-worker, which must be on a filesystem the nodes share;
    ;; each worker works in rundir/NAME. Without via-ssh, srun runs on the controller's
    ;; machine; with it, on that login node (the login fields of an ssh worker), and
    ;; kiln-worker is uploaded there as for ssh workers. A job that ends, is preempted
    ;; or cancelled loses the worker (its steps go to other slots) and kiln asks for a
    ;; new allocation; after `retries` (default 3) allocations in a row that ended or
    ;; never started without finishing a step, the worker is given up (unfit), with
    ;; srun's last error lines as the reason.
    (slurm (name gpu) (nodes 2) (partition "a100") (slots 1) (cpus-per-task 8)
           (gpus-per-task 1) (time "7-00:00:00") (srun-args ("--exclusive"))
           (rundir "/shared/kiln") (retries 3)
           (via-ssh (host "login1.cluster") (user "me") (identity "/home/me/.ssh/id_ed25519")))))
