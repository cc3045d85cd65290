# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: what every fault family shares: the campaigns, the processes they leave, the
# checks of their stores, and the uninterrupted reference run.
# Sourced by scripts/faults (the entry point, which sets ROOT, LIB, KILN, WORK, STEPS, REPS and
# the accounting arrays); defines functions and the campaigns' constants.

# shellcheck source=scripts/lib/template.sh
source "$LIB/template.sh"

# ---------------------------------------------------------------------------------------------
# Campaigns

# The benchmark of every campaign. run.sh SECONDS TOKEN [MODE]: marks its slot as mid-step,
# sleeps, unmarks. MODE hang sleeps past the timeout; MODE daemon leaves a double-forked,
# setsid daemon behind; both carry the case's token in their command line. MODE kill kills
# its worker (kill -9 of its parent); MODE loud fails, writing terminal control sequences
# (colour, an OSC 52 clipboard write, bells, a C1 CSI) to stderr.
write_bench() {
    mkdir -p "$1/bench"
    render "$LIB/templates/faults/run.sh" >"$1/bench/run.sh"
}

# config DIR WORKERS [MODES]: the campaign. Experiment `walk` is a random walk (every measured
# proposal is accepted) of 2 chains with 2 proposals in flight; experiment `anneal` anneals at a
# temperature near 0 over a knob whose values sleep 80 ms apart, so that its accept/reject
# verdicts are decided by the knob, never by timing noise: both trajectories are a function of
# the seed alone, and a resumed run must reproduce the reference exactly.
config() {
    local dir=$1 workers=$2 modes=${3:-} token
    token=$(basename "$dir")
    local knob_mode="" mode_arg=""
    if [[ -n $modes ]]; then knob_mode="(m $modes)"; mode_arg="\"{m}\""; fi
    write_bench "$dir"
    render "$LIB/templates/faults/campaign.sexp" STEPS="$STEPS" KNOB_MODE="$knob_mode" TOKEN="$token" \
        MODE_ARG="$mode_arg" WORKERS="$workers" >"$dir/campaign.sexp"
}
LOCAL="(workers (local (slots 2)))"
EXPECTED=$((3 * STEPS)) # decided steps of a whole campaign (2 walk chains + 1 anneal chain)

# new_case NAME REP: a fresh campaign folder (its name is the token the scan looks for).
new_case() {
    local dir=$WORK/kf$$-$1-$2
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "$dir"
}

# start DIR [ENV...]: `kiln run` in the background; its pid in KPID.
start() {
    local dir=$1
    shift
    (cd "$dir" && exec env "$@" "$KILN" run campaign.sexp >>kiln.out 2>>kiln.err </dev/null) &
    KPID=$!
}

