//! kiln's compiler flags for builds that do not run the compiler themselves
//! (make, CMake, cargo, a build script); the build's own command and files
//! are left as they are, and the compiler's remarks reach the build log as
//! the build passes them on; kiln reads them from a file of the wrapper's,
//! where each compile's output is whole ([`compilers_said`]).
//!
//! - clang: the build's `PATH` starts with a folder whose `clang`, `clang++`,
//!   `cc` and `c++` are kiln-worker, which runs the real clang with kiln's
//!   flags added to each invocation that compiles a source file.
//! - rustc under cargo: `RUSTC_WORKSPACE_WRAPPER` is kiln-worker under the
//!   name `kiln-rustc`, so the workspace's own crates get the flags and its
//!   dependencies are built as cargo builds them; with `dependency-crates`,
//!   `RUSTC_WRAPPER` is kiln-worker as `kiln-rustc-deps` too, which gives the
//!   flags to the crates named there (cargo runs it around the workspace
//!   wrapper for the workspace's crates, and passes those on unchanged).
//!
//! In discovery's stock build each compile that gets the flags also writes
//! its IR before inlining, for the sites' features ([`ir_commands`]).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use std::os::unix::process::ExitStatusExt;

use kiln_protocol::config::benchmark::Compiler;

use crate::build::crates::{self, Code, Crate, CODE_AGAIN, CODE_KEPT, CRATE_CODE_ENV};
use crate::build::objects::{
    default_object, is_source, lexical, Restore, Unit, FROM_IR, FROM_IR_ENV, NOT_FROM_IR,
    OBJECTS_ENV,
};
use crate::build::split::{self, Split};
use crate::build::warm::{UNITS_ENV, UNITS_FILE};

/// The flags to add, as a JSON list of strings.
const FLAGS_ENV: &str = "KILN_WRAP_FLAGS";

/// The `PATH` the real compilers are found on (the build's, without the wrapper folder).
const PATH_ENV: &str = "KILN_WRAP_PATH";

/// Flags to compile a unit with instead when it passes [`LIMIT_BYTES`] or
/// its CPU seconds ([`CPU_ENV`]) with the flags of [`FLAGS_ENV`] (JSON, like them).
const FALLBACK_ENV: &str = "KILN_WRAP_FALLBACK";

/// The CPU seconds one bounded compile may use.
const CPU_ENV: &str = "KILN_WRAP_CPU_S";

/// The file whose lock a compile holds while it writes its output.
const LOCK_ENV: &str = "KILN_WRAP_LOCK";

/// The file each compile appends what it said to, whole and under the
/// output lock: what the build's remarks are read from. In the build's log a
/// job that prints as it goes (CMake's `[ 29%] Building ...` beside a compile)
/// can put a line inside a remark, and a cut remark reads as a decision not
/// realised.
const SAID_ENV: &str = "KILN_WRAP_SAID";

/// [`SAID_ENV`]'s file in the wrapper's folder.
const SAID_FILE: &str = "compilers-said";

/// A folder where each compile that gets the flags keeps a file, named by
/// its pid and holding the units it compiles, while it runs: what discovery's
/// progress and a limit's message name.
const ACTIVE_ENV: &str = "KILN_WRAP_ACTIVE";

/// A folder where each clang compile also writes its units' IR before
/// inlining (see [`super::ir`]), for discovery's site features.
const IR_ENV: &str = "KILN_WRAP_IR";

/// The note a compile that fell back to the stock decisions leaves in the
/// build log, in three parts around its units and why: what [`fallbacks`] reads.
const FELL_BACK_START: &str = "kiln: compiling ";
const FELL_BACK_MIDDLE: &str = " with every call inlined ";
const FELL_BACK_END: &str =
    ": it was compiled again with the stock compiler's decisions, which give its sites";

/// The units of a discovery build's log that fell back to the stock
/// decisions, each `UNITS: why`.
pub fn fallbacks(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let rest = line
                .strip_prefix(FELL_BACK_START)?
                .strip_suffix(FELL_BACK_END)?;
            let (units, why) = rest.split_once(FELL_BACK_MIDDLE)?;
            Some(format!("{units}: {why}"))
        })
        .collect()
}

/// The address space one bounded compile may use.
pub const LIMIT_BYTES: u64 = 4 << 30;

/// A bounded compile, and what to compile with when it fails.
pub struct Fallback<'a> {
    /// The flags of the compile again.
    pub flags: &'a [String],
    /// CPU seconds the bounded compile may take.
    pub cpu_s: u64,
}

