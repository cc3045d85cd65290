#!/usr/bin/env python3
"""The limit of a step's build, as a plain loop: what a step must do at least.

scripts/bench-builds runs a program's build once with this file standing in for
clang, clang++, cc, c++, ar and ranlib (`tools DIR` makes the folder), which
records every invocation (the working folder and the arguments) and runs the
real tool. Then, in the folder that build made:

- `prepare` keeps each recorded unit's IR before any pass (bitcode, with the
  flags kiln gives a step) and compiles its object from it. A compile and link
  in one command (SQLite's `clang -o speedtest1 speedtest1.c sqlite3.c`) is a
  unit per source and a link of their objects, as kiln's wrapper splits it.
  Compiles whose folder or source is gone (a configure script's tests) are
  left out.
- `loop STEPS` does what each step must, back to back, and prints each step's
  seconds, a line each: for the units kiln's step compiled (its build log names them), the
  optimiser and code generator from the kept bitcode with the step's replay
  file; then each recorded archive or link command whose inputs include an
  output made this step (an archive is written afresh), in the build's order;
  then one run of the benchmark. No build system, no copy, no configure.
  Compiles, and commands that take none of each other's outputs, run side by
  side, as `make -j` runs them.

For cargo (rustc) the build runs with this file as cargo's
RUSTC_WORKSPACE_WRAPPER, named `kiln-rustc` as the worker's wrapper is (cargo
hashes the wrapper's name into every symbol name, and the step's replay file
names functions by their symbols), and records the rustc commands of the
workspace's crates with their environment.
`prepare` compiles each once with the flags kiln gives a step's rustc (one
codegen unit, an incremental folder of its own, remarks, the replay file at one
path); `loop` then, for the crates kiln's step generated code for again (listed
as `crate:NAME`, or `crate:NAME (KIND)` where it is not a library, as kiln's
build log names them), copies the step's replay file to that path, removes from
their incremental folders what code generation made (as kiln's worker does),
and runs them and every crate that takes their output (a binary's link: with
fat LTO, the whole program's optimisation), side by side where they do not
depend on each other. The front end comes from rustc's incremental cache: no
cargo, no copy, nothing stored.

STEPS is a file of lines `REPLAY-FILE<TAB>UNIT,UNIT...`. The loop's objects are
the last ones it compiled: a unit whose decisions went back to earlier ones
without kiln compiling it keeps the newer object, so the loop's program is a
timing bound, not a check of kiln's.
"""
import json
import os
import shutil
import subprocess
import sys
import time

RECORD_ENV = "LIMIT_RECORD"
TOOLS = ["clang", "clang++", "cc", "c++", "ar", "ranlib",
         "llvm-ar", "llvm-ar-14", "llvm-ranlib", "llvm-ranlib-14"]
WORKSPACE_WRAPPER = "kiln-rustc"
# The files of an incremental session that hold rustc's front end's work
# (worker/src/build/crates.rs); the rest is code generation's.
FRONT_END_FILES = {"dep-graph.bin", "query-cache.bin", "work-products.bin"}
COMPILERS = {"clang": "clang", "clang++": "clang++", "cc": "clang", "c++": "clang++"}
ARCHIVERS = {"ar", "llvm-ar", "llvm-ar-14"}
SOURCE_EXTENSIONS = {"c", "cc", "cpp", "cxx", "c++", "C", "m", "mm"}
DEPENDENCY_FLAGS = {"-MD", "-MMD", "-MP"}
DEPENDENCY_OPTIONS = {"-MF", "-MT", "-MQ"}


def real(tool):
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    for folder in os.environ.get("PATH", "").split(":"):
        path = os.path.join(folder, tool)
        if os.path.abspath(folder) != here and os.access(path, os.X_OK):
            return path
    sys.exit(f"limit: no real {tool} on PATH")


def is_source(arg):
    return not arg.startswith("-") and arg.rsplit(".", 1)[-1] in SOURCE_EXTENSIONS and "." in arg


def record(tool, args):
    with open(os.environ[RECORD_ENV], "a") as log:
        log.write(json.dumps({"cwd": os.getcwd(), "tool": tool, "args": args}) + "\n")
    # The real tool's path as its name: gcc finds its own files from it.
    os.execv(real(tool), [real(tool)] + args)


