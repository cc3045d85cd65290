# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: accounting: each fault's repetitions add up into one row of the report.
# Sourced by scripts/faults.

declare -A LOST DOUBLED SAME LEFT NOTE REPS_DONE CLEAN WRONG INFO
# tally FAULT DIR LOST DOUBLED SAME VERIFY LEFT [NOTE [WRONG]]: one repetition's figures; WRONG
# counts measurements recorded that are not what they claim (a damaged binary measured, a
# failure recorded as kiln's own, a worker loss recorded as a result).
tally() {
    local f=$1 dir=$2 lost=$3 dbl=$4 same=$5 verify=$6 left=$7 note=${8:-} wrong=${9:-0}
    [[ -n ${REPS_DONE[$f]:-} ]] || ROW_ORDER+=("$f")
    WRONG[$f]=$((${WRONG[$f]:-0} + wrong))
    [[ $wrong == 0 ]] || note="$wrong wrong measurements; $note"
    LOST[$f]=$((${LOST[$f]:-0} + lost))
    DOUBLED[$f]=$((${DOUBLED[$f]:-0} + dbl))
    LEFT[$f]=$((${LEFT[$f]:-0} + left))
    REPS_DONE[$f]=$((${REPS_DONE[$f]:-0} + 1))
    case "${SAME[$f]:-},$same" in
        ,*) SAME[$f]=$same ;;
        no,* | *,no) SAME[$f]=no ;;
    esac
    local bad=""
    [[ $lost == 0 && $dbl == 0 && $left == 0 && $same != no && -z $note ]] || bad=1
    [[ $verify == ok ]] || { bad=1; note="store verify failed; $note"; }
    [[ -z $note ]] || NOTE[$f]="${NOTE[$f]:-}${NOTE[$f]:+; }$note"
    if [[ -n $bad ]]; then
        CLEAN[$f]=no
        evidence "NOT CLEAN: $f in $dir: lost $lost, doubled $dbl, identical $same, verify $verify, left behind $left. $note"
    else
        CLEAN[$f]=${CLEAN[$f]:-yes}
        rm -rf "$dir"
    fi
}
skip_row() { ROW_ORDER+=("$1"); NOTE[$1]="skipped: $2"; CLEAN[$1]=skipped; REPS_DONE[$1]=0; log "skip $1: $2"; }
info() { INFO[$1]="${INFO[$1]:-}${INFO[$1]:+; }$2"; } # FAULT TEXT: a figure for the notes, not a fault
ROW_ORDER=()
wanted() { [[ -z $ONLY || ",$ONLY," == *",$1,"* ]]; }
