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
- `loop STEPS` does what each step must, back to back, and prints the median
  seconds a step: for the units kiln's step compiled (its build log names them), the
  optimiser and code generator from the kept bitcode with the step's replay
  file; then each recorded archive or link command whose inputs include an
  output made this step (an archive is written afresh), in the build's order;
  then one run of the benchmark. No build system, no copy, no configure.
  Compiles, and commands that take none of each other's outputs, run side by
  side, as `make -j` runs them.

STEPS is a file of lines `REPLAY-FILE<TAB>UNIT,UNIT...`. The loop's objects are
the last ones it compiled: a unit whose decisions went back to earlier ones
without kiln compiling it keeps the newer object, so the loop's program is a
timing bound, not a check of kiln's.
"""
import json
import os
import statistics
import subprocess
import sys
import time

RECORD_ENV = "LIMIT_RECORD"
TOOLS = ["clang", "clang++", "cc", "c++", "ar", "ranlib",
         "llvm-ar", "llvm-ar-14", "llvm-ranlib", "llvm-ranlib-14"]
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
    os.execv(real(tool), [tool] + args)


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
    json.dump({"units": units, "commands": commands}, open(os.path.join(state, "plan.json"), "w"), indent=1)
    print(f"limit: {len(units)} units, {len(commands)} archive and link commands")


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
    took = []
    for replay, changed in steps:
        started = time.monotonic()
        units = [unit_named(p["units"], name) for name in filter(None, changed.split(","))]
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
        took.append(time.monotonic() - started)
    print(f"{statistics.median(took):.3f}")


def main():
    name = os.path.basename(sys.argv[0])
    if name in TOOLS:
        record(name, sys.argv[1:])
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "tools":
        folder = sys.argv[2]
        os.makedirs(folder, exist_ok=True)
        for tool in TOOLS:
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
