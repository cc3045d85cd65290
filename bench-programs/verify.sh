#!/bin/bash
# Checks one bundled benchmark (not synthetic/, which takes knob arguments):
# counts its inline-replay decision points, builds stock / all-inlined /
# none-inlined variants, checks that all three print the same checksum, and
# reports callgrind instruction counts.
#
# Usage: bench-programs/verify.sh DIR [SMALL_SIZE]     e.g. bench-programs/verify.sh bench-programs/tiny-interp 1
# Needs clang (C) or rustc (Rust), valgrind; hyperfine is used if present.
set -euo pipefail
dir=$1
small=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/empty.txt"

if [ -f "$dir/main.c" ]; then
    src=$dir/main.c
    replay=(-gline-tables-only -mllvm -cgscc-inline-replay="$tmp/empty.txt"
            -mllvm -cgscc-inline-replay-scope=Module)
    clang -O2 -Wall -Wextra -Werror "$src" -o "$tmp/stock"
    clang -O2 "$src" -o "$tmp/all" "${replay[@]}" -mllvm -cgscc-inline-replay-fallback=AlwaysInline
    clang -O2 "$src" -o "$tmp/none" "${replay[@]}" -mllvm -cgscc-inline-replay-fallback=NeverInline
    sites=$(clang -O2 -c "$src" -o /dev/null "${replay[@]}" \
        -mllvm -cgscc-inline-replay-fallback=AlwaysInline -Rpass=inline 2>&1 | grep -c "inlined into" || true)
    missed=$(clang -O2 -c "$src" -o /dev/null -Rpass-missed=inline 2>&1 |
        grep -c "too costly to inline" || true)
else
    src=$dir/main.rs
    # Fresh incremental dirs turn the MIR inliner off; one codegen unit stops
    # ThinLTO from inlining behind replay's back.
    replay=(-C codegen-units=1 -C debuginfo=line-tables-only
            -C llvm-args=-cgscc-inline-replay="$tmp/empty.txt"
            -C llvm-args=-cgscc-inline-replay-scope=Module)
    rustc -O -D warnings "$src" -o "$tmp/stock"
    rustc -O "$src" -o "$tmp/all" "${replay[@]}" -C incremental="$tmp/i1" \
        -C llvm-args=-cgscc-inline-replay-fallback=AlwaysInline
    rustc -O "$src" -o "$tmp/none" "${replay[@]}" -C incremental="$tmp/i2" \
        -C llvm-args=-cgscc-inline-replay-fallback=NeverInline
    # Only "AlwaysInline Fallback" remarks are replay decisions; "always inline
    # attribute" ones are #[inline(always)] std helpers that bypass replay.
    sites=$(rustc -O "$src" -o "$tmp/x" "${replay[@]}" -C incremental="$tmp/i3" \
        -C llvm-args=-cgscc-inline-replay-fallback=AlwaysInline -C remark=inline 2>&1 |
        grep -c "AlwaysInline Fallback" || true)
    missed=$(rustc -O "$src" -o "$tmp/x" "${replay[@]}" -C incremental="$tmp/i4" -C remark=inline 2>&1 |
        grep -c "too costly to inline" || true)
fi
echo "decision points: $sites   (stock 'too costly' remarks: $missed)"

status=0
for v in stock all none; do
    line=$(cd "$tmp" && ./$v $small | tail -1)
    ir=$(cd "$tmp" && valgrind --tool=callgrind --callgrind-out-file=/dev/null ./$v $small 2>&1 |
         grep refs | awk '{print $NF}')
    echo "$v: $line   callgrind Ir: $ir"
    if [ -n "${first:-}" ] && [ "$line" != "$first" ]; then
        echo "CHECKSUM MISMATCH" >&2
        status=1
    fi
    first=${first:-$line}
done
if command -v hyperfine > /dev/null; then
    (cd "$tmp" && hyperfine -N -w 1 -r 5 ./stock ./all ./none 2>&1 | grep -E "^Benchmark|Time")
fi
exit $status
