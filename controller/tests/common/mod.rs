//! Helpers shared by the controller's integration tests: the real binaries and scratch campaigns.

pub mod campaign;
#[path = "../../../test-support/skip.rs"]
mod skip;

#[path = "../../../test-support/splitmix.rs"]
pub mod splitmix;

pub use skip::skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `kiln` binary under test.
pub fn kiln() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kiln"))
}

/// The `kiln-worker` binary beside `kiln` (or `KILN_WORKER_BIN`), brought up
/// to date once a test run: it belongs to another package, which
/// `cargo test -p kiln-controller` does not build, and a worker left from
/// before a change would be tested instead.
pub fn worker() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("KILN_WORKER_BIN") {
            return PathBuf::from(p);
        }
        let profile_dir = kiln().parent().expect("bin folder").to_path_buf();
        let bin = profile_dir.join("kiln-worker");
        let target = profile_dir.parent().expect("target folder");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args("build --quiet -p kiln-worker --bin kiln-worker".split(' '));
        cmd.current_dir(repo()).env("CARGO_TARGET_DIR", target);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("cannot run cargo");
        if !out.status.success() {
            // Offline or mid-edit: an existing binary still serves, said loudly.
            assert!(
                bin.exists(),
                "cargo build -p kiln-worker failed and there is no {}: {}",
                bin.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!(
                "WARNING: cargo build -p kiln-worker failed; using the existing {}",
                bin.display()
            );
        }
        bin
    })
    .clone()
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// A `kiln` command with the worker binary set, run from `dir`.
pub fn kiln_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new(kiln());
    cmd.current_dir(dir).env("KILN_WORKER", worker());
    cmd
}

/// Runs `kiln ARGS` in `dir`, returning its output.
pub fn run_kiln(dir: &Path, args: &[&str]) -> Output {
    kiln_cmd(dir).args(args).output().expect("kiln runs")
}

/// Text of an output's stdout and stderr, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Whether `program --version` runs.
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether valgrind is installed (callgrind objectives need it).
pub fn have_valgrind() -> bool {
    have("valgrind")
}

