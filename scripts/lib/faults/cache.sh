# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: the worker's build cache damaged (binaries replaced or truncated)
# while the campaign is stopped.
# Sourced by scripts/faults; defines the family's fault_* functions and their helpers.

# ---------------------------------------------------------------------------------------------
# 8. Issue 30: damaged build caches.

# build_config DIR: a campaign whose benchmark is built. build.sh C writes `bench`, a script
# that sleeps 0.C s (C one of 10..50, so 0.10-0.50 s); a random walk over the six values
# measures each again and again, each time from the worker's build cache.
BUILT_STEPS=$((2 * STEPS))
build_config() {
    local dir=$1 token
    token=$(basename "$dir")
    mkdir -p "$dir/bench"
    printf '%s\n' "printf '#!/bin/sh\\nsleep 0.%s\\n' \"\$1\" >bench" 'chmod +x bench' >"$dir/bench/build.sh"
    render "$LIB/templates/faults/cache.sexp" STEPS="$BUILT_STEPS" TOKEN="$token" WORKERS="$LOCAL" \
        >"$dir/campaign.sexp"
}

# wrong_built DIR: steps of build_config's campaign not measured from the real program: failed,
# or faster than its sleep of 0.C s.
wrong_built() {
    (cd "$1" && "$KILN" export store --table dataset) | python3 "$LIB/faults_export.py" wrong-built
}

# cache_fault FAULT NAME DAMAGE: the campaign killed (SIGKILL) after a few steps, every cached
# binary damaged by DAMAGE FILE, then resumed: each damaged entry must be found, rebuilt and
# named in kiln.log, and no step measured from a damaged binary.
cache_fault() {
    local f=$1 name=$2 damage=$3 rep dir rc note n bin
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case "$name" "$rep")
        build_config "$dir"
        start "$dir"
        wait_until 60 has_decided "$dir" $((3 + RANDOM % STEPS))
        kill -KILL "$KPID" 2>/dev/null
        wait "$KPID" 2>/dev/null
        local left
        left=$(left_behind "$dir")
        n=0
        for bin in "$dir"/store/workers/local/builds/*/files/bench; do
            [[ -f $bin ]] || continue
            "$damage" "$bin"
            n=$((n + 1))
        done
        note=""
        [[ $n -gt 0 ]] || note="no cached build to damage; "
        start "$dir"
        finish "$KPID" 300; rc=$RC
        [[ $rc == 0 ]] || note+="resume exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' '); "
        left=$((left + $(left_behind "$dir")))
        grep -q "cached build .* was discarded" "$dir/store/kiln.log" || note+="kiln.log names no discarded entry; "
        info "$f" "rep $rep: $n binaries damaged, $(grep -c 'was discarded' "$dir/store/kiln.log") entries discarded"
        read -r lost dbl _ verify <<<"$(check "$dir" - "built:0:$BUILT_STEPS")"
        tally "$f" "$dir" "$lost" "$dbl" n.a. "$verify" "$left" "$note" "$(wrong_built "$dir")"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
replace_binary() { printf '#!/bin/sh\nsleep 0.01\n' >"$1"; }
truncate_binary() { truncate -s $(($(stat -c %s "$1") / 2)) "$1"; }
fault_cache_tampered() { cache_fault "cached binaries replaced by a 10 ms script, then resumed" cachetamper replace_binary; }
fault_cache_truncated() { cache_fault "cached binaries truncated to half, then resumed" cachetrunc truncate_binary; }