/// The names the wrapper answers to, and the compiler each runs: a Makefile's
/// default `cc` gets clang too, since the benchmark says its compiler is clang.
const NAMES: &[(&str, &str)] = &[
    ("clang", "clang"),
    ("clang++", "clang++"),
    ("cc", "clang"),
    ("c++", "clang++"),
];

/// Whether the wrapper answers to `name` as a clang compiler.
pub fn answers_to(name: &str) -> bool {
    NAMES.iter().any(|(n, _)| *n == name)
}

/// The name kiln-worker answers to as cargo's `RUSTC_WORKSPACE_WRAPPER`.
const RUSTC_WRAPPER: &str = "kiln-rustc";

/// The name kiln-worker answers to as cargo's `RUSTC_WRAPPER`, for the
/// dependencies whose crates get the flags too.
const RUSTC_DEPS_WRAPPER: &str = "kiln-rustc-deps";

/// Those crates, as a JSON list of names.
const CRATES_ENV: &str = "KILN_WRAP_CRATES";

/// Makes `dir` the build's wrapper folder for `compiler` and `flags`;
/// returns the variables to set in the build's environment, whose `PATH` is
/// `path`.
///
/// With `fallback`, each compile (a clang unit, a cargo crate) runs under
/// [`LIMIT_BYTES`] and its CPU seconds and, when it fails, again with the
/// fallback's flags instead of `flags`. `objects` is a step build's object
/// cache (none in discovery): clang's units reuse objects from it, and a
/// workspace crate whose decisions did not change keeps its code.
pub fn prepare(
    compiler: Compiler,
    dir: &Path,
    flags: &[String],
    fallback: Option<Fallback<'_>>,
    path: &str,
    dependency_crates: &[String],
    objects: Option<&Path>,
) -> Result<Vec<(String, String)>, String> {
    let mut env = vec![
        ("PATH".to_string(), format!("{}:{path}", dir.display())),
        (FLAGS_ENV.to_string(), flags_json(flags)),
    ];
    if let Some(fallback) = fallback {
        env.push((FALLBACK_ENV.into(), flags_json(fallback.flags)));
        env.push((CPU_ENV.into(), fallback.cpu_s.max(1).to_string()));
        let active = active_dir(dir);
        std::fs::create_dir_all(&active)
            .map_err(|e| format!("cannot create {}: {e}", active.display()))?;
        env.push((ACTIVE_ENV.into(), active.display().to_string()));
    }
    match compiler {
        Compiler::Clang => {
            if let Some(objects) = objects {
                std::fs::create_dir_all(objects)
                    .map_err(|e| format!("cannot create {}: {e}", objects.display()))?;
                env.push((OBJECTS_ENV.into(), objects.display().to_string()));
                env.push((UNITS_ENV.into(), dir.join(UNITS_FILE).display().to_string()));
                if from_ir_enabled() {
                    env.push((FROM_IR_ENV.into(), "1".into()));
                }
            }
            link_names(dir, NAMES.iter().map(|(name, _)| *name))?;
            env.push((PATH_ENV.into(), path.into()));
            env.push((
                LOCK_ENV.into(),
                dir.join("output.lock").display().to_string(),
            ));
            let said = dir.join(SAID_FILE);
            std::fs::write(&said, "")
                .map_err(|e| format!("cannot write {}: {e}", said.display()))?;
            env.push((SAID_ENV.into(), said.display().to_string()));
        }
        Compiler::Rustc => {
            link_names(dir, [RUSTC_WRAPPER, RUSTC_DEPS_WRAPPER])?;
            if objects.is_some() {
                env.push((CRATE_CODE_ENV.into(), "1".into()));
            }
            // Bare names, found on PATH: cargo hashes a wrapper as written
            // into every symbol name, and a path differs from folder to folder
            // (discovery's, each slot's, each worker's), so sites would not match.
            env.push(("RUSTC_WORKSPACE_WRAPPER".into(), RUSTC_WRAPPER.into()));
            if !dependency_crates.is_empty() {
                env.push(("RUSTC_WRAPPER".into(), RUSTC_DEPS_WRAPPER.into()));
                env.push((CRATES_ENV.into(), flags_json(dependency_crates)));
            }
        }
    }
    Ok(env)
}

