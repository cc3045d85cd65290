//! Per-unit object reuse in step builds under the compiler wrapper: a clang
//! compile of one source file (`-c SRC -o OBJ`) whose inputs and decisions are
//! those of a compile done before takes that compile's object and remarks
//! instead of compiling again, so a step that changes the decisions of one
//! unit recompiles that unit only.
//!
//! A unit's inputs are the compiler, its arguments, the working folder (it is
//! in the object's debug info) and the preprocessed source (headers and macros
//! included). Its decisions are the replay file's lines whose caller is a
//! function the unit defines, read from its IR before any pass the first time
//! the unit is compiled (remarks would not do: they name only the functions
//! that a decision inlined into). The cache lives under `<rundir>/objects/`:
//! `<unit>.names` (the functions' symbols and debug names), and per key `<key>.o` with the
//! compile's output `<key>.log` and their content hash `<key>.sum`, written
//! last; files are written whole and renamed into place, and the oldest go
//! past [`MAX_FILES`]. A restore checks the object and output against the
//! hash: an entry that changed on disk is removed, the unit compiled again,
//! and the build log says so ([`DAMAGED`]).
//!
//! Front end once: a unit's IR before any LLVM pass (`<inputs>.ll`, its hash
//! in `<inputs>.llsum`) is written once per inputs, with kiln's flags, and
//! kept; it gives the unit's functions, and with [`FROM_IR_ENV`] a unit whose
//! decisions changed is optimised and code-generated from it
//! ([`Unit::backend_args`]) instead of compiled whole, which gives the same object
//! byte for byte (clang's `-save-temps` splits a compile the same way). A
//! unit whose kept IR does not compile is compiled whole, and the build log
//! says so ([`NOT_FROM_IR`]).

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_protocol::decision::ContentHash;

use super::llvm_inline::REPLAY_FLAG;

/// The folder of the cache, given to the wrapper by the worker.
pub const OBJECTS_ENV: &str = "KILN_WRAP_OBJECTS";

/// What the build log says of an entry found changed, for the worker to find.
pub const DAMAGED: &str = "cached object damaged";

/// The variable that makes the wrapper compile a changed unit from its kept IR.
pub const FROM_IR_ENV: &str = "KILN_WRAP_FROM_IR";

/// What the build log says of a unit whose kept IR did not compile, for the worker to find.
pub const NOT_FROM_IR: &str = "its kept IR did not compile; compiled whole";

/// What the build log says of a unit compiled from its kept IR.
pub const FROM_IR: &str = "optimised from its kept IR (front end skipped)";

/// Most files kept; past it the older half goes.
const MAX_FILES: usize = 8192;

/// Arguments that make clang write dependency files, with the ones that take a value.
const DEPENDENCY_FLAGS: &[&str] = &["-MD", "-MMD", "-MP"];
const DEPENDENCY_OPTIONS: &[&str] = &["-MF", "-MT", "-MQ"];

/// The extensions of the source files a clang invocation compiles.
const SOURCE_EXTENSIONS: &[&str] = &[
    "c", "cc", "cpp", "cxx", "c++", "C", "m", "mm", "i", "ii", "ll", "bc",
];

/// Whether a compiler argument is a source file to compile (not an option).
pub fn is_source(arg: &OsString) -> bool {
    let path = Path::new(arg);
    !arg.to_string_lossy().starts_with('-')
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SOURCE_EXTENSIONS.contains(&e))
}

/// The output a compile of one source to an object (`-c SRC`) writes when
/// it names none (`-o`): clang's own choice, the source's name with `.o` in
/// the working folder. Named, such a compile is a unit like any other (Lua's
/// makefile compiles its parser and lexer this way).
pub fn default_object(args: &[OsString]) -> Option<OsString> {
    let mut sources = args.iter().filter(|a| is_source(a));
    let source = sources.next().filter(|_| sources.next().is_none())?;
    let named = |flag: &str| args.iter().any(|a| a == flag);
    if !named("-c") || named("-o") || named("-S") || named("-E") {
        return None;
    }
    let mut object = Path::new(source).file_stem()?.to_os_string();
    object.push(".o");
    Some(object)
}

