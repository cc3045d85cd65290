"""The last executable cargo built for a target, from `cargo ... --message-format=json` on stdin.

    cargo test --no-run --message-format=json | python3 cargo_executable.py TARGET
"""

import json
import sys


def main():
    target = sys.argv[1]
    built = [m["executable"] for m in map(json.loads, sys.stdin)
             if m.get("reason") == "compiler-artifact" and m.get("executable")
             and m["target"]["name"] == target]
    if not built:
        sys.exit(f"cargo built no executable for {target}")
    print(built[-1])


if __name__ == "__main__":
    main()