/// What the compiles of the last build prepared in `dir` said, each whole
/// (at most `cap` bytes): `None` where it ran no clang through the wrapper.
pub fn compilers_said(dir: &Path, cap: usize) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(dir.join(SAID_FILE)).ok()?;
    let mut said = Vec::new();
    file.take(cap as u64 + 1).read_to_end(&mut said).ok()?;
    if said.len() > cap {
        said.truncate(cap);
        tracing::warn!("the compiles said more than {cap} bytes; remarks past it are lost");
    }
    Some(String::from_utf8_lossy(&said).into_owned())
}

/// Forgets what an earlier build's compiles said, for a build in `dir`
/// that runs no compile through the wrapper.
pub fn forget_said(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(SAID_FILE));
}

/// The benchmark's program, when the build makes it (its run command names a
/// file in the work folder that is not there before the build): a clang
/// invocation that compiles and links another program in one command builds
/// a tool the build runs (SQLite's parser generator `lemon`), not the
/// benchmark, and runs as the build says, without kiln's flags. Inlining
/// every call made `lemon` crash, and SQLite's discovery with it; the
/// sites of such tools are none of the benchmark's.
const PROGRAM_ENV: &str = "KILN_WRAP_PROGRAM";

/// The variable that names the benchmark's program to the wrapper, if the
/// build makes it: `run` is the benchmark's run command, `work` the work
/// folder before the build.
pub fn program_env(run: &[String], work: &Path) -> Option<(String, String)> {
    let program = run.first().filter(|p| p.contains('/'))?;
    let path = lexical(&work.join(program));
    (!path.exists()).then(|| (PROGRAM_ENV.to_string(), path.display().to_string()))
}

/// Whether a clang invocation compiles and links a program in one command
/// that is not the benchmark's ([`PROGRAM_ENV`]): its output, or none.
fn other_program(args: &[OsString]) -> Option<PathBuf> {
    let program = std::env::var_os(PROGRAM_ENV)?;
    if args.iter().any(|a| a == "-c" || a == "-S" || a == "-E") {
        return None;
    }
    let out = args.iter().position(|a| a == "-o")?;
    let output = lexical(&std::env::current_dir().ok()?.join(args.get(out + 1)?));
    (output.as_os_str() != program).then_some(output)
}

/// The worker's own variable that, set to `off`, keeps step builds to the
/// per-unit rebuild: a changed unit compiled whole, front end included
/// (for comparing the two, as `scripts/bench-builds` does).
pub const FRONT_END_ONCE_ENV: &str = "KILN_FRONT_END_ONCE";

/// Whether step builds compile changed clang units from their kept IR.
fn from_ir_enabled() -> bool {
    super::env::switched_on(FRONT_END_ONCE_ENV)
}

/// The variable that makes the wrapped clang compiles of a build write
/// their units' IR into `dir` too.
pub fn ir_env(dir: &Path) -> (String, String) {
    (IR_ENV.into(), dir.display().to_string())
}

/// The command lines (after the compiler) that write the IR of what a
/// compiler invocation `args` compiles into `out_dir`, named by `tag`: one
/// per source for clang, one per crate for rustc.
pub fn ir_commands(
    compiler: Compiler,
    args: &[OsString],
    flags: &[String],
    out_dir: &Path,
    tag: &str,
) -> Vec<Vec<OsString>> {
    use super::ir;
    match compiler {
        Compiler::Clang => {
            let sources: Vec<&OsString> = args
                .iter()
                .filter(|a| compiles(std::slice::from_ref(a)))
                .collect();
            ir::clang_commands(args, &sources, flags, out_dir, tag)
        }
        Compiler::Rustc => vec![ir::rustc_command(args, flags, out_dir, tag)],
    }
}

fn active_dir(wrap_dir: &Path) -> PathBuf {
    wrap_dir.join("active")
}

/// The units being compiled under the wrapper folder `wrap_dir` of a bounded
/// build (see [`prepare`]), oldest first.
pub fn active_units(wrap_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(active_dir(wrap_dir)) else {
        return Vec::new();
    };
    let mut units: Vec<(std::time::SystemTime, String)> = entries
        .flatten()
        .filter_map(|e| {
            let started = e.metadata().ok()?.modified().ok()?;
            Some((started, std::fs::read_to_string(e.path()).ok()?))
        })
        .collect();
    units.sort();
    units.into_iter().map(|(_, unit)| unit).collect()
}

fn flags_json(flags: &[String]) -> String {
    serde_json::to_string(flags).expect("strings serialize")
}

/// The kiln-worker binary the wrapper's names link to, where this process
/// is not it (see [`use_executable`]).
static EXECUTABLE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Names the kiln-worker binary that wrapped compilers run, for a process
/// that runs the worker's builds without being kiln-worker itself (the
/// worker's own tests): such a process cannot stand in for a compiler. The
/// first call wins.
pub fn use_executable(path: PathBuf) {
    let _ = EXECUTABLE.set(path);
}