/// One compile of one source file to an object.
pub struct Unit {
    dir: PathBuf,
    object: PathBuf,
    /// What identifies the unit's inputs.
    inputs: ContentHash,
    /// The replay file the compile reads.
    replay: PathBuf,
    /// The compiler and the compile's options (no output, no dependency
    /// files): what writes the unit's IR before any pass, with `flags` (kiln's).
    program: PathBuf,
    options: Vec<OsString>,
    flags: Vec<String>,
    /// The kept IR once [`Unit::front_end`] has found or made it.
    ir: std::cell::OnceCell<Option<PathBuf>>,
}

impl Unit {
    /// The unit an invocation compiles, if it is one source to one object
    /// and its preprocessed source can be read; `flags` are kiln's.
    pub fn of(dir: &Path, program: &Path, args: &[OsString], flags: &[String]) -> Option<Unit> {
        let replay = flags
            .iter()
            .find_map(|f| f.strip_prefix(REPLAY_FLAG))
            .map(PathBuf::from)?;
        let out = args.iter().position(|a| a == "-o")?;
        let object = PathBuf::from(args.get(out + 1)?);
        if !args.iter().any(|a| a == "-c") {
            return None;
        }
        let mut preprocess = Vec::new();
        let mut skip = false;
        for (i, a) in args.iter().enumerate() {
            let text = a.to_string_lossy();
            if std::mem::take(&mut skip) || i == out || i == out + 1 || text == "-c" {
                continue;
            }
            if DEPENDENCY_OPTIONS.contains(&text.as_ref()) {
                skip = true;
                continue;
            }
            if !DEPENDENCY_FLAGS.contains(&text.as_ref()) {
                preprocess.push(a.clone());
            }
        }
        let cwd = std::env::current_dir().ok()?;
        let mut bytes = Vec::new();
        for part in [program.as_os_str(), cwd.as_os_str()]
            .into_iter()
            .chain(args.iter().map(OsString::as_os_str))
        {
            bytes.extend(part.as_encoded_bytes());
            bytes.push(0);
        }
        // The compiler's own file: an upgrade in place is another compiler.
        let real = std::fs::canonicalize(program).ok()?;
        let meta = std::fs::metadata(&real).ok()?;
        let modified = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        bytes.extend(real.as_os_str().as_encoded_bytes());
        bytes.extend(meta.len().to_le_bytes());
        bytes.extend(modified.as_nanos().to_le_bytes());
        // kiln's flags but the replay file's path (a slot's own): its lines count instead.
        for f in flags.iter().filter(|f| !f.starts_with(REPLAY_FLAG)) {
            bytes.extend(f.as_bytes());
            bytes.push(0);
        }
        let inputs = Self::inputs(dir, program, &preprocess, bytes)?;
        Some(Unit {
            dir: dir.to_path_buf(),
            object,
            inputs,
            replay,
            program: program.to_path_buf(),
            options: preprocess,
            flags: flags.to_vec(),
            ir: std::cell::OnceCell::new(),
        })
    }

    /// The hash of a compile's inputs: `command` (what identifies the
    /// compile) and its preprocessed source. The preprocessor runs once per
    /// command and source file; a manifest (`<direct>.deps`, named by the
    /// command and the source file's bytes) then keeps the inputs' hash with
    /// every file the preprocessor read and their hashes, and while those
    /// files are unchanged the hash is taken from it: a step of a 34-unit
    /// C++ program would otherwise preprocess every unit again.
    fn inputs(
        dir: &Path,
        program: &Path,
        preprocess: &[OsString],
        mut command: Vec<u8>,
    ) -> Option<ContentHash> {
        let source = preprocess.iter().find(|a| is_source(a))?;
        let mut direct = command.clone();
        direct.extend(std::fs::read(source).ok()?);
        let manifest = dir.join(format!("{}.deps", ContentHash::of(&direct)));
        if let Some(inputs) = read_manifest(&manifest) {
            return Some(inputs);
        }
        let preprocessed = Command::new(program)
            .args(preprocess)
            .args(["-E", "-o", "-"])
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        command.extend(&preprocessed.stdout);
        let inputs = ContentHash::of(&command);
        write_manifest(
            &manifest,
            inputs,
            &String::from_utf8_lossy(&preprocessed.stdout),
        );
        Some(inputs)
    }

