# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: benchmarks that hang, fork a daemon, ship 50,000 source files, race
# on a restored binary, or write terminal control bytes.
# Sourced by scripts/faults; defines the family's fault_* functions and their helpers.

# ---------------------------------------------------------------------------------------------
# 6. Benchmarks that hang, and that leave a setsid daemon behind.

bench_fault() {
    local f=$1 name=$2 modes=$3 rep dir rc note
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case "$name" "$rep")
        config "$dir" "$LOCAL" "$modes"
        start "$dir"
        finish "$KPID" 300; rc=$RC
        note=""
        [[ $rc == 0 ]] || note="kiln run exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' ')"
        local left n
        left=$(left_behind "$dir")
        n=$( (cd "$dir" && "$KILN" export store --table steps) | grep -c ",$4,")
        [[ $n -gt 0 ]] || note+="no step with outcome $4; "
        read -r lost dbl same verify <<<"$(check "$dir" - "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
fault_bench_hang() { bench_fault "benchmark hangs (timeout-s 2)" hang "fine hang" timeout; }
fault_bench_daemon() { bench_fault "benchmark forks a setsid daemon (double fork)" daemon "fine daemon" ok; }

# ---------------------------------------------------------------------------------------------
# Large sources, races of kiln's own, hostile bytes (issue 30).

# Sources of 50,000 small files (15 MB) with the default timeouts: the bundle must be in place
# and the first measurement running within 30 s of the start, with no worker lost.
fault_bundle_50k() {
    local f="sources of 50,000 files, default timeouts" rep dir rc note t0 ready took
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case big "$rep")
        write_bench "$dir"
        python3 "$LIB/faults_many_files.py" "$dir/bench"
        render "$LIB/templates/faults/big.sexp" TOKEN="$(basename "$dir")" WORKERS="$LOCAL" >"$dir/campaign.sexp"
        t0=$(date +%s%3N)
        start "$dir"
        finish "$KPID" 600; rc=$RC
        note=""
        [[ $rc == 0 ]] || note+="kiln run exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' '); "
        ready=$(grep -m1 "bundle .* stored in" "$dir/store/kiln.log" | cut -c1-23)
        if [[ -n $ready ]]; then
            took=$(($(date -d "$ready" +%s%3N) - t0))
            info "$f" "rep $rep: bundle in place, measuring, after $((took / 1000)).$(((took % 1000) / 100)) s; campaign $((($(date +%s%3N) - t0) / 1000)) s"
            [[ $took -lt 30000 ]] || note+="the first measurement began after $took ms; "
        else
            note+="the bundle was never stored; "
        fi
        grep -q "re-queued\|lost:" "$dir/store/kiln.log" &&
            note+="a worker was lost: $(grep -m1 're-queued\|lost:' "$dir/store/kiln.log"); "
        local left
        left=$(left_behind "$dir")
        read -r lost dbl _ verify <<<"$(check "$dir" - "big:0:3")"
        tally "$f" "$dir" "$lost" "$dbl" n.a. "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}

# Many short steps on 4 slots, each laying a cached 4 MB binary over its sources and running
# it while the other slots start theirs: no step may fail ("Text file busy" above all).
fault_exec_busy() {
    local f="many short steps of a restored binary on 4 slots (ETXTBSY)" rep dir rc note wrong
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case busy "$rep")
        mkdir -p "$dir/bench"
        cp /usr/bin/perl "$dir/bench/perl-copy"
        render "$LIB/templates/faults/busy.sexp" >"$dir/campaign.sexp"
        start "$dir"
        finish "$KPID" 600; rc=$RC
        note=""
        [[ $rc == 0 ]] || note+="kiln run exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' '); "
        wrong=$( (cd "$dir" && "$KILN" export store --table steps) | python3 "$LIB/faults_export.py" not-ok)
        (cd "$dir" && "$KILN" export store --table steps) | grep -q "Text file busy" && note+="Text file busy; "
        local left
        left=$(left_behind "$dir")
        read -r lost dbl _ verify <<<"$(check "$dir" - "busy:0:200")"
        tally "$f" "$dir" "$lost" "$dbl" n.a. "$verify" "$left" "$note" "$wrong"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}

# raw_controls FILE: whether FILE holds a character a terminal acts on (C0 but tab and newline,
# DEL, or C1).
raw_controls() { python3 "$LIB/faults_control_bytes.py" "$1"; }

# A benchmark whose failures write ESC, OSC 52, BEL and a C1 CSI to stderr: `kiln run`, status,
# show and the steps CSV print them escaped, and the store keeps them raw (`show --json`).
fault_hostile_output() {
    local f="benchmark writes terminal control bytes" rep dir rc note step wrong out
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case loud "$rep")
        config "$dir" "$LOCAL" "fine loud"
        start "$dir"
        finish "$KPID" 300; rc=$RC
        note=""
        [[ $rc == 0 ]] || note+="kiln run exited $rc; "
        read -r wrong _ <<<"$(mode_outcomes "$dir")"
        step=$( (cd "$dir" && "$KILN" export store --table steps --experiment walk) |
            python3 "$LIB/faults_export.py" first-failed)
        [[ -n $step ]] || note+="no failed step to show; "
        (cd "$dir" && "$KILN" status store >status.txt 2>&1)
        (cd "$dir" && "$KILN" show store "$step" >show.txt 2>&1)
        (cd "$dir" && "$KILN" show store "$step" --json >show.json 2>&1)
        (cd "$dir" && "$KILN" export store --table steps >steps.csv 2>&1)
        for out in kiln.out kiln.err status.txt show.txt steps.csv; do
            if raw_controls "$dir/$out"; then
                note+="$out holds raw control bytes; "
                wrong=$((wrong + 1))
            fi
        done
        grep -q '\\u001b\]52' "$dir/show.json" || note+="show --json lost the raw bytes; "
        grep -q 'x1b\]52' "$dir/show.txt" || note+="show does not show the escape; "
        local left
        left=$(left_behind "$dir")
        read -r lost dbl _ verify <<<"$(check "$dir" - "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" n.a. "$verify" "$left" "$note" "$wrong"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
