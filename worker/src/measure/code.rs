//! The optimised code of a program's functions, for the features that see what
//! the optimiser did: each function's machine instructions in a built object,
//! read from `objdump -d` (binutils), counted by kind.
//!
//! Only x86-64 objects are read (the vector rule names its registers); an
//! object of another kind, or a machine without objdump, gives no code and
//! the features are null. A function defined in several units (a `static`
//! one) is counted from its first copy, as the IR counts it once.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

pub use kiln_protocol::message::FunctionCode;

use super::callgrind::Profile;

/// The functions of a program's objects by symbol name (as compiled, the
/// names of a `--demangle=no` profile).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Code {
    pub functions: HashMap<String, FunctionCode>,
}

impl Code {
    /// The code of `objects`; `None` where objdump is missing or none of them
    /// could be read as x86-64.
    pub fn read(objects: &[&Path]) -> Option<Code> {
        let mut code = Code::default();
        let mut read = false;
        for object in objects {
            read |= code.read_object(object).is_some();
        }
        read.then_some(code)
    }

    /// The code of one object's disassembly (`objdump -d --no-show-raw-insn -w`'s text);
    /// `None` where it is not an x86-64 object's.
    pub fn parse(text: &str) -> Option<Code> {
        let functions = parse_disassembly(text.lines().map(String::from))?;
        let mut code = Code::default();
        code.add(functions);
        Some(code)
    }

    /// Adds functions not already known (a `static` one's first copy wins).
    fn add(&mut self, functions: Vec<(String, FunctionCode)>) {
        for (name, f) in functions {
            self.functions.entry(name).or_insert(f);
        }
    }

    /// The code of the functions a profiled run executed, from the objects it ran under
    /// `dir` (the program's own, not the system's libraries); empty where none could be read.
    pub fn of_executed(profile: &Profile, dir: &Path) -> BTreeMap<String, FunctionCode> {
        let Some(code) = Code::read(&own_objects(profile, dir)) else {
            return BTreeMap::new();
        };
        profile
            .functions
            .iter()
            .filter(|(_, cost)| cost.self_ir > 0)
            .filter_map(|(name, _)| Some((name.clone(), *code.functions.get(name)?)))
            .collect()
    }

    /// A function's instructions, vector instructions, calls and loops; all `None` where
    /// the code holds no copy of it.
    pub fn counts(&self, function: &str) -> [Option<u64>; 4] {
        let f = self.functions.get(function);
        [
            f.map(|f| f.instructions),
            f.map(|f| f.vector),
            f.map(|f| f.calls),
            f.map(|f| f.loops),
        ]
    }

    /// Adds one object's functions (those not already known).
    fn read_object(&mut self, object: &Path) -> Option<()> {
        let mut child = Command::new("objdump")
            .args(["-d", "--no-show-raw-insn", "-w"])
            .arg(object)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // Lines read lossily (a symbol's name need not be UTF-8), and the pipe closed before
        // the wait: a reader that stopped early must not leave objdump blocked on a full pipe.
        let parsed = {
            let out = BufReader::new(child.stdout.take()?);
            let lines = out.split(b'\n').map_while(Result::ok);
            parse_disassembly(lines.map(|l| String::from_utf8_lossy(&l).into_owned()))
        };
        let status = child.wait().ok()?;
        self.add(parsed.filter(|_| status.success())?);
        Some(())
    }
}

/// The objects a profiled run executed that lie under `dir`.
pub fn own_objects<'p>(profile: &'p Profile, dir: &Path) -> Vec<&'p Path> {
    // valgrind names objects by their real paths.
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    profile
        .objects
        .iter()
        .map(Path::new)
        .filter(|o| o.starts_with(&dir))
        .collect()
}

/// One function being read: its start address, counts, and branch targets
/// behind the branches.
struct Reading {
    name: String,
    start: u64,
    code: FunctionCode,
    back_targets: Vec<u64>,
}