/// Links each name in `dir` to kiln-worker.
fn link_names<'a>(dir: &Path, names: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let exe = match EXECUTABLE.get() {
        Some(exe) => exe.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot locate kiln-worker for the compiler wrapper: {e}"))?,
    };
    still_there(&exe)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for name in names {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&exe, &link)
            .map_err(|e| format!("cannot create {}: {e}", link.display()))?;
    }
    Ok(())
}

/// Whether the worker's binary `exe` is still where it ran from. A binary
/// replaced while the worker runs (kiln rebuilt or upgraded) is
/// "PATH (deleted)": links to it would dangle, and the build would find the
/// real compiler further along PATH and build without kiln's flags.
fn still_there(exe: &Path) -> Result<(), String> {
    match exe.is_file() {
        true => Ok(()),
        false => Err(format!(
            "this worker's binary {} was replaced or removed while it ran; the compiler \
             wrapper must run the binary the worker runs: restart the worker",
            exe.display()
        )),
    }
}

/// When this process was started as a wrapped compiler, runs the real one
/// in its place (never returns); otherwise returns at once.
pub fn run_if_wrapped() {
    let mut args = std::env::args_os();
    let Some(argv0) = args.next() else { return };
    let name = Path::new(&argv0).file_name().and_then(|n| n.to_str());
    let Some(flags) = std::env::var_os(FLAGS_ENV) else {
        return;
    };
    let args: Vec<OsString> = args.collect();
    let mut compile = if matches!(name, Some(RUSTC_WRAPPER | RUSTC_DEPS_WRAPPER)) {
        Invocation::rustc(name, args)
    } else {
        let Some(compile) = Invocation::clang(name, args) else {
            return;
        };
        compile
    };
    // In a step (with the object cache), each compile of one source is a unit:
    if compile.add && !compile.is_rustc && std::env::var_os(OBJECTS_ENV).is_some() {
        compile.as_unit(&argv0);
    }
    let mut flags = flag_list(FLAGS_ENV, &flags);
    // In a step, a workspace crate whose decisions did not change keeps its code.
    let krate = match (
        compile.is_rustc && compile.add,
        std::env::var_os(CRATE_CODE_ENV),
    ) {
        (true, Some(_)) => Crate::of(&compile.args, &mut flags),
        _ => None,
    };
    if !compile.add {
        let e = compile.command(&flags).exec();
        fail(&format!("cannot run {}: {e}", compile.program.display()))
    }
    compile.run_with_flags(&flags, krate.as_ref())
}

/// A compiler invocation the wrapper stands in for.
struct Invocation {
    /// The real compiler.
    program: PathBuf,
    /// The name it runs under.
    arg0: OsString,
    /// Its arguments, as the build gave them.
    args: Vec<OsString>,
    /// Whether it gets kiln's flags.
    add: bool,
    /// Whether it came through cargo's rustc wrapper (else it is a clang compile).
    is_rustc: bool,
}

impl Invocation {
    /// A rustc invocation through cargo's wrapper `name`.
    fn rustc(name: Option<&str>, mut args: Vec<OsString>) -> Invocation {
        // cargo runs `WRAPPER RUSTC ARGS...` (as RUSTC_WRAPPER around the
        // workspace's crates: `kiln-rustc-deps kiln-rustc RUSTC ARGS...`); it
        // also asks rustc what it can do (`--crate-name ___ --print ...`),
        // which gets no flags.
        let mut next = || match args.is_empty() {
            true => fail("started as cargo's rustc wrapper without a rustc to run"),
            false => PathBuf::from(args.remove(0)),
        };
        let mut rustc = next();
        let workspace = name == Some(RUSTC_WRAPPER) || rustc.as_os_str() == RUSTC_WRAPPER;
        if rustc.as_os_str() == RUSTC_WRAPPER {
            rustc = next();
        }
        let crate_name = crate_name(&args);
        let compiles = !matches!(crate_name.as_str(), "" | "___");
        let chosen = workspace || opted_in(&crate_name);
        Invocation {
            program: rustc.clone(),
            arg0: rustc.into_os_string(),
            args,
            add: compiles && chosen,
            is_rustc: true,
        }
    }