def record_rustc(rustc, args):
    """Records a workspace crate's rustc command (not cargo's questions to rustc)."""
    if "--crate-name" in args and any(a.endswith(".rs") for a in args):
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "CARGO_MAKEFLAGS", "MFLAGS")}
        with open(os.environ[RECORD_ENV], "a") as log:
            log.write(json.dumps({"cwd": os.getcwd(), "tool": "rustc", "rustc": rustc, "args": args, "env": env}) + "\n")
    os.execv(rustc, [rustc] + args)


def absolute(cwd, path):
    return os.path.normpath(os.path.join(cwd, path))


def compile_options(args):
    """A compile's arguments without its sources, output, -c, language and dependency files."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-x") or a in DEPENDENCY_OPTIONS:
            skip = True
        elif not (is_source(a) or a == "-c" or a in DEPENDENCY_FLAGS or (a.startswith("-x") and len(a) > 2)):
            out.append(a)
    return out


def plan(records):
    """The units (compiles of one source) and the other commands, in the build's order."""
    units, commands = [], []
    for r in records:
        cwd, args = r["cwd"], r["args"]
        if r["tool"] == "rustc":
            continue
        sources = [a for a in args if is_source(a)]
        if r["tool"] in COMPILERS and sources:
            if any(a in ("-E", "-S") for a in args):
                continue
            if not os.path.isdir(cwd) or not all(os.path.isfile(absolute(cwd, s)) for s in sources):
                continue
            compiler = COMPILERS[r["tool"]]
            options = compile_options(args)
            if "-c" in args:
                if len(sources) != 1:
                    continue
                out = args[args.index("-o") + 1] if "-o" in args else os.path.splitext(os.path.basename(sources[0]))[0] + ".o"
                units.append({"cwd": cwd, "compiler": compiler, "source": absolute(cwd, sources[0]),
                              "object": absolute(cwd, out), "options": options})
                continue
            # A compile and link in one command: a unit per source, then the link.
            output = args[args.index("-o") + 1] if "-o" in args else "a.out"
            link = []
            for a in args:
                if is_source(a):
                    obj = f"{absolute(cwd, output)}.limit-{len(units)}.o"
                    units.append({"cwd": cwd, "compiler": compiler, "source": absolute(cwd, a),
                                  "object": obj, "options": options})
                    link.append(obj)
                else:
                    link.append(a)
            commands.append({"cwd": cwd, "tool": compiler, "args": link})
        elif os.path.isdir(cwd):
            commands.append(r)
    return units, commands


def run(argv, cwd):
    run_all([(argv, cwd)])