    fn functions_file(&self) -> PathBuf {
        // `.names`: `.functions` files of earlier workers hold symbols only,
        // and would key a C++ unit without its methods' lines.
        self.dir.join(format!("{}.names", self.inputs))
    }

    /// Every function the unit defines, static ones included: the callers a
    /// replay line of this unit can name. Read from the unit's IR before any
    /// pass (once per inputs, then kept), never from a compile's remarks,
    /// which name only the functions that some decision inlined into: a
    /// decision about a call in another function would then be left out of
    /// the key, and a changed decision would reuse a stale object.
    fn functions(&self) -> Option<BTreeSet<String>> {
        if let Ok(text) = std::fs::read_to_string(self.functions_file()) {
            return Some(text.lines().map(str::to_string).collect());
        }
        let ir = std::fs::read_to_string(self.front_end()?).ok()?;
        let functions = defined_functions(&ir);
        let text: String = functions.iter().map(|f| format!("{f}\n")).collect();
        write_whole(&self.functions_file(), text.as_bytes());
        Some(functions)
    }

    /// The unit's IR as its front end writes it, before any LLVM pass: made
    /// once per inputs and kept, checked against its hash when read. kiln's
    /// flags give every function its debug name (line tables), which is
    /// what a call-site chain holds. Read (and hashed) once per compile.
    fn front_end(&self) -> Option<PathBuf> {
        self.ir.get_or_init(|| self.kept_ir()).clone()
    }

