# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: a local worker killed, frozen or its folder removed mid-step, the
# controller paused past the loss timeout, and a step that kills its worker.
# Sourced by scripts/faults; defines the family's fault_* functions and their helpers.

# ---------------------------------------------------------------------------------------------
# 3-4. A local worker killed or frozen mid-step: lost, its steps re-queued, the campaign ends.

local_serve_pid() { pgrep -P "$1" -x kiln-worker | head -1; } # PID: its local worker

# signal_worker DIR: sends $SIGNAL to the campaign's local worker, its PID kept in DIR/signalled.
signal_worker() {
    local pid
    pid=$(local_serve_pid "$KPID")
    echo "$pid" >"$1/signalled"
    if [[ -z $pid ]]; then echo "no local worker found to signal; "; else kill "-$SIGNAL" "$pid"; fi
}
# requeued DIR: the signalled worker let go on (a stopped one), and its step re-queued.
requeued() {
    kill -CONT "$(cat "$1/signalled")" 2>/dev/null
    grep -q "re-queued" "$1/store/kiln.log" || echo "no step re-queued in kiln.log; "
}
worker_fault() { SIGNAL=$2 local_fault "$1" "$3" signal_worker requeued; }
fault_worker_kill9() { worker_fault "local worker kill -9 mid-step" KILL wkill; }
fault_worker_sigstop() { worker_fault "local worker SIGSTOP mid-step (lost after 3 s)" STOP wstop; }

# Issue 58: the worker's folder removed mid-step, and the controller itself paused past the
# loss timeout. Neither may lose, double or fail a step, nor need a rerun.
# local_fault FAULT NAME ACTION [AFTER]: a campaign on the local worker; ACTION DIR runs once
# it is mid-step, AFTER DIR once it ended, each printing what it found wrong.
local_fault() {
    local f=$1 name=$2 action=$3 after=${4:-} rep dir rc note
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case "$name" "$rep")
        config "$dir" "$LOCAL"
        start "$dir"
        note=""
        if wait_until 60 has_decided "$dir" $((2 + RANDOM % (EXPECTED / 2))) && wait_until 10 mid_step "$dir/store"; then
            note=$("$action" "$dir")
        else
            note="never mid-step; "
        fi
        finish "$KPID" 180; rc=$RC
        [[ $rc == 0 ]] || note+="kiln run exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' '); "
        local left
        left=$(left_behind "$dir")
        [[ -z $after ]] || note+=$("$after" "$dir")
        read -r lost dbl same verify <<<"$(check "$dir" "$WORK/reference.csv" "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
remove_worker_folder() { rm -rf "$1/store/workers/local"; }
pause_controller() {
    kill -STOP "$KPID"
    sleep 6
    kill -CONT "$KPID"
    sleep 2
    if grep -q "lost: " "$1/store/kiln.log"; then
        echo "a worker was declared lost: $(grep -m1 'lost: ' "$1/store/kiln.log" | cut -c1-160); "
    fi
}
fault_worker_folder_removed() { local_fault "local worker's folder removed mid-step" wfolder remove_worker_folder; }
fault_controller_paused() {
    local_fault "controller paused (SIGSTOP) 6 s, past the 3 s loss timeout" cpause pause_controller
}

# ---------------------------------------------------------------------------------------------
# Poison steps (issue 30).

# One knob value kills its worker (kill -9 of the worker from the benchmark): its steps end as
# "worker lost while running this step (3 times ...)", and the campaign ends by itself.
fault_poison_step() {
    local f="decision set that kills its worker (step-losses 3)" rep dir rc note t0 wrong hits
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case poison "$rep")
        config "$dir" "$LOCAL" "fine kill"
        t0=$SECONDS
        start "$dir"
        finish "$KPID" 300; rc=$RC
        note=""
        [[ $rc == 0 ]] || note+="kiln run exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' '); "
        read -r wrong hits <<<"$(mode_outcomes "$dir")"
        [[ $hits -gt 0 ]] || note+="the walk never drew the killing value; "
        info "$f" "rep $rep: $hits poison steps, $((SECONDS - t0)) s"
        (cd "$dir" && "$KILN" export store --table steps) | grep -q "worker lost while running this step (3 times" ||
            note+="no step says 'worker lost while running this step (3 times'; "
        # The losses are the set's: its workers sit out no quarantine for it.
        ! grep -q "quarantined" "$dir/store/kiln.log" ||
            note+="a worker was quarantined for a poison set: $(grep -m1 quarantined "$dir/store/kiln.log"); "
        local left
        left=$(left_behind "$dir")
        read -r lost dbl _ verify <<<"$(check "$dir" - "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" n.a. "$verify" "$left" "$note" "$wrong"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