    /// A clang invocation under one of the wrapper's [`NAMES`], `name`;
    /// `None` where this process was not started as one.
    fn clang(name: Option<&str>, args: Vec<OsString>) -> Option<Invocation> {
        let (_, real) = NAMES.iter().find(|(n, _)| Some(*n) == name)?;
        let path = std::env::var_os(PATH_ENV)?;
        let Some(program) = find(real, &path) else {
            fail(&format!(
                "'{real}' is not on PATH={}",
                path.to_string_lossy()
            ))
        };
        let tool = other_program(&args).filter(|_| compiles(&args));
        if let Some(tool) = &tool {
            eprintln!(
                "kiln: {}: builds {}, a program that is not the benchmark's: compiled \
                 without kiln's flags",
                sources(&args),
                tool.display()
            );
        }
        Some(Invocation {
            program,
            arg0: OsString::from(real),
            add: compiles(&args) && tool.is_none(),
            args,
            is_rustc: false,
        })
    }

    /// Makes a step's clang compile one unit of the object cache: one that
    /// leaves its object's name to clang gets that name, and a compile and
    /// link in one command runs as a unit per source and the link, through
    /// the wrapper (`argv0`) again (never returns then).
    fn as_unit(&mut self, argv0: &OsString) {
        if let Some(object) = default_object(&self.args) {
            self.args.extend(["-o".into(), object]);
        }
        if let Some(split) = split::of(&self.args) {
            compile_then_link(argv0, &self.program, &self.arg0, &self.args, &split)
        }
    }

