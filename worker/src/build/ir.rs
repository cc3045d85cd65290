//! The front-end compiles that write a unit's LLVM IR before any inlining
//! (clang's `-S -emit-llvm -Xclang -disable-llvm-optzns`, rustc's
//! `--emit=llvm-ir -C no-prepopulate-passes`), run beside a discovery's stock
//! build for the sites' features ([`crate::discover::features::ir`] reads it).

use std::ffi::OsString;
use std::path::Path;

/// Arguments that make clang write a unit's IR as its front end made it.
const IR_ARGS: &[&str] = &["-S", "-emit-llvm", "-Xclang", "-disable-llvm-optzns"];

/// Options of a compile that do not carry over to the IR compile: what to
/// produce and where, and dependency files (which the real compile writes).
const DROPPED: &[&str] = &["-c", "-S", "-E", "-MD", "-MMD", "-M", "-MM", "-MP"];
/// The same, with a value in the next argument.
const DROPPED_WITH_VALUE: &[&str] = &["-o", "-MF", "-MT", "-MQ"];

/// One command line (after the compiler) per source file of a clang compile
/// `args`: the compile's own options, `flags` (kiln's, for line tables), and
/// the IR's output `out_dir/<tag>-<k>.ll`.
pub fn clang_commands(
    args: &[OsString],
    sources: &[&OsString],
    flags: &[String],
    out_dir: &Path,
    tag: &str,
) -> Vec<Vec<OsString>> {
    let mut common: Vec<OsString> = Vec::new();
    let mut skip_next = false;
    for arg in args {
        let text = arg.to_string_lossy();
        if std::mem::take(&mut skip_next) {
            continue;
        }
        if DROPPED_WITH_VALUE.contains(&text.as_ref()) {
            skip_next = true;
        } else if !(DROPPED.contains(&text.as_ref())
            || (text.starts_with("-o") && text.len() > 2)
            || sources.contains(&arg))
        {
            common.push(arg.clone());
        }
    }
    sources
        .iter()
        .enumerate()
        .map(|(k, source)| {
            let mut command = common.clone();
            command.extend(flags.iter().map(OsString::from));
            command.extend(IR_ARGS.iter().map(OsString::from));
            command.push((*source).clone());
            command.push("-o".into());
            command.push(out_dir.join(format!("{tag}-{k}.ll")).into_os_string());
            command
        })
        .collect()
}

/// Options of a rustc invocation that do not carry over to its IR compile
/// (what to emit and where), with their value in the next argument.
const RUSTC_DROPPED_WITH_VALUE: &[&str] = &["-o", "--emit", "--out-dir"];

/// The command line (after rustc) that writes the IR of the crate a rustc
/// invocation `args` compiles to `out_dir/<tag>-0.ll`: before any LLVM pass
/// (`-C no-prepopulate-passes`), with `flags` (kiln's: one codegen unit,
/// line tables) and a fresh incremental folder of its own (incremental
/// compilation keeps the MIR inliner off, as in the builds whose sites these
/// are).
pub fn rustc_command(
    args: &[OsString],
    flags: &[String],
    out_dir: &Path,
    tag: &str,
) -> Vec<OsString> {
    let all: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .chain(flags.iter().cloned())
        .collect();
    let mut command: Vec<OsString> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let arg = all[i].as_str();
        let next = all.get(i + 1).map(String::as_str).unwrap_or("");
        let codegen_value = arg.strip_prefix("-C").filter(|v| !v.is_empty());
        if RUSTC_DROPPED_WITH_VALUE.contains(&arg)
            || (arg == "-C" && next.starts_with("incremental="))
        {
            i += 2;
            continue;
        }
        let dropped = ["--emit=", "--out-dir="].iter().any(|p| arg.starts_with(p))
            || codegen_value.is_some_and(|v| v.starts_with("incremental="));
        if !dropped {
            command.push(arg.into());
        }
        i += 1;
    }
    let incremental = out_dir.join(format!("{tag}-incremental"));
    command.extend(
        [
            "-C".to_string(),
            format!("incremental={}", incremental.display()),
            "-C".into(),
            "no-prepopulate-passes".into(),
            "--emit=llvm-ir".into(),
            "-o".into(),
            out_dir.join(format!("{tag}-0.ll")).display().to_string(),
        ]
        .map(OsString::from),
    );
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ir_commands_keep_the_compile_options() {
        let args: Vec<OsString> = [
            "-O2", "-Iinc", "-c", "a.c", "-o", "a.o", "-MD", "-MF", "a.d",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let source = OsString::from("a.c");
        let commands = clang_commands(&args, &[&source], &["-g1".into()], Path::new("/ir"), "7");
        let expected: Vec<OsString> = [
            "-O2",
            "-Iinc",
            "-g1",
            "-S",
            "-emit-llvm",
            "-Xclang",
            "-disable-llvm-optzns",
            "a.c",
            "-o",
            "/ir/7-0.ll",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(commands, [expected]);
    }

    #[test]
    fn rustc_ir_command_writes_only_the_ir() {
        let args: Vec<OsString> = [
            "--crate-name",
            "app",
            "--emit=dep-info,link",
            "-C",
            "opt-level=3",
            "--out-dir",
            "t",
            "src/main.rs",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let flags: Vec<String> = ["-C", "incremental=/w/inc", "-C", "codegen-units=1"]
            .map(String::from)
            .to_vec();
        let command = rustc_command(&args, &flags, Path::new("/ir"), "9");
        let expected: Vec<OsString> = [
            "--crate-name",
            "app",
            "-C",
            "opt-level=3",
            "src/main.rs",
            "-C",
            "codegen-units=1",
            "-C",
            "incremental=/ir/9-incremental",
            "-C",
            "no-prepopulate-passes",
            "--emit=llvm-ir",
            "-o",
            "/ir/9-0.ll",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(command, expected);
    }
}
