# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: the controller killed, stopped by a signal, or raced by a second
# controller on its live store.
# Sourced by scripts/faults; defines the family's fault_* functions and their helpers.

# ---------------------------------------------------------------------------------------------
# 1-2. The controller killed or stopped by a signal.

# Two SIGKILLs per repetition, each at a random moment of the run, then a resume.
fault_controller_sigkill() {
    local f="controller SIGKILL (2 per rep, random moments)" rep k dir ms
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case sigkill "$rep")
        config "$dir" "$LOCAL"
        for k in 1 2; do
            ms=$((300 + RANDOM % (REF_S * 800 + 1)))
            start "$dir"
            sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
            kill -KILL "$KPID" 2>/dev/null
            wait "$KPID" 2>/dev/null
            echo "killed after ${ms} ms, $(decided "$dir") decided" >>"$dir/faults.log"
        done
        resume_and_check "$f" "$dir"
    done
}

# SIGNAL mid-step (a slot's benchmark running, a few steps decided); expects exit 128+n.
controller_signal() {
    local f=$1 sig=$2 want=$3 name=$4 rep dir rc note
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case "$name" "$rep")
        config "$dir" "$LOCAL"
        start "$dir"
        wait_until 60 has_decided "$dir" $((2 + RANDOM % (EXPECTED / 2))) && wait_until 10 mid_step "$dir/store"
        kill "-$sig" "$KPID"
        finish "$KPID" 30; rc=$RC
        note=""
        [[ $rc == "$want" ]] || note="exit $rc, expected $want"
        resume_and_check "$f" "$dir" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
fault_controller_sigterm() { controller_signal "controller SIGTERM mid-step (exit 143)" TERM 143 sigterm; }
fault_controller_sigint() { controller_signal "controller SIGINT mid-step (exit 130)" INT 130 sigint; }

# ---------------------------------------------------------------------------------------------
# A second controller (issue 30).

# A second `kiln run --force-new` while the campaign runs: refused (exit 1, naming the holder's
# pid), nothing moved, and the running campaign ends on the reference trajectory.
fault_force_new_live() {
    local f="kiln run --force-new on a live store" rep dir rc note
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case forcenew "$rep")
        config "$dir" "$LOCAL"
        start "$dir"
        note=""
        wait_until 60 has_decided "$dir" $((1 + RANDOM % (EXPECTED / 2))) || note+="no progress; "
        (cd "$dir" && timeout 60 "$KILN" run campaign.sexp --force-new >second.out 2>second.err </dev/null)
        rc=$?
        [[ $rc == 1 ]] || note+="the second run exited $rc; "
        grep -q "in use by another controller: pid $KPID" "$dir/second.err" ||
            note+="the refusal names no holder: $(head -c 200 "$dir/second.err"); "
        compgen -G "$dir/store.old-*" >/dev/null && note+="the live store was moved; "
        finish "$KPID" 300; rc=$RC
        [[ $rc == 0 ]] || note+="the first run exited $rc; "
        local left
        left=$(left_behind "$dir")
        read -r lost dbl same verify <<<"$(check "$dir" "$WORK/reference.csv" "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