impl Reading {
    fn finish(mut self) -> (String, FunctionCode) {
        self.back_targets.sort_unstable();
        self.back_targets.dedup();
        self.code.loops = self.back_targets.len() as u64;
        (self.name, self.code)
    }
}

/// The functions of one object's disassembly (`objdump -d --no-show-raw-insn -w`); `None`
/// where it is not an x86-64 object.
fn parse_disassembly(lines: impl Iterator<Item = String>) -> Option<Vec<(String, FunctionCode)>> {
    let mut functions = Vec::new();
    let mut current: Option<Reading> = None;
    let mut x86_64 = false;
    for line in lines {
        if let Some(format) = line.split_once("file format ").map(|(_, f)| f.trim()) {
            x86_64 = format == "elf64-x86-64";
        } else if let Some((start, name)) = function_header(&line) {
            functions.extend(current.take().map(Reading::finish));
            current = Some(Reading {
                name: name.to_string(),
                start,
                code: FunctionCode::default(),
                back_targets: Vec::new(),
            });
        } else if let (Some(f), Some((address, text))) = (&mut current, instruction(&line)) {
            count(f, address, text);
        }
    }
    functions.extend(current.map(Reading::finish));
    x86_64.then_some(functions)
}

/// `0000000000001140 <add>:`: the function's address and name.
fn function_header(line: &str) -> Option<(u64, &str)> {
    let (address, rest) = line.split_once(" <")?;
    let name = rest.strip_suffix(">:")?;
    Some((u64::from_str_radix(address, 16).ok()?, name))
}

/// `    1140:\ttest   %edx,%edx`: the instruction's address and text.
fn instruction(line: &str) -> Option<(u64, &str)> {
    let (address, text) = line.trim_start().split_once(":\t")?;
    Some((u64::from_str_radix(address, 16).ok()?, text.trim()))
}

/// Counts one instruction of `f` at `address`.
fn count(f: &mut Reading, address: u64, text: &str) {
    let mut words = text.split_whitespace();
    let mnemonic = words.next().unwrap_or_default();
    let operands = words.next().unwrap_or_default();
    if text.contains("nop") || mnemonic == "int3" || text == "xchg   %ax,%ax" {
        return;
    }
    f.code.instructions += 1;
    if is_vector(mnemonic, operands) {
        f.code.vector += 1;
    }
    if mnemonic.starts_with("call") {
        f.code.calls += 1;
    }
    // A branch back within the function: `jne    1180 <add+0x40>`.
    if mnemonic.starts_with('j') {
        let target = u64::from_str_radix(operands, 16).ok();
        if let Some(target) = target.filter(|t| (f.start..=address).contains(t)) {
            f.back_targets.push(target);
        }
    }
}

