#!/usr/bin/env python3
"""Usage: config_words.py argv LIST | env LIST | run JSON

A config's words for scripts/bench-builds (the `build`, `run` and `env` fields as
scripts/lib/bench-programs.sh prints them):

  argv LIST   a list of words in parentheses, ("make" "CC=clang"), as a JSON array
  env LIST    an env field's pairs, ("NAME" "VALUE") ..., as NAME=VALUE words on one line
  run JSON    runs the command of a JSON array (argv's output), its stdout discarded; exits
              non-zero (a traceback) when it fails
"""
import json
import shlex
import subprocess
import sys


def argv(words):
    print(json.dumps(shlex.split(words.strip()[1:-1])))


def env(words):
    w = shlex.split(words.replace("(", " ").replace(")", " "))
    print(" ".join(f"{k}={v}" for k, v in zip(w[::2], w[1::2])))


def run(command):
    subprocess.run(json.loads(command), check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    queries = {"argv": argv, "env": env, "run": run}
    if len(sys.argv) != 3 or sys.argv[1] not in queries:
        sys.exit(__doc__)
    queries[sys.argv[1]](sys.argv[2])
