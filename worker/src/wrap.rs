//! kiln's compiler flags for builds that do not run the compiler themselves
//! (make, CMake, a build script): the build's `PATH` starts with a folder
//! whose `clang`, `clang++`, `cc` and `c++` are kiln-worker, which runs the
//! real clang with kiln's flags added to each invocation that compiles a
//! source file. The build's own command and files are left as they are; the
//! compiler's remarks reach the build log as the build passes them on.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The flags to add, as a JSON list of strings.
const FLAGS_ENV: &str = "KILN_WRAP_FLAGS";

/// The `PATH` the real compilers are found on (the build's, without the wrapper folder).
const PATH_ENV: &str = "KILN_WRAP_PATH";

/// The names the wrapper answers to, and the compiler each runs: a Makefile's
/// default `cc` gets clang too, since the benchmark says its compiler is clang.
const NAMES: &[(&str, &str)] = &[
    ("clang", "clang"),
    ("clang++", "clang++"),
    ("cc", "clang"),
    ("c++", "clang++"),
];

/// Arguments that make an invocation compile a source file (not only link).
const SOURCE_EXTENSIONS: &[&str] = &[
    "c", "cc", "cpp", "cxx", "c++", "C", "m", "mm", "i", "ii", "ll", "bc",
];

/// Makes `dir` the build's wrapper folder for `flags`; returns the variables
/// to set in the build's environment, whose `PATH` is `path`.
pub fn prepare(dir: &Path, flags: &[String], path: &str) -> Result<Vec<(String, String)>, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot locate kiln-worker for the compiler wrapper: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, _) in NAMES {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&exe, &link)
            .map_err(|e| format!("cannot create {}: {e}", link.display()))?;
    }
    let flags = serde_json::to_string(flags).expect("strings serialize");
    Ok(vec![
        ("PATH".into(), format!("{}:{path}", dir.display())),
        (FLAGS_ENV.into(), flags),
        (PATH_ENV.into(), path.into()),
    ])
}

/// When this process was started as a wrapped compiler, runs the real one
/// in its place (never returns); otherwise returns at once.
pub fn run_if_wrapped() {
    let mut args = std::env::args_os();
    let Some(argv0) = args.next() else { return };
    let name = Path::new(&argv0).file_name().and_then(|n| n.to_str());
    let Some((_, real)) = NAMES.iter().find(|(n, _)| Some(*n) == name) else {
        return;
    };
    let (Some(flags), Some(path)) = (std::env::var_os(FLAGS_ENV), std::env::var_os(PATH_ENV))
    else {
        return;
    };
    let args: Vec<OsString> = args.collect();
    let flags: Vec<String> = match serde_json::from_str(&flags.to_string_lossy()) {
        Ok(flags) => flags,
        Err(e) => fail(&format!("{FLAGS_ENV} is not a list of strings: {e}")),
    };
    let Some(program) = find(real, &path) else {
        fail(&format!(
            "'{real}' is not on PATH={}",
            path.to_string_lossy()
        ))
    };
    let mut command = std::process::Command::new(&program);
    command.arg0(real).args(&args);
    if compiles(&args) {
        command.args(&flags);
    }
    let e = command.exec();
    fail(&format!("cannot run {}: {e}", program.display()))
}

/// Whether an invocation names a source file to compile.
fn compiles(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        let a = Path::new(a);
        !a.to_string_lossy().starts_with('-')
            && a.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| SOURCE_EXTENSIONS.contains(&e))
    })
}

fn find(program: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
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
}