    fn kept_ir(&self) -> Option<PathBuf> {
        let ir = self.dir.join(format!("{}.ll", self.inputs));
        let sum = self.dir.join(format!("{}.llsum", self.inputs));
        if let (Ok(bytes), Ok(kept)) = (std::fs::read(&ir), std::fs::read_to_string(&sum)) {
            if ContentHash::of(&bytes).to_string() == kept.trim() {
                return Some(ir);
            }
        }
        let out = Command::new(&self.program)
            .args(&self.options)
            .args(&self.flags)
            .args([
                "-Xclang",
                "-disable-llvm-optzns",
                "-S",
                "-emit-llvm",
                "-o",
                "-",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        write_whole(&ir, &out.stdout);
        write_whole(&sum, ContentHash::of(&out.stdout).to_string().as_bytes());
        Some(ir)
    }

    /// The command line (after the compiler) that optimises the unit and
    /// generates its object from its kept IR: the compile's own arguments
    /// `args` without its source, language and dependency files, then
    /// `flags`, then the IR. None when the IR cannot be had (a front end
    /// that fails: the whole compile says why).
    pub fn backend_args(&self, args: &[OsString], flags: &[String]) -> Option<Vec<OsString>> {
        let ir = self.front_end()?;
        let mut out = Vec::with_capacity(args.len() + flags.len() + 4);
        let mut skip = false;
        for arg in args {
            let text = arg.to_string_lossy();
            if std::mem::take(&mut skip) {
                continue;
            }
            if text == "-x" || DEPENDENCY_OPTIONS.contains(&text.as_ref()) {
                skip = true;
            } else if !(is_source(arg)
                || (text.starts_with("-x") && text.len() > 2)
                || DEPENDENCY_FLAGS.contains(&text.as_ref()))
            {
                out.push(arg.clone());
            }
        }
        out.extend(flags.iter().map(OsString::from));
        // The front end's options (-I, -D, -std) mean nothing to IR.
        out.extend(["-Wno-unused-command-line-argument", "-x", "ir"].map(OsString::from));
        out.push(ir.into_os_string());
        Some(out)
    }

    /// The key of this unit under the replay file's decisions.
    fn key(&self) -> Option<ContentHash> {
        let callers = self.functions()?;
        let replay = std::fs::read_to_string(&self.replay).ok()?;
        let callers = callers.iter().map(String::as_str);
        Some(ReplayLines::new(&replay).key(&self.inputs.0, callers))
    }

    /// What a later warm start needs to know of this compile: the unit's
    /// inputs and key, its source and its object (see [`super::warm`]).
    pub fn record(&self) -> Option<String> {
        let cwd = std::env::current_dir().ok()?;
        let source = self.options.iter().find(|a| is_source(a))?;
        let at = |p: &Path| lexical(&cwd.join(p)).display().to_string();
        let (source, object) = (at(Path::new(source)), at(&self.object));
        // One line a unit: names with a tab or a newline are left out.
        if [&source, &object].iter().any(|p| p.contains(['\t', '\n'])) {
            return None;
        }
        Some(format!(
            "{}\t{}\t{source}\t{object}\n",
            self.inputs,
            self.key()?
        ))
    }

    /// Puts the object of an earlier compile with the same inputs and
    /// decisions in place, once its object and output match their hash.
    pub fn restore(&self) -> Restore {
        let Some(key) = self.key() else {
            return Restore::Miss;
        };
        let file = |ext: &str| self.dir.join(format!("{key}.{ext}"));
        let Ok(sum) = std::fs::read_to_string(file("sum")) else {
            return Restore::Miss;
        };
        let (Ok(object), Ok(log)) = (std::fs::read(file("o")), std::fs::read(file("log"))) else {
            return Restore::Miss;
        };
        let found = entry_hash(&object, &log);
        if found.to_string() != sum.trim() {
            for ext in ["sum", "o", "log"] {
                let _ = std::fs::remove_file(file(ext));
            }
            return Restore::Damaged(format!(
                "{DAMAGED}: {} and its output hash to {}, not to the {} kept",
                file("o").display(),
                found.short(),
                sum.get(..16).unwrap_or(&sum)
            ));
        }
        match std::fs::write(&self.object, &object) {
            Ok(()) => Restore::Hit(log),
            Err(_) => Restore::Miss,
        }
    }

    /// Keeps a successful compile's object and output (`log`, its remarks).
    pub fn keep(&self, log: &[u8]) {
        let Some(key) = self.key() else { return };
        let Ok(object) = std::fs::read(&self.object) else {
            return;
        };
        write_whole(&self.dir.join(format!("{key}.o")), &object);
        write_whole(&self.dir.join(format!("{key}.log")), log);
        let sum = entry_hash(&object, log).to_string();
        write_whole(&self.dir.join(format!("{key}.sum")), sum.as_bytes());
        evict(&self.dir);
    }
}

/// A replay file's lines by their caller (the outermost function of the
/// site), read once for the keys of many units: a large program's replay
/// file has thousands of lines, and a warm start keys each of its units.
pub(crate) struct ReplayLines<'a>(HashMap<&'a str, Vec<&'a str>>);

impl<'a> ReplayLines<'a> {
    pub(crate) fn new(replay: &'a str) -> Self {
        let mut by_caller: HashMap<&str, Vec<&str>> = HashMap::new();
        for line in replay.lines() {
            if let Some(caller) = replay_caller(line) {
                by_caller.entry(caller).or_default().push(line);
            }
        }
        ReplayLines(by_caller)
    }

    /// The callers the file has lines for.
    pub(crate) fn callers(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.0.keys().copied()
    }

    /// The hash of `seed` and the lines whose caller is among `callers`, in
    /// sorted order: the decisions of a unit (`seed` its inputs) or of a crate.
    pub(crate) fn key<'c>(
        &self,
        seed: &[u8],
        callers: impl IntoIterator<Item = &'c str>,
    ) -> ContentHash {
        let callers: BTreeSet<&str> = callers.into_iter().collect();
        let mut lines: Vec<&str> = callers
            .into_iter()
            .filter_map(|c| self.0.get(c))
            .flatten()
            .copied()
            .collect();
        lines.sort_unstable();
        let mut bytes = seed.to_vec();
        for l in lines {
            bytes.extend(l.as_bytes());
            bytes.push(b'\n');
        }
        ContentHash::of(&bytes)
    }
}

/// The key under `replay` of the unit whose inputs are `inputs`, its
/// functions kept in the cache `dir` by an earlier compile (as [`Unit::key`]).
pub(crate) fn key_of(
    dir: &Path,
    inputs: &ContentHash,
    replay: &ReplayLines,
) -> Option<ContentHash> {
    let names = std::fs::read_to_string(dir.join(format!("{inputs}.names"))).ok()?;
    Some(replay.key(&inputs.0, names.lines()))
}

/// The output (remarks) kept in the cache `dir` with the object of `key`,
/// if the entry is whole (matches its hash).
pub(crate) fn kept_output(dir: &Path, key: &ContentHash) -> Option<Vec<u8>> {
    let file = |ext: &str| dir.join(format!("{key}.{ext}"));
    let sum = std::fs::read_to_string(file("sum")).ok()?;
    let (object, log) = (
        std::fs::read(file("o")).ok()?,
        std::fs::read(file("log")).ok()?,
    );
    (entry_hash(&object, &log).to_string() == sum.trim()).then_some(log)
}

/// `path` without its `.` and `..` parts, read as written (no links followed).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The inputs' hash a manifest keeps, if every file it lists still hashes as kept.
fn read_manifest(manifest: &Path) -> Option<ContentHash> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let mut lines = text.lines();
    let inputs = lines.next()?;
    for line in lines {
        let (hash, path) = line.split_once(' ')?;
        if ContentHash::of(&std::fs::read(path).ok()?).to_string() != hash {
            return None;
        }
    }
    ContentHash::try_from(inputs.to_string()).ok()
}