/// Whether an instruction works on several elements of a vector register: it
/// names one (`%xmm`, `%ymm`, `%zmm`) and is not scalar floating point
/// (`addss`, `cvtsi2sd`, `ucomisd`), a move of one element (`movd`, `movq`)
/// or the zeroing idiom (`xorps %xmm0,%xmm0`), which scalar code uses too.
fn is_vector(mnemonic: &str, operands: &str) -> bool {
    if operands.contains("%ymm") || operands.contains("%zmm") {
        return true;
    }
    if !operands.contains("%xmm") {
        return false;
    }
    let m = mnemonic.strip_prefix('v').unwrap_or(mnemonic);
    let scalar = ["ss", "sd", "si", "sl", "sq"]
        .iter()
        .any(|s| m.ends_with(s))
        || ["ss2", "sd2", "2ss", "2sd"].iter().any(|s| m.contains(s))
        || matches!(m, "movd" | "movq");
    let zeroing = matches!(m, "xorps" | "xorpd" | "pxor")
        && operands
            .split_once(',')
            .is_some_and(|(a, b)| b.split(',').all(|r| r == a));
    !scalar && !zeroing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Option<HashMap<String, FunctionCode>> {
        Some(Code::parse(text)?.functions)
    }

    /// clang -O2's `add` (a vectorised loop with a scalar remainder) and a caller of it.
    const ADD: &str = "\nt:     file format elf64-x86-64\n\n\nDisassembly of section .text:\n\n\
        0000000000001140 <add>:\n\
        \x20   1140:\ttest   %edx,%edx\n\
        \x20   1142:\tjle    1199 <add+0x59>\n\
        \x20   117e:\txchg   %ax,%ax\n\
        \x20   1180:\tmovss  (%rsi,%rcx,4),%xmm0\n\
        \x20   1185:\taddss  (%rdi,%rcx,4),%xmm0\n\
        \x20   1197:\tjne    1180 <add+0x40>\n\
        \x20   11a3:\tcs nopw 0x0(%rax,%rax,1)\n\
        \x20   1230:\tmovups (%rsi,%rdx,4),%xmm0\n\
        \x20   123d:\taddps  %xmm0,%xmm2\n\
        \x20   1240:\txorps  %xmm1,%xmm1\n\
        \x20   1245:\tvpaddd %ymm1,%ymm2,%ymm3\n\
        \x20   124d:\tjne    1230 <add+0xf0>\n\
        \x20   1250:\tjne    1180 <add+0x40>\n\
        \x20   1255:\tret\n\
        \x20   1256:\tint3\n\n\
        0000000000001260 <main>:\n\
        \x20   1260:\tcall   1140 <add>\n\
        \x20   1265:\tjmp    1140 <add>\n";

    #[test]
    fn counts_instructions_vector_operations_calls_and_loops() {
        let functions = parse(ADD).expect("x86-64");
        let add = FunctionCode {
            instructions: 12,
            vector: 3,
            calls: 0,
            loops: 2,
        };
        assert_eq!(functions["add"], add);
        let main = FunctionCode {
            instructions: 2,
            calls: 1,
            ..FunctionCode::default()
        };
        assert_eq!(functions["main"], main);
    }

    #[test]
    fn another_kind_of_object_gives_no_code() {
        let arm = ADD.replace("elf64-x86-64", "elf64-littleaarch64");
        assert_eq!(parse(&arm), None);
    }

    #[test]
    fn scalar_floating_point_and_single_moves_are_not_vector_operations() {
        for (m, ops) in [
            ("cvtsi2sd", "%eax,%xmm0"),
            ("cvttsd2si", "%xmm0,%eax"),
            ("ucomisd", "%xmm1,%xmm0"),
            ("movq", "%xmm0,%rax"),
            ("vaddsd", "%xmm1,%xmm0,%xmm0"),
            ("pxor", "%xmm0,%xmm0"),
            ("add", "%eax,%ebx"),
        ] {
            assert!(!is_vector(m, ops), "{m} {ops}");
        }
        for (m, ops) in [
            ("paddd", "%xmm1,%xmm0"),
            ("pxor", "%xmm1,%xmm0"),
            ("movdqu", "(%rax),%xmm0"),
            ("vmovaps", "%ymm0,%ymm1"),
        ] {
            assert!(is_vector(m, ops), "{m} {ops}");
        }
    }

    /// The objdump this machine has reads a real object: the test binary itself.
    #[test]
    fn reads_a_real_object() {
        let me = std::env::current_exe().expect("test binary");
        if !cfg!(target_arch = "x86_64") {
            return; // the rule reads x86-64 only
        }
        let code = Code::read(&[me.as_path()]).expect("objdump reads the test binary");
        assert!(code.functions.len() > 100, "{}", code.functions.len());
        let total: u64 = code.functions.values().map(|f| f.instructions).sum();
        let calls: u64 = code.functions.values().map(|f| f.calls).sum();
        assert!(total > calls && calls > 0, "{total} {calls}");
    }
}
