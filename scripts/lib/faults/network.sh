# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: SSH workers on real sshd daemons in network namespaces: links cut,
# remote serves killed or stopped, sshd restarted, host keys changed.
# Sourced by scripts/faults; defines the family's fault_* functions and their helpers.

# ---------------------------------------------------------------------------------------------
# 5. SSH workers on real sshd daemons in network namespaces (scripts/ssh-rig).

rig_up() {
    [[ -n ${RIG_UP:-} ]] && return 0
    local why
    why=$(scripts/ssh-rig check netns 2>&1) || { RIG_SKIP=${why#SKIP: }; return 1; }
    SSH_RIG_PORT=2391 SSH_RIG_NS_PREFIX=kf SSH_RIG_NET=219 scripts/ssh-rig netns-up "$RIG" 2 \
        >"$WORK/rig.log" 2>&1 || { RIG_SKIP="ssh-rig netns-up failed: $(tail -1 "$WORK/rig.log")"; return 1; }
    RIG_UP=1
    cp "$BIN/kiln-worker" "$RIG/kiln-worker.local"
}
rig() { SSH_RIG_PORT=2391 SSH_RIG_NS_PREFIX=kf SSH_RIG_NET=219 scripts/ssh-rig "$@" >>"$WORK/rig.log" 2>&1; }
ssh_workers() { # DIR
    local k host port entries=""
    while read -r k _ host port _ _; do
        entries+="(ssh (name w$k) (host \"$host\") (port $port) (user \"root\") (identity \"$RIG/client_key\")
     (known-hosts \"$RIG/known_hosts\") (rundir \"$1/rundir-$k\") (slots 1)) "
    done <"$RIG/hosts"
    echo "(workers $entries)"
}
remote_serve_pid() { pgrep -f -- "$1/rundir-$2/kiln-worker serve" | head -1; }

# ssh_fault FAULT NAME ACTION: ACTION DIR runs once w2 is mid-step; the campaign must end
# with every step once and the reference trajectory.
ssh_fault() {
    local f=$1 name=$2 action=$3 rep dir rc note
    if ! rig_up; then skip_row "$f" "$RIG_SKIP"; return; fi
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case "$name" "$rep")
        config "$dir" "$(ssh_workers "$dir")"
        start "$dir" KILN_WORKER="$RIG/kiln-worker.local"
        note=""
        if wait_until 90 has_decided "$dir" 3 && wait_until 30 mid_step "$dir/rundir-2"; then
            note=$("$action" "$dir")
        else
            note="w2 never mid-step; "
        fi
        finish "$KPID" 240; rc=$RC
        [[ $rc == 0 ]] || note="kiln run exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' ') $note"
        local left
        left=$(left_behind "$dir")
        read -r lost dbl same verify <<<"$(check "$dir" "$WORK/reference.csv" "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
cut_heal() { rig cut "$RIG" 2; sleep 6; rig heal "$RIG" 2; }
kill_remote() {
    local pid
    pid=$(remote_serve_pid "$1" 2)
    if [[ -n $pid ]]; then kill -KILL "$pid"; else echo "no remote serve found; "; fi
}
restart_sshd() { rig restart "$RIG" 2; }
stop_remote() {
    local pid
    pid=$(remote_serve_pid "$1" 2)
    [[ -n $pid ]] || { echo "no remote serve found; "; return; }
    kill -STOP "$pid"
    sleep 6
    kill -CONT "$pid"
}
fault_ssh_cut() { ssh_fault "ssh link cut 6 s, then healed (netns)" sshcut cut_heal; }
fault_ssh_kill() { ssh_fault "ssh remote serve kill -9" sshkill kill_remote; }
fault_ssh_restart() { ssh_fault "ssh sshd restarted mid-step" sshrestart restart_sshd; }
fault_ssh_stop() { ssh_fault "ssh remote serve SIGSTOP 6 s, then SIGCONT" sshstop stop_remote; }

# Host key change: daemon 2 gets a new key (restarted with it) after known_hosts recorded the
# old one. kiln must refuse to connect to it, finish on w1, and record nothing from w2.
# (Changed mid-campaign, the campaign of a few seconds often ends before the daemon is back.)
fault_ssh_rekey() {
    local f="ssh host key changed" rep dir rc note t
    if ! rig_up; then skip_row "$f" "$RIG_SKIP"; return; fi
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(new_case sshrekey "$rep")
        config "$dir" "$(ssh_workers "$dir")"
        note=""
        t=0
        rig rekey "$RIG" 2
        start "$dir" KILN_WORKER="$RIG/kiln-worker.local"
        finish "$KPID" 240; rc=$RC
        [[ $rc == 0 ]] || note+="kiln run exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' ')"
        grep -qi "host key\|host identification" "$dir/store/kiln.log" "$dir/kiln.err" ||
            note+="no host key refusal logged; "
        local after
        after=$( (cd "$dir" && "$KILN" export store --table steps) |
            python3 "$LIB/faults_export.py" dispatched-after w2 "$t")
        [[ $after == 0 ]] || note+="$after steps recorded from w2 after its key changed; "
        local left
        left=$(left_behind "$dir")
        read -r lost dbl same verify <<<"$(check "$dir" "$WORK/reference.csv" "$EXPECT_ALL")"
        tally "$f" "$dir" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
        # Back to the key the rig's known_hosts holds, for the next repetition.
        rig down "$RIG"
        RIG_UP=""
        rig_up || true
    done
}