/// Keeps `inputs` with every file the preprocessed source `text` names in
/// its line markers (`# 12 "/usr/include/stdio.h" 2 3`) and their hashes.
fn write_manifest(manifest: &Path, inputs: ContentHash, text: &str) {
    let files: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("# ")?;
            let (line, rest) = rest.split_once(' ')?;
            line.bytes().all(|b| b.is_ascii_digit()).then_some(())?;
            let quoted = rest.strip_prefix('"')?;
            quoted.rsplit_once('"').map(|(path, _)| path)
        })
        .filter(|p| !p.starts_with('<'))
        .collect();
    let mut out = format!("{inputs}\n");
    for file in files {
        // A name with escapes (a quote, a backslash) is not looked up: no manifest.
        if file.contains('\\') {
            return;
        }
        let Ok(bytes) = std::fs::read(file) else {
            return;
        };
        // Their expansion changes from compile to compile: no manifest.
        if [&b"__DATE__"[..], b"__TIME__"]
            .iter()
            .any(|m| bytes.windows(m.len()).any(|w| w == *m))
        {
            return;
        }
        out.push_str(&format!("{} {file}\n", ContentHash::of(&bytes)));
    }
    write_whole(manifest, out.as_bytes());
}

/// Whether `clang` compiles a unit from its kept IR on this machine, tried
/// on a one-function unit through the path a step takes; why not otherwise.
pub fn from_ir_works(clang: &Path) -> Result<(), String> {
    let tmp = tempfile::tempdir().map_err(|e| format!("no scratch folder: {e}"))?;
    let at = |name: &str| tmp.path().join(name).into_os_string();
    std::fs::write(tmp.path().join("u.c"), "int f(int x) { return x + 1; }\n")
        .and_then(|()| std::fs::write(tmp.path().join("replay.txt"), ""))
        .map_err(|e| format!("cannot write in {}: {e}", tmp.path().display()))?;
    let flags = vec![
        "-gline-tables-only".to_string(),
        "-mllvm".to_string(),
        format!(
            "-cgscc-inline-replay={}",
            at("replay.txt").to_string_lossy()
        ),
    ];
    let args: Vec<OsString> = vec!["-O2".into(), "-c".into(), at("u.c"), "-o".into(), at("u.o")];
    let unit = Unit::of(tmp.path(), clang, &args, &flags)
        .ok_or_else(|| format!("{} does not preprocess a C file", clang.display()))?;
    let backend = unit
        .backend_args(&args, &flags)
        .ok_or_else(|| format!("{} writes no IR before its passes", clang.display()))?;
    let out = Command::new(clang)
        .args(&backend)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{} does not compile its own IR: {}",
            clang.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )),
    }
}