    /// The real compiler's command for this invocation, with `flags` where it gets kiln's.
    fn command(&self, flags: &[String]) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.arg0(&self.arg0).args(&self.args);
        if self.add {
            command.args(flags);
        }
        command
    }

    /// Runs `command`, a compile of this invocation's, for its output.
    fn output(&self, mut command: std::process::Command) -> std::process::Output {
        command
            .output()
            .unwrap_or_else(|e| fail(&format!("cannot run {}: {e}", self.program.display())))
    }

    /// What the messages call the unit: its sources, or a Rust crate's name.
    fn unit_name(&self) -> String {
        match self.is_rustc {
            true => crate_label(&self.args),
            false => sources(&self.args),
        }
    }

    /// Compiles with kiln's `flags`, from the object cache, a unit's kept IR
    /// or a crate's kept code where a step's build keeps them; shows what the
    /// compile said and exits as it did.
    fn run_with_flags(&self, flags: &[String], krate: Option<&Crate>) -> ! {
        let unit_name = self.unit_name();
        // Left behind if the build is killed mid-compile: it then names the unit.
        let active = std::env::var_os(ACTIVE_ENV).map(|dir| {
            let file = Path::new(&dir).join(std::process::id().to_string());
            let _ = std::fs::write(&file, &unit_name);
            file
        });
        // A unit compiled before with the same inputs and decisions is not compiled again.
        let unit = match (self.is_rustc, std::env::var_os(OBJECTS_ENV)) {
            (false, Some(dir)) => Unit::of(Path::new(&dir), &self.program, &self.args, flags),
            _ => None,
        };
        // kiln's own lines about this compile: shown before its output, never
        // kept with it (a later restore of the object would say them again).
        let mut notes = String::new();
        if let Some(log) = self.restored(unit.as_ref(), &mut notes) {
            self.reuse_object(unit.as_ref(), log, active.as_deref())
        }
        let code = match krate.map(Crate::code) {
            Some(Err(why)) => fail(&why),
            Some(Ok(code)) => Some(code),
            None => None,
        };
        let mut output = self.compile(flags, unit.as_ref(), &unit_name, &mut notes);
        self.write_ir(flags, &mut output);
        if let Some(file) = active {
            let _ = std::fs::remove_file(file);
        }
        if let Some(unit) = unit.filter(|_| output.status.success()) {
            unit.keep(&output.stderr);
            record_unit(&unit);
        }
        if let (Some(krate), Some(code)) = (krate, code) {
            keep_code(krate, code, &unit_name, &mut output, &mut notes);
        }
        output.stderr.splice(0..0, notes.into_bytes());
        show(&mut output);
        std::process::exit(exit_code(output.status))
    }

    /// The output of the unit's compile kept in the object cache, where it
    /// is there and whole; a damaged entry is noted and compiled again.
    fn restored(&self, unit: Option<&Unit>, notes: &mut String) -> Option<Vec<u8>> {
        match unit.map(Unit::restore) {
            Some(Restore::Hit(log)) => Some(log),
            Some(Restore::Damaged(why)) => {
                notes.push_str(&format!(
                    "kiln: {}: {why}; compiled again\n",
                    sources(&self.args)
                ));
                None
            }
            Some(Restore::Miss) | None => None,
        }
    }

    /// Ends a compile whose object the cache restored: says so and what
    /// its compile said (`log`), and exits as that compile did.
    fn reuse_object(&self, unit: Option<&Unit>, log: Vec<u8>, active: Option<&Path>) -> ! {
        if let Some(unit) = unit {
            record_unit(unit);
        }
        let note = format!(
            "kiln: {}: object reused (the same source and decisions)\n",
            sources(&self.args)
        );
        let mut output = std::process::Output {
            status: std::process::ExitStatus::from_raw(0),
            stdout: Vec::new(),
            stderr: [note.into_bytes(), log].concat(),
        };
        if let Some(file) = active {
            let _ = std::fs::remove_file(file);
        }
        show(&mut output);
        std::process::exit(0)
    }

    /// The compile itself: from the unit's kept IR where it may, bounded
    /// where the build gives a fallback, else as the build asks.
    fn compile(
        &self,
        flags: &[String],
        unit: Option<&Unit>,
        unit_name: &str,
        notes: &mut String,
    ) -> std::process::Output {
        // A unit whose decisions changed is optimised from its kept IR: its front end ran once.
        let from_ir = match unit {
            Some(unit) if std::env::var_os(FROM_IR_ENV).is_some() => {
                unit.backend_args(&self.args, flags)
            }
            _ => None,
        };
        match (from_ir, std::env::var_os(FALLBACK_ENV)) {
            (Some(backend), _) => self.compile_from_ir(flags, &backend, unit_name, notes),
            (None, None) => self.output(self.command(flags)),
            (None, Some(fallback)) => self.compile_bounded(flags, &fallback, unit_name),
        }
    }

    /// Optimises the unit from its kept IR with the `backend` arguments;
    /// where that fails, compiles it whole, and notes which it was.
    fn compile_from_ir(
        &self,
        flags: &[String],
        backend: &[OsString],
        unit_name: &str,
        notes: &mut String,
    ) -> std::process::Output {
        let mut compile = std::process::Command::new(&self.program);
        compile.arg0(&self.arg0).args(backend);
        let started = std::time::Instant::now();
        let mut output = self.output(compile);
        if output.status.success() {
            let took = started.elapsed().as_secs_f64();
            notes.push_str(&format!("kiln: {unit_name}: {FROM_IR} in {took:.3} s\n"));
        } else {
            let said = String::from_utf8_lossy(&output.stderr);
            let why = said.lines().find(|l| l.contains("error")).unwrap_or("");
            notes.push_str(&format!(
                "kiln: {unit_name}: {NOT_FROM_IR} ({}: {why})\n",
                output.status
            ));
            output = self.output(self.command(flags));
        }
        output
    }

    /// Compiles within [`LIMIT_BYTES`] and [`CPU_ENV`]'s seconds; a compile
    /// that fails within them is compiled again with the `fallback` flags.
    fn compile_bounded(
        &self,
        flags: &[String],
        fallback: &std::ffi::OsStr,
        unit_name: &str,
    ) -> std::process::Output {
        let cpu_s = std::env::var(CPU_ENV)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60);
        let mut bounded = self.command(flags);
        // SAFETY: setrlimit is async-signal-safe and touches only the child.
        unsafe { bounded.pre_exec(move || limit(cpu_s)) };
        let first = self.output(bounded);
        if first.status.success() {
            return first;
        }
        // What the failed compile said (remarks of a part of the unit) is dropped.
        let mut again = self.output(self.command(&flag_list(FALLBACK_ENV, fallback)));
        // A unit that does not compile with the stock decisions either is
        // broken, not bounded: its own errors are what the build says.
        if again.status.success() {
            let why = format!(
                "failed ({}) within its limits ({} GiB, {cpu_s} s of CPU)",
                first.status,
                LIMIT_BYTES >> 30
            );
            let note =
                format!("{FELL_BACK_START}{unit_name}{FELL_BACK_MIDDLE}{why}{FELL_BACK_END}\n");
            again.stderr.splice(0..0, note.into_bytes());
        }
        again
    }

    /// In discovery ([`IR_ENV`]), writes the IR of what a compile that
    /// succeeded compiled; a failure is a note in its `output`.
    fn write_ir(&self, flags: &[String], output: &mut std::process::Output) {
        let Some(dir) = std::env::var_os(IR_ENV) else {
            return;
        };
        if !output.status.success() {
            return;
        }
        let tag = std::process::id().to_string();
        let compiler = match self.is_rustc {
            true => Compiler::Rustc,
            false => Compiler::Clang,
        };
        for ir_args in ir_commands(compiler, &self.args, flags, Path::new(&dir), &tag) {
            let mut ir = std::process::Command::new(&self.program);
            ir.arg0(&self.arg0).args(&ir_args);
            match ir.output() {
                Ok(o) if o.status.success() => {}
                failed => {
                    let why = match failed {
                        Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                        Err(e) => e.to_string(),
                    };
                    let note = format!(
                        "kiln: no IR of {} for site features: {}\n",
                        sources(&self.args),
                        why.trim()
                    );
                    output.stderr.extend(note.into_bytes());
                }
            }
        }
    }
}

