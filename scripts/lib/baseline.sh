# Sourced by the benchmark scripts: kiln as of an earlier revision, to measure side by side.

# baseline_bin REV: builds kiln and kiln-worker as of git revision REV (release) into
# target/bench-baseline/<short rev>, once, and prints the folder that holds them.
baseline_bin() {
    local rev base
    rev=$(git rev-parse --short "$1^{commit}") || return 1
    base=target/bench-baseline/$rev
    if [[ ! -x $base/target/release/kiln || ! -x $base/target/release/kiln-worker ]]; then
        echo "building the baseline $rev into $base" >&2
        rm -rf "$base/src"
        mkdir -p "$base/src"
        git archive "$rev" | tar -x -C "$base/src"
        (cd "$base/src" && CARGO_TARGET_DIR="$PWD/../target" \
            cargo build --release --quiet -p kiln-controller -p kiln-worker) || return 1
    fi
    echo "$base/target/release"
}