/// What the cache gave for a unit.
pub enum Restore {
    /// The object is in place; the compile's output.
    Hit(Vec<u8>),
    /// Not cached: compile.
    Miss,
    /// Cached but changed on disk, now removed: compile; why, for the build log.
    Damaged(String),
}

/// The hash an entry's `.sum` keeps: of its object, then its output.
fn entry_hash(object: &[u8], log: &[u8]) -> ContentHash {
    let mut bytes = (object.len() as u64).to_le_bytes().to_vec();
    bytes.extend(object);
    bytes.extend(log);
    ContentHash::of(&bytes)
}

/// The functions an LLVM IR module defines, by every name a replay line may
/// give them: the symbol (`define ... @NAME(` or `@"NAME"(`) and the debug
/// name (`DISubprogram(name: "NAME"`), which is what a call-site chain holds:
/// a C++ method `_ZN10Arg_parser8set_nameEPKc` is `set_name` there. A name too
/// many only makes a key cover more lines.
fn defined_functions(ir: &str) -> BTreeSet<String> {
    const DEBUG_NAME: &str = "DISubprogram(name: \"";
    let symbols = ir
        .lines()
        .filter(|l| l.starts_with("define "))
        .filter_map(|l| {
            let name = &l[l.find('@')? + 1..];
            match name.strip_prefix('"') {
                Some(quoted) => quoted.split_once('"').map(|(n, _)| n.to_string()),
                None => name.split_once('(').map(|(n, _)| n.to_string()),
            }
        });
    let debug_names = ir.lines().filter_map(|l| {
        let name = &l[l.find(DEBUG_NAME)? + DEBUG_NAME.len()..];
        name.split_once('"').map(|(n, _)| unescape_ir(n))
    });
    symbols.chain(debug_names).collect()
}