def run_all(commands):
    """Runs the commands side by side, as `make -j` would; exits if one fails."""
    started = [(argv, cwd, subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
               for argv, cwd in commands]
    for argv, cwd, process in started:
        _, err = process.communicate()
        if process.returncode != 0:
            sys.exit(f"limit: {' '.join(argv)} (in {cwd}) failed: {err.decode(errors='replace')[-2000:]}")


def flags(replay):
    """The flags kiln gives a step's clang compiles (worker/src/build/llvm_inline)."""
    return ["-gline-tables-only", "-fdebug-default-version=4", "-Rpass=inline",
            "-mllvm", f"-cgscc-inline-replay={replay}", "-mllvm", "-cgscc-inline-replay-scope=Module",
            "-mllvm", "-cgscc-inline-replay-fallback=NeverInline"]


def backend(unit, replay):
    """The command that optimises and generates the unit's object from its kept bitcode under `replay`."""
    return ([real(unit["compiler"])] + unit["options"] + flags(replay)
            + ["-Wno-unused-command-line-argument", "-c", "-x", "ir", unit["bitcode"], "-o", unit["object"]], unit["cwd"])


def rustc_flags(replay, incremental):
    """The flags kiln gives a step's rustc (worker/src/build/llvm_inline)."""
    options = ["debuginfo=line-tables-only", "codegen-units=1", f"incremental={incremental}", "remark=inline",
               f"llvm-args=-cgscc-inline-replay={replay}", "llvm-args=-cgscc-inline-replay-scope=Module",
               "llvm-args=-cgscc-inline-replay-fallback=NeverInline"]
    return [flag for option in options for flag in ("-C", option)]


def option(args, name):
    return args[args.index(name) + 1] if name in args else None


def crates(records, state, replay):
    """The workspace's rustc commands, in the build's order, with what each makes and takes."""
    out = []
    for i, r in enumerate(x for x in records if x["tool"] == "rustc"):
        args, cwd = r["args"], r["cwd"]
        name = option(args, "--crate-name")
        extra = next((a[len("extra-filename="):] for a in args if a.startswith("extra-filename=")), "")
        folder = absolute(cwd, option(args, "--out-dir") or ".")
        kind = option(args, "--crate-type") or ("test" if "--test" in args else "bin")
        binary = kind in ("bin", "test")
        makes = ([os.path.join(folder, f"{name}{extra}")] if binary else
                 [os.path.join(folder, f"lib{name}{extra}.{ext}") for ext in ("rlib", "rmeta")])
        takes = [absolute(cwd, v.split("=", 1)[1]) for k, v in zip(args, args[1:]) if k == "--extern" and "=" in v]
        incremental = os.path.join(state, "incremental", str(i))
        # As kiln's build log names it (worker/src/build/wrap.rs).
        label = name if kind.endswith("lib") else f"{name} ({kind})"
        out.append({"name": name, "label": label, "cwd": cwd, "env": r["env"], "makes": makes, "takes": takes, "binary": binary,
                    "incremental": incremental, "argv": [r["rustc"]] + args + rustc_flags(replay, incremental)})
    return out


def run_crates(batch):
    """Runs rustc commands side by side; a binary is then put where cargo puts it (the profile's folder)."""
    started = [(c, subprocess.Popen(c["argv"], cwd=c["cwd"], env=c["env"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)) for c in batch]
    for c, process in started:
        _, err = process.communicate()
        if process.returncode != 0:
            sys.exit(f"limit: rustc for crate {c['label']} failed: {err.decode(errors='replace')[-2000:]}")
        if c["binary"]:
            # deps/NAME-HASH is linked as NAME beside deps, examples/NAME-HASH as examples/NAME.
            made = c["makes"][0]
            folder = os.path.dirname(made)
            if os.path.basename(folder) == "deps":
                folder = os.path.dirname(folder)
            uplifted = os.path.join(folder, c["name"])
            if os.path.lexists(uplifted):
                os.remove(uplifted)
            os.link(made, uplifted)


def forget_codegen(incremental):
    """Removes what code generation made from an incremental folder (crates.rs's forget_codegen)."""
    for krate in filter(os.path.isdir, (os.path.join(incremental, d) for d in os.listdir(incremental))):
        for session in filter(os.path.isdir, (os.path.join(krate, d) for d in os.listdir(krate))):
            for f in os.listdir(session):
                if f not in FRONT_END_FILES:
                    os.remove(os.path.join(session, f))


def prepare(work):
    state = os.path.join(work, ".limit")
    records = [json.loads(line) for line in open(os.path.join(state, "record.jsonl"))]
    units, commands = plan(records)
    empty = os.path.join(state, "empty-replay.txt")
    open(empty, "w").close()
    for i, unit in enumerate(units):
        unit["bitcode"] = os.path.join(state, f"unit-{i}.bc")
        run([real(unit["compiler"])] + unit["options"] + flags(empty)
            + ["-Xclang", "-disable-llvm-optzns", "-emit-llvm", "-c", unit["source"], "-o", unit["bitcode"]], unit["cwd"])
        run(*backend(unit, empty))
    replay = os.path.join(state, "replay.txt")
    open(replay, "w").close()
    rust = crates(records, state, replay)
    for c in rust:
        run_crates([c])
    json.dump({"units": units, "commands": commands, "crates": rust, "replay": replay}, open(os.path.join(state, "plan.json"), "w"), indent=1)
    print(f"limit: {len(units)} units, {len(commands)} archive and link commands, {len(rust)} crates")


def inputs(command):
    cwd, args = command["cwd"], command["args"]
    found = {absolute(cwd, a) for a in args if not a.startswith("-")}
    dirs = [absolute(cwd, a[2:]) for a in args if a.startswith("-L") and len(a) > 2]
    for a in args:
        if a.startswith("-l") and len(a) > 2:
            found |= {os.path.realpath(os.path.join(d, f"lib{a[2:]}.{ext}")) for d in dirs for ext in ("a", "so")}
    return found


def outputs(command):
    cwd, args = command["cwd"], command["args"]
    tool = command["tool"]
    if tool in ARCHIVERS:
        files = [a for a in args[1:] if not a.startswith("-")]
        return [absolute(cwd, files[0])] if files else []
    if tool not in COMPILERS:
        return [absolute(cwd, a) for a in args if not a.startswith("-")]
    return [absolute(cwd, args[args.index("-o") + 1])] if "-o" in args else []


def unit_named(units, name):
    """The unit a build log names (its source as the compile wrote it)."""
    parts = name.split("/")
    def common(unit):
        theirs = unit["source"].split("/")
        n = 0
        while n < min(len(parts), len(theirs)) and parts[-1 - n] == theirs[-1 - n]:
            n += 1
        return n
    best = max(common(u) for u in units)
    found = [u for u in units if best > 0 and common(u) == best]
    if len(found) != 1:
        sys.exit(f"limit: the build log's unit {name} is {len(found)} recorded units")
    return found[0]


def loop(work, steps_file, run_argv):
    state = os.path.join(work, ".limit")
    p = json.load(open(os.path.join(state, "plan.json")))
    steps = [line.rstrip("\n").split("\t") for line in open(steps_file) if line.strip()]
    for replay, changed in steps:
        started = time.monotonic()
        names = list(filter(None, changed.split(",")))
        if p["crates"]:
            crate_step(p, replay, {n[len("crate:"):] for n in names if n.startswith("crate:")})
            names = [n for n in names if not n.startswith("crate:")]
        units = [unit_named(p["units"], name) for name in names]
        run_all([backend(unit, replay) for unit in units])
        made = {unit["object"] for unit in units}
        # Commands that take a changed output, in the build's order; those
        # that take none of each other's outputs run side by side.
        batch, batch_outputs = [], set()
        for command in p["commands"]:
            takes, makes = inputs(command), set(outputs(command))
            if not takes & made:
                continue
            if takes & batch_outputs:
                run_all(batch)
                batch, batch_outputs = [], set()
            if command["tool"] in ARCHIVERS:
                for archive in filter(os.path.exists, makes):
                    os.remove(archive)
            batch.append(([real(command["tool"])] + command["args"], command["cwd"]))
            batch_outputs |= makes
            made |= makes
        run_all(batch)
        run(run_argv, work)
        print(f"{time.monotonic() - started:.3f}", flush=True)


def crate_step(p, replay, again):
    """A step's rustc commands: the crates labelled `again`, then every crate that takes their outputs."""
    shutil.copyfile(replay, p["replay"])
    batch, batch_makes, made = [], set(), set()
    for c in p["crates"]:
        if c["label"] not in again and not set(c["takes"]) & made:
            continue
        if set(c["takes"]) & batch_makes:
            run_crates(batch)
            batch, batch_makes = [], set()
        if c["label"] in again:
            forget_codegen(c["incremental"])
        batch.append(c)
        batch_makes |= set(c["makes"])
        made |= set(c["makes"])
    run_crates(batch)


def main():
    name = os.path.basename(sys.argv[0])
    if name in TOOLS:
        record(name, sys.argv[1:])
    if name == WORKSPACE_WRAPPER:
        record_rustc(sys.argv[1], sys.argv[2:])
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "tools":
        folder = sys.argv[2]
        os.makedirs(folder, exist_ok=True)
        for tool in TOOLS + [WORKSPACE_WRAPPER]:
            link = os.path.join(folder, tool)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(os.path.abspath(__file__), link)
    elif command == "prepare":
        prepare(sys.argv[2])
    elif command == "loop":
        loop(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
