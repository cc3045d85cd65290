# The real programs the build benchmarks run (scripts/bench-front-end,
# scripts/bench-builds), and a campaign folder for one of them. Sourced;
# needs $real (scripts/fetch-real-programs), $corpus (scripts/fetch-corpus)
# and $kiln.

# shellcheck source=scripts/lib/template.sh
source scripts/lib/template.sh

# PROGRAM's sources, build and run (config texts), compiler and the run's
# environment (config text, or none), a line each. CMake and configure run
# once a tree: a build from the slot's last build's tree (kiln's warm tree)
# finds them done.
program_spec() {
    case $1 in
    toml) printf '%s\n' "$corpus/toml" '("cargo" "build" "--release" "--example" "toml2json")' \
        '("./target/release/examples/toml2json" "input.toml")' rustc ;;
    brotli) printf '%s\n' "$real/brotli" '("cargo" "build" "--release")' \
        '("./target/release/brotli" "-c" "-q9" "src/enc/encode.rs")' rustc ;;
    # brotli as shipped (fat LTO), building only the binary the run takes: a
    # step links one whole program, not two (catbrotli's sites are not run).
    brotli-bin) printf '%s\n' "$real/brotli" '("cargo" "build" "--release" "--bin" "brotli")' \
        '("./target/release/brotli" "-c" "-q9" "src/enc/encode.rs")' rustc ;;
    # brotli with its release profile's fat LTO off: what its step costs when
    # the whole program is not optimised again at every link (another program:
    # its decisions are not brotli's under LTO).
    brotli-no-lto) printf '%s\n' "$real/brotli" '("cargo" "build" "--release")' \
        '("./target/release/brotli" "-c" "-q9" "src/enc/encode.rs")' rustc '("CARGO_PROFILE_RELEASE_LTO" "false")' ;;
    # Its library is shared: the run takes the one built, not the system's.
    bzip2) printf '%s\n' "$real/bzip2" '("make" "-j2" "CC=clang" "bzip2")' '("./bzip2" "-9" "-c" "sample1.ref")' clang \
        '("LD_LIBRARY_PATH" ".")' ;;
    lua) printf '%s\n' "$real/lua" '("make" "-C" "src" "-j2" "linux-noreadline" "CC=clang" "MYCFLAGS=-g")' \
        '("./src/lua" "-e" "local s = 0 for i = 1, 200000 do s = s + i % 7 end print(s)")' clang ;;
    yaml-cpp) printf '%s\n' "$corpus/yaml-cpp" \
        '("sh" "-c" "(test -f build/CMakeCache.txt || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=ON > /dev/null) && cmake --build build -j2 --target yaml-cpp-parse")' \
        '("./build/util/parse" "twitter.json")' clang ;;
    sqlite) printf '%s\n' "$corpus/sqlite" '("sh" "-c" "(test -f config.status || ./configure CC=clang --disable-tcl > /dev/null) && make -j2 speedtest1")' \
        '("./speedtest1" "--size" "1" "--memdb" "--nomemstat")' clang ;;
    *) echo "unknown program $1" >&2; return 1 ;;
    esac
}

# The steps a campaign over PROGRAM takes: SQLite's and brotli's builds take
# a minute, so at most 4.
program_steps() {
    case $1 in sqlite | brotli | brotli-bin | brotli-no-lto) echo $(($2 < 4 ? $2 : 4)) ;; *) echo "$2" ;; esac
}

# Writes PROGRAM's sources into DIR/src, a campaign of STEPS one-flip steps
# (a random walk, seed 7, one timed run a step) on SLOTS local slots into
# DIR/c.sexp, and discovers its sites there once: campaigns start from a
# copy of DIR.
prepare_program() {
    local program=$1 dir=$2 steps=$3 slots=${4:-1} src build run compiler env
    { read -r src; read -r build; read -r run; read -r compiler; read -r env || true; } < <(program_spec "$program")
    mkdir -p "$dir" && cp -r "$src" "$dir/src"
    render scripts/lib/templates/bench-programs.sexp PROGRAM="$program" STEPS="$steps" SLOTS="$slots" \
        COMPILER="$compiler" BUILD="$build" RUN="$run" ENV="${env:+(env $env)}" > "$dir/c.sexp"
    (cd "$dir" && "$kiln" sites c.sexp "$program" > sites.log 2>&1)
}