/// Records a unit in [`UNITS_ENV`]'s file: a warm start's next build leaves
/// it alone while its key stays.
fn record_unit(unit: &Unit) {
    if let (Some(file), Some(line)) = (std::env::var_os(UNITS_ENV), unit.record()) {
        use std::io::Write;
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file);
        // One write a line: make's compiles side by side do not interleave.
        let _ = appended.and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// After a workspace crate's compile: what it says where rustc reused its
/// kept `code`, and what is kept of it for the next build's.
fn keep_code(
    krate: &Crate,
    code: Code<'_>,
    unit_name: &str,
    output: &mut std::process::Output,
    notes: &mut String,
) {
    match code {
        _ if !output.status.success() => {}
        // rustc reused the code and said nothing of its decisions: what it said making it.
        Code::Kept(said) => {
            notes.push_str(&format!("kiln: {unit_name}: {CODE_KEPT}\n"));
            output.stderr.extend(remarks_of(said).into_bytes());
        }
        Code::Again | Code::New => {
            if let Code::Again = code {
                notes.push_str(&format!("kiln: {unit_name}: {CODE_AGAIN}\n"));
                output.stderr = crates::without_removal_warnings(&output.stderr);
            }
            krate.keep(&output.stderr);
        }
    }
}

/// Runs a compile and link in one command as its [`Split`]: each compile
/// through the wrapper again (`wrapper` is its name), as a unit of its own,
/// then the link with the real compiler `program` and no kiln flags (it
/// compiles nothing); exits as the first that fails or the link.
fn compile_then_link(
    wrapper: &OsString,
    program: &Path,
    arg0: &OsString,
    args: &[OsString],
    split: &Split,
) -> ! {
    let note = format!(
        "kiln: {}: compiled and linked in one command: compiled as {} units, then linked\n",
        sources(args),
        split.compiles.len()
    );
    show(&mut std::process::Output {
        status: std::process::ExitStatus::from_raw(0),
        stdout: Vec::new(),
        stderr: note.into_bytes(),
    });
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| fail(&format!("cannot locate kiln-worker to compile a unit: {e}")));
    for compile in &split.compiles {
        let status = std::process::Command::new(&exe)
            .arg0(wrapper)
            .args(compile)
            .status()
            .unwrap_or_else(|e| fail(&format!("cannot run {}: {e}", exe.display())));
        if !status.success() {
            std::process::exit(exit_code(status))
        }
    }
    let e = std::process::Command::new(program)
        .arg0(arg0)
        .args(&split.link)
        .exec();
    fail(&format!("cannot run {}: {e}", program.display()))
}

/// Writes a compile's output whole, under the build's output lock: compiles
/// that make runs side by side (`-j`) would otherwise interleave their
/// remarks mid-line. What it said goes to [`SAID_ENV`]'s file too, where
/// no other job's output can cut it.
fn show(output: &mut std::process::Output) {
    use std::io::Write;
    let lock = std::env::var_os(LOCK_ENV).and_then(|path| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        // SAFETY: flock on a descriptor we own; released when `file` closes.
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) };
        Some(file)
    });
    if let Some(said) = std::env::var_os(SAID_ENV) {
        let file = std::fs::OpenOptions::new().append(true).open(said);
        let _ = file.and_then(|mut f| f.write_all(&output.stderr));
    }
    let _ = std::io::stdout().write_all(&output.stdout);
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().write_all(&output.stderr);
    let _ = std::io::stderr().flush();
    drop(lock);
}