/// Copies a bundled benchmark into `dir/bench-programs/NAME`.
pub fn copy_benchmark(name: &str, dir: &Path) {
    let from = repo().join("bench-programs").join(name);
    let to = dir.join("bench-programs").join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The exit status of the rig scripts (ssh-rig, slurm-rig, podman-setup) where they cannot run
/// here; they say why on stderr.
pub const SKIP: i32 = 77;

/// `scripts/ssh-rig`, which runs the sshd test rig.
pub fn rig_script() -> PathBuf {
    repo().join("scripts/ssh-rig")
}

/// `ssh-rig VERB DIR K`: acts on sshd `K` of the rig in `dir`.
pub fn rig_ctl(dir: &Path, verb: &str, k: usize) {
    let out = Command::new(rig_script())
        .arg(verb)
        .arg(dir)
        .arg(k.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ssh-rig {verb} {k}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Takes down the rig in `dir` (`ssh-rig down`) and removes the folder; a failure is
/// printed, not raised, as this runs from `Drop`.
pub fn rig_down(dir: &Path) {
    match Command::new(rig_script()).arg("down").arg(dir).output() {
        Ok(o) if o.status.success() => {
            let _ = std::fs::remove_dir_all(dir);
        }
        Ok(o) => eprintln!(
            "ssh-rig down {}: {}",
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => eprintln!("ssh-rig down {}: {e}", dir.display()),
    }
}

/// Opens again what was just closed: sled's background threads let go of the
/// database (and its lock) a moment after the last handle is dropped.
pub fn reopen<T>(open: impl Fn() -> anyhow::Result<T>) -> T {
    for _ in 0..100 {
        if let Ok(opened) = open() {
            return opened;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    open().expect("the store opens again")
}

/// Runs `kiln ARGS` in `dir` once the store a test just closed is free
/// again (see [`reopen`]): until then kiln refuses it as in use.
pub fn run_kiln_when_free(dir: &Path, args: &[&str]) -> Output {
    reopen(|| {
        let out = run_kiln(dir, args);
        match String::from_utf8_lossy(&out.stderr).contains("in use") {
            true => anyhow::bail!("still held"),
            false => Ok(out),
        }
    })
}

/// A no-op campaign through the real binaries: experiments `a` and, if
/// `with_b`, `b`.
pub fn noop_config(with_b: bool) -> String {
    let experiment = |name: &str, steps: u32| {
        format!("((name {name}) (benchmark noop) (search (random-walk (steps {steps}))) (chains 2) (seed 3))")
    };
    format!(
        r#"(campaign
  (name noop)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    {a}
    {b})
  (benchmarks
    ((name noop) (kind knobs) (knobs (k 0 1 2 3))
     (sources "noop") (build ()) (run ("true")) (check-output none) (timeout-s 10)))
  (workers (local (slots 2))))
"#,
        a = experiment("a", 12),
        b = if with_b {
            experiment("b", 8)
        } else {
            String::new()
        },
    )
}

/// A scratch folder in which [`noop_config`]`(false)` has run to its end
/// (`campaign.sexp`, its store in `store`).
pub fn noop_campaign() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("noop")).unwrap();
    std::fs::write(dir.path().join("noop/README"), "nothing to build\n").unwrap();
    std::fs::write(dir.path().join("campaign.sexp"), noop_config(false)).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

/// A program of two C files built by `make` with plain `-g` (kiln's flags reach each compile
/// through its compiler wrapper): (file name, text) under `bench-programs/twofile`.
pub const TWO_FILE_MAKE: [(&str, &str); 3] = [
    (
        "Makefile",
        "CFLAGS = -O2 -g\nbench: main.o work.o\n\t$(CC) $(CFLAGS) main.o work.o -o bench\n\
         %.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n",
    ),
    (
        "main.c",
        "#include <stdio.h>\n#include <stdlib.h>\nint work(int n);\n\
         static int sq(int x) { return x * x; }\n\
         static int add(int a, int b) { return a + b; }\n\
         int main(int argc, char **argv) {\n  int n = atoi(argv[1]), s = 0;\n\
         for (int i = 0; i < n; i++) s = add(s, sq(i) + work(i % 50));\n\
         printf(\"%d\\n\", s);\n  return 0;\n}\n",
    ),
    (
        "work.c",
        "static int twice(int x) { return 2 * x; }\n\
         static int inc(int x) { return x + 1; }\n\
         int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += inc(twice(i)); return s; }\n",
    ),
];

/// A random walk of `steps` one-flip steps over [`TWO_FILE_MAKE`], counted by callgrind.
pub fn two_file_config(steps: u32) -> String {
    format!(
        r#"(campaign
  (name twofile)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark twofile) (search (random-walk (steps {steps}) (flips 1))) (seed 4)))
  (benchmarks
    ((name twofile) (kind llvm-inline) (compiler clang) (sources "bench-programs/twofile")
     (build ("make")) (run ("./bench" "200")) (timeout-s 60)))
  (workers (local (slots 1))))
"#
    )
}

/// What [`loud_campaign`]'s failing runs write to stderr: colour (CSI), a
/// clipboard write (OSC 52, ended by BEL), a bell, a C1 CSI that clears the
/// screen, and markup.
pub const LOUD_STDERR: &str =
    "red \x1b[31mRED\x1b]52;c;aGVsbG8=\x07 bell\x07 c1 \u{9b}2J <b>bold</b>";

/// A scratch folder in which a campaign (`campaign.sexp`, store in `store`,
/// experiment `loud`) has run whose knob benchmark succeeds at its stock
/// setting and fails everywhere else, writing [`LOUD_STDERR`] to stderr.
/// Returns the folder and `kiln run`'s output.
pub fn loud_campaign() -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("loud")).unwrap();
    std::fs::write(
        dir.path().join("loud/run.sh"),
        "[ \"$1\" = 0 ] && exit 0\n\
         printf 'red \\033[31mRED\\033]52;c;aGVsbG8=\\007 bell\\a c1 \\302\\2332J <b>bold</b>\\n' >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("campaign.sexp"),
        r#"(campaign
  (name loud)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((name loud) (benchmark loud) (search (random-walk (steps 8))) (chains 1) (seed 3)))
  (benchmarks
    ((name loud) (kind knobs) (knobs (k 0 1 2 3))
     (sources "loud") (build ()) (run ("sh" "run.sh" "{k}")) (check-output none) (timeout-s 10)))
  (workers (local (slots 1))))
"#,
    )
    .unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    (dir, out)
}

/// Whether `text` holds a control character a terminal would act on (all but newline and tab).
pub fn has_controls(text: &str) -> bool {
    text.chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
}
