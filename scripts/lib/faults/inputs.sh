# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: malformed inputs, failed exports and oversized HTTP requests against a
# finished store, and the fuzzing row (read from results/fuzzing.md).
# Sourced by scripts/faults; defines the family's fault_* functions and their helpers.

# ---------------------------------------------------------------------------------------------
# Malformed inputs against a finished store, failed exports, oversized HTTP requests (issues 19
# and 30), and the fuzzers' row.

# Malformed inputs, each against a finished store: a clean refusal (exit 2, no panic, within
# 60 s and 4 GiB), and the store as it was (verify ok, the same steps).
fault_malformed() {
    local f="malformed inputs against a finished store" rep dir note rc
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(finished_copy malformed "$rep")
        trajectory "$dir" >"$dir/before.csv"
        note=""
        sed 's/(name walk)/(name "..\/x")/' "$dir/campaign.sexp" >"$dir/dotdot.sexp"
        head -c -3 "$dir/campaign.sexp" >"$dir/unbalanced.sexp"
        python3 "$LIB/faults_malformed_inputs.py" "$dir/huge.sexp" "$dir/deep.sexp"
        local cases=(
            "check dotdot.sexp" "run dotdot.sexp" "check unbalanced.sexp" "run unbalanced.sexp"
            "check /dev/zero" "run /dev/zero"
            "benchmark campaign.sexp ladder huge.sexp --store store"
            "benchmark campaign.sexp ladder deep.sexp --store store"
        )
        local c
        for c in "${cases[@]}"; do
            # shellcheck disable=SC2086
            (cd "$dir" && ulimit -v 4194304 && timeout 60 "$KILN" $c >case.out 2>case.err </dev/null)
            rc=$?
            echo "kiln $c: exit $rc: $(head -c 300 "$dir/case.err" | head -2 | tr '\n' ' ')" >>"$dir/faults.log"
            [[ $rc == 2 ]] && ! grep -q panicked "$dir/case.err" ||
                note+="'kiln $c' exited $rc ($(head -c 200 "$dir/case.err" | head -1)); "
        done
        [[ ! -e $WORK/x && ! -e $dir/x ]] || note+="'../x' created a folder; "
        local left
        left=$(left_behind "$dir")
        read -r lost dbl same verify <<<"$(check "$dir" "$dir/before.csv" "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
        cp "$dir/faults.log" "$WORK/malformed-$rep.log" 2>/dev/null
    done
}

# Exports with a bad argument onto an existing file: each exits 2 and leaves the file as it was.
fault_export_existing() {
    local f="failed export onto an existing file" rep dir rc note c changed
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(finished_copy export "$rep")
        note=""
        changed=0
        local cases=(
            "--table steps --experiment nosuch" "--table nosuch" "--table steps --format nosuch"
            "--table steps --experiment nosuch --format parquet"
        )
        for c in "${cases[@]}"; do
            echo "kept $RANDOM" >"$dir/keep.csv"
            cp "$dir/keep.csv" "$dir/keep.before"
            # shellcheck disable=SC2086
            (cd "$dir" && timeout 60 "$KILN" export store $c -o keep.csv >case.out 2>case.err </dev/null)
            rc=$?
            [[ $rc == 2 ]] || note+="'export $c' exited $rc; "
            cmp -s "$dir/keep.csv" "$dir/keep.before" || {
                note+="'export $c' changed keep.csv; "
                changed=$((changed + 1))
            }
        done
        compgen -G "$dir/.keep*" >/dev/null && note+="a temporary file was left; "
        local left
        left=$(left_behind "$dir")
        tally "$f" "$dir" 0 0 n.a. ok "$left" "$note" "$changed"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}

# `kiln serve` against oversized requests: a 1 MiB request line (414), 100 MB of headers (431,
# answered early, the server's peak memory small), a 404 that echoes nothing; SIGTERM exits 143
# and removes the plots' temporary folder.
fault_http_oversized() {
    local f="kiln serve: oversized requests, then SIGTERM" rep dir rc note port pid
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(finished_copy serve "$rep")
        mkdir -p "$dir/tmp"
        (cd "$dir" && exec env TMPDIR="$dir/tmp" "$KILN" serve store --port 0 >serve.out 2>serve.err </dev/null) &
        pid=$!
        note=""
        wait_until 20 grep -q "http://" "$dir/serve.out" || note+="serve printed no address; "
        port=$(grep -o '127.0.0.1:[0-9]*' "$dir/serve.out" | head -1 | cut -d: -f2)
        python3 "$LIB/faults_http_probe.py" "$port" "$pid" >"$dir/http.log" 2>&1 || note+="$(tail -1 "$dir/http.log"); "
        info "$f" "rep $rep: $(grep -m1 "431 after" "$dir/http.log")"
        [[ -n $(ls -A "$dir/tmp") ]] || note+="no plots folder was made to remove; "
        kill -TERM "$pid" 2>/dev/null
        finish "$pid" 30; rc=$RC
        [[ $rc == 143 ]] || note+="serve exited $rc on SIGTERM; "
        [[ -z $(ls -A "$dir/tmp") ]] || note+="left $(ls "$dir/tmp") behind; "
        local left
        left=$(left_behind "$dir")
        tally "$f" "$dir" 0 0 n.a. ok "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}

# The fuzzers' hours and findings (fuzz/, results/fuzzing.md): not run here, read.
fuzzing_row() {
    local f="fuzzed readers (cargo-fuzz; results/fuzzing.md)" summary
    summary=$(grep -m1 '^Summary:' results/fuzzing.md 2>/dev/null | sed 's/^Summary: //')
    ROW_ORDER+=("$f")
    REPS_DONE[$f]=1 LOST[$f]=0 DOUBLED[$f]=0 LEFT[$f]=0 SAME[$f]=n.a.
    if [[ -n $summary ]]; then
        CLEAN[$f]=yes
        INFO[$f]=$summary
    else
        CLEAN[$f]=no
        NOTE[$f]="results/fuzzing.md has no Summary line"
    fi
}