/// An LLVM IR string's text: `\XX` is the byte of hex XX.
fn unescape_ir(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The caller a replay line names: `x: 'CALLEE' inlined into 'CALLER' at callsite ...;`.
fn replay_caller(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once(" into '")?;
    rest.split_once("' at callsite ").map(|(caller, _)| caller)
}

/// Writes a file whole: into a file of this process, renamed into place, so a
/// reader finds the old file or the new one; whether it was written.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> bool {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    // A write that failed partway (a full disk) leaves no temporary behind either.
    let written = std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_ok();
    if !written {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes the older half of the cache once it holds more than [`MAX_FILES`].
fn evict(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= MAX_FILES {
        return;
    }
    files.sort();
    for (_, path) in &files[..files.len() / 2] {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defined_functions_are_read_from_ir() {
        let ir = "declare i32 @printf(i8*, ...)\n\
                  define internal i32 @callbinTM(i32 %0) #0 !dbg !7 {\n\
                  define dso_local i32 @\"odd.name\"() {\n\
                  define i32 @main() {\n";
        let found: Vec<String> = defined_functions(ir).into_iter().collect();
        assert_eq!(found, ["callbinTM", "main", "odd.name"]);
    }

    /// A C++ method's chain names it by its debug name, not its symbol: both count.
    #[test]
    fn defined_functions_include_their_debug_names() {
        let ir = "define dso_local void @_ZN1A8set_nameEPKc(%struct.A* %0) !dbg !9 {\n\
                  !9 = distinct !DISubprogram(name: \"set_name\", scope: !1, file: !1)\n\
                  !12 = distinct !DISubprogram(name: \"find<\\22x\\22>\", scope: !1)\n";
        let found: Vec<String> = defined_functions(ir).into_iter().collect();
        assert_eq!(found, ["_ZN1A8set_nameEPKc", "find<\"x\">", "set_name"]);
    }

    /// `-c SRC` alone writes SRC's name with `.o` in the working folder; a
    /// compile that names its output, or is not one source to one object, is left as it is.
    #[test]
    fn a_compile_without_an_output_gets_clangs_own_name() {
        let args = |a: &str| a.split(' ').map(OsString::from).collect::<Vec<_>>();
        let named = |a: &str| default_object(&args(a)).map(|o| o.into_string().unwrap());
        assert_eq!(named("-O2 -c src/lparser.c").as_deref(), Some("lparser.o"));
        assert_eq!(named("-c -std=c++17 a.b.cpp -g").as_deref(), Some("a.b.o"));
        for left in [
            "-c lparser.c -o p.o",
            "-S lparser.c",
            "-E -c lparser.c",
            "-c a.c b.c",
            "lparser.c",
        ] {
            assert_eq!(named(left), None, "{left}");
        }
    }

    /// The preprocessor's inputs are hashed from a manifest while the files
    /// it read are unchanged, and afresh when one of them changed.
    #[test]
    fn a_units_inputs_follow_its_headers_through_the_manifest() {
        let Some(clang) = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join("clang"))
            .find(|p| p.is_file())
        else {
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let at = |name: &str| tmp.path().join(name);
        std::fs::write(at("a.c"), "#include \"b.h\"\nint f(void) { return B; }\n").unwrap();
        std::fs::write(at("b.h"), "#define B 1\n").unwrap();
        std::fs::write(at("replay.txt"), "").unwrap();
        let flags = vec![format!(
            "-cgscc-inline-replay={}",
            at("replay.txt").display()
        )];
        let args: Vec<OsString> = ["-O2", "-c"]
            .map(OsString::from)
            .into_iter()
            .chain([at("a.c").into(), "-o".into(), at("a.o").into()])
            .collect();
        let cache = at("objects");
        std::fs::create_dir(&cache).unwrap();
        let unit = || Unit::of(&cache, &clang, &args, &flags).unwrap().inputs;
        let first = unit();
        let manifests: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
        assert_eq!(manifests.len(), 1);
        let manifest = std::fs::read_to_string(manifests[0].path()).unwrap();
        assert!(manifest.starts_with(&first.to_string()), "{manifest}");
        assert!(manifest.contains("b.h"), "{manifest}");
        assert_eq!(unit(), first);
        std::fs::write(at("b.h"), "#define B 2\n").unwrap();
        let changed = unit();
        assert_ne!(changed, first);
        std::fs::write(at("b.h"), "#define B 1\n").unwrap();
        assert_eq!(unit(), first);
    }

    #[test]
    fn replay_lines_name_their_caller() {
        let inline = "x: 'sq' inlined into 'main' at callsite main:5:20;";
        let not = "x: 'inc' will not be inlined into 'work' at callsite twice:0:3 @ work:1:40;";
        assert_eq!(replay_caller(inline), Some("main"));
        assert_eq!(replay_caller(not), Some("work"));
        assert_eq!(replay_caller("garbage"), None);
    }

    #[test]
    fn a_units_key_takes_its_callers_lines_in_any_order_and_no_others() {
        let line = |callee: &str, caller: &str| {
            format!("x: '{callee}' inlined into '{caller}' at callsite {caller}:1:2;\n")
        };
        let (a, b, c) = (line("f", "main"), line("g", "work"), line("h", "other"));
        let key = |replay: &str, callers: &[&str]| {
            ReplayLines::new(replay).key(b"inputs", callers.iter().copied())
        };
        let mine = key(&format!("{a}{b}"), &["main", "work"]);
        assert_eq!(
            key(&format!("{b}{c}{a}garbage\n"), &["work", "main", "work"]),
            mine
        );
        assert_ne!(key(&format!("{a}{c}"), &["main", "work"]), mine);
        let flipped = b.replace("inlined", "will not be inlined");
        assert_ne!(key(&format!("{a}{flipped}"), &["main", "work"]), mine);
        assert_ne!(
            ReplayLines::new(&format!("{a}{b}")).key(b"other", ["main", "work"]),
            mine
        );
    }
}