# finish PID LIMIT_S: waits for it; its exit status in RC (124 after killing it at the limit).
# Never in $(...): only this shell can wait for its child.
finish() {
    local pid=$1 limit=$2 i
    for ((i = 0; i < limit * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        RC=124
        return
    fi
    wait "$pid"
    RC=$?
}

# Steps decided according to the running controller's snapshot.
decided() {
    jq '[.chains[]?.done // 0] | add // 0' "$1/store/status.json" 2>/dev/null || echo 0
}

# wait_until LIMIT_S CMD...: polls CMD every 0.1 s; 1 at the limit.
wait_until() {
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 10; i++)); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
has_decided() { [[ $(decided "$1") -ge $2 ]]; }
# A local slot mid-step (run.sh's mark), or one of RUNDIR's.
mid_step() { [[ -n $(find "$1" -name running -path '*/work/*' 2>/dev/null | head -1) ]]; }

# pids_of TOKEN DIR: processes whose command line holds TOKEN or whose cwd is under DIR (this
# script and its own subshells excepted).
pids_of() {
    local token=$1 dir=$2 p cmd cwd
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [[ $p == "$$" || $p == "$BASHPID" ]] && continue
        cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") || continue
        cwd=$(readlink "/proc/$p/cwd" 2>/dev/null)
        if [[ $cmd == *"$token"* || $cwd == "$dir"* ]]; then
            [[ $cmd == *"scripts/faults"* ]] && continue
            echo "$p"
        fi
    done
}

# left_behind DIR: 5 s after the campaign, the processes it left; they are logged, then killed
# so that they do not count again.
left_behind() {
    local dir=$1 token pids p n=0
    token=$(basename "$dir")
    sleep 5
    pids=$(pids_of "$token" "$dir")
    for p in $pids; do
        evidence "left behind by $token: pid $p ($(cat /proc/$p/comm 2>/dev/null), state $(awk '{print $3}' /proc/$p/stat 2>/dev/null)): $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
        kill -KILL "$p" 2>/dev/null
        n=$((n + 1))
    done
    echo "$n"
}

# The steps table: experiment,chain,step,decision_hash,accepted,outcome, one line per stored row.
trajectory() {
    (cd "$1" && "$KILN" export store --table steps) | python3 "$LIB/faults_export.py" trajectory
}

# check DIR REF EXPECTED: "LOST DOUBLED IDENTICAL VERIFY" of DIR's store against the reference
# trajectory file REF (or - for n.a.) and the EXPECTED steps per experiment/chain
# ("walk:0:10 walk:1:10 anneal:0:10").
check() {
    local dir=$1 ref=$2 expected=$3 verify=ok
    trajectory "$dir" >"$dir/trajectory.csv"
    (cd "$dir" && "$KILN" store verify store >verify.out 2>&1) || verify=failed
    python3 "$LIB/faults_verify.py" "$dir/trajectory.csv" "$ref" "$expected" "$verify"
}
EXPECT_ALL="walk:0:$STEPS walk:1:$STEPS anneal:0:$STEPS"

# ---------------------------------------------------------------------------------------------
# The reference: the same campaign, uninterrupted.

reference() {
    local dir rc
    dir=$(new_case reference 0)
    config "$dir" "$LOCAL"
    local t0=$SECONDS
    start "$dir"
    finish "$KPID" 300; rc=$RC
    REF_S=$((SECONDS - t0))
    [[ $rc == 0 ]] || { evidence "reference run failed ($rc): $(tail -5 "$dir/kiln.err")"; exit 1; }
    trajectory "$dir" >"$WORK/reference.csv"
    [[ $(wc -l <"$WORK/reference.csv") == "$EXPECTED" ]] ||
        { evidence "reference has $(wc -l <"$WORK/reference.csv") steps, not $EXPECTED"; exit 1; }
    REF_DIR=$dir
    log "reference: $EXPECTED steps in ${REF_S}s"
}

# resume_and_check FAULT DIR [NOTE]: `kiln run` again to the end, then the checks.
resume_and_check() {
    local f=$1 dir=$2 note=${3:-} rc
    local left
    left=$(left_behind "$dir") # what the interrupted controller left
    start "$dir"
    finish "$KPID" 300; rc=$RC
    [[ $rc == 0 ]] || note="resume exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' '); $note"
    left=$((left + $(left_behind "$dir")))
    read -r lost dbl same verify <<<"$(check "$dir" "$WORK/reference.csv" "$EXPECT_ALL")"
    tally "$f" "$dir" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
}

# ---------------------------------------------------------------------------------------------
# Shared by several families.

# A finished store to damage: a copy of the reference's.
finished_copy() {
    local dir
    dir=$(new_case "$1" "$2")
    config "$dir" "$LOCAL"
    cp -a "$REF_DIR/store" "$dir/store"
    echo "$dir"
}
clean_exit() { # RC ERRFILE: exited 1 or 2, without a panic
    [[ $1 == 1 || $1 == 2 ]] && ! grep -q "panicked" "$2"
}

# mode_outcomes DIR: "WRONG MODED" of the walk's steps: those recorded otherwise than their mode
# says (`kill`: worker lost, `loud`: run failed, `fine`: ok), and those of a mode but `fine`.
mode_outcomes() {
    (cd "$1" && "$KILN" export store --table dataset --experiment walk) | python3 "$LIB/faults_export.py" mode-outcomes
}