/// The status to exit with for a compile's: its code, or 128 + its signal as a shell gives.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// The bounded compile's limits, set in the child before it execs.
fn limit(cpu_s: u64) -> std::io::Result<()> {
    for (resource, value) in [(libc::RLIMIT_AS, LIMIT_BYTES), (libc::RLIMIT_CPU, cpu_s)] {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: a plain system call on a live struct.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The inlining remarks among what rustc said (one JSON message a line
/// under cargo); its warnings it says again itself when it reuses a crate.
fn remarks_of(said: &str) -> String {
    said.lines()
        .filter(|line| line.contains(" inlined into "))
        .flat_map(|line| [line, "\n"])
        .collect()
}

/// Whether a dependency's crate is among `dependency-crates` (a package's
/// `-` is a crate's `_`).
fn opted_in(crate_name: &str) -> bool {
    let Some(list) = std::env::var_os(CRATES_ENV) else {
        return false;
    };
    flag_list(CRATES_ENV, &list)
        .iter()
        .any(|c| c.replace('-', "_") == crate_name)
}

/// What messages call the crate a rustc invocation compiles: `crate NAME`,
/// with its kind where it is not a library (`crate brotli (bin)`), since a
/// package's library and binary often share a name.
fn crate_label(args: &[OsString]) -> String {
    let kind = match args.iter().position(|a| a == "--crate-type") {
        Some(i) => args.get(i + 1).map(|k| k.to_string_lossy().into_owned()),
        // cargo compiles a test target with `--test` and no type.
        None => args.iter().any(|a| a == "--test").then(|| "test".into()),
    };
    match kind.filter(|k| !k.ends_with("lib")) {
        Some(kind) => format!("crate {} ({kind})", crate_name(args)),
        None => format!("crate {}", crate_name(args)),
    }
}

/// The crate a rustc invocation compiles (`___` when cargo only asks what
/// rustc can do; empty without `--crate-name`).
fn crate_name(args: &[OsString]) -> String {
    args.iter()
        .position(|a| a == "--crate-name")
        .and_then(|i| args.get(i + 1))
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The source files an invocation compiles, for messages.
fn sources(args: &[OsString]) -> String {
    let names: Vec<_> = args
        .iter()
        .filter(|a| compiles(std::slice::from_ref(a)))
        .map(|a| a.to_string_lossy())
        .collect();
    names.join(" ")
}

fn flag_list(var: &str, json: &std::ffi::OsStr) -> Vec<String> {
    serde_json::from_str(&json.to_string_lossy())
        .unwrap_or_else(|e| fail(&format!("{var} is not a list of strings: {e}")))
}

/// Whether an invocation names a source file to compile.
fn compiles(args: &[OsString]) -> bool {
    args.iter().any(is_source)
}

/// `program` on the `PATH` `path`.
pub(crate) fn find(program: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn fail(message: &str) -> ! {
    eprintln!("kiln compiler wrapper: {message}");
    std::process::exit(127)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_invocations_that_compile_a_source_get_the_flags() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(compiles(&args(&["-O2", "-c", "lvm.c", "-o", "lvm.o"])));
        assert!(compiles(&args(&["main.cpp", "-o", "bench"])));
        assert!(!compiles(&args(&["lvm.o", "lapi.o", "-o", "lua", "-lm"])));
        assert!(!compiles(&args(&["--version"])));
        assert!(!compiles(&args(&["-Wl,-soname,x.c"])));
    }

    #[test]
    fn a_crate_is_named_with_its_kind_unless_it_is_a_library() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        let rustc = |more: &[&str]| {
            crate_label(&args(
                &[&["--crate-name", "brotli", "--edition=2015"], more].concat(),
            ))
        };
        assert_eq!(rustc(&["--crate-type", "lib"]), "crate brotli");
        assert_eq!(rustc(&["--crate-type", "rlib"]), "crate brotli");
        assert_eq!(rustc(&["--crate-type", "bin"]), "crate brotli (bin)");
        assert_eq!(
            rustc(&["--crate-type", "proc-macro"]),
            "crate brotli (proc-macro)"
        );
        assert_eq!(rustc(&["--test"]), "crate brotli (test)");
    }

    /// A worker whose binary was replaced while it ran refuses to wrap compilers (its links
    /// would dangle and the build would run the real compiler without kiln's flags).
    #[test]
    fn a_replaced_worker_binary_is_named_not_linked() {
        let tmp = tempfile::tempdir().unwrap();
        let exe = tmp.path().join("kiln-worker");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        assert_eq!(still_there(&exe), Ok(()));
        let replaced = tmp.path().join("kiln-worker (deleted)");
        let why = still_there(&replaced).unwrap_err();
        assert!(
            why.contains("kiln-worker (deleted)") && why.contains("restart"),
            "{why}"
        );
    }
}
