# shellcheck shell=bash disable=SC2034,SC2004 # (the globals are set, and the arrays declared, in scripts/faults)
# scripts/faults: the store damaged (random bytes, truncated) or its disk full.
# Sourced by scripts/faults; defines the family's fault_* functions and their helpers.

# ---------------------------------------------------------------------------------------------
# 7. The store: corrupt, truncated, full disk (malformed inputs against a finished store: inputs.sh).

# DAMAGE DIR damages the copy; verify must report it (exit 1), `kiln run` must refuse or
# resume, never panic; lost/doubled are n.a. (the damage destroys data on purpose).
store_damage() {
    local f=$1 name=$2 damage=$3 rep dir rc note
    for ((rep = 1; rep <= REPS; rep++)); do
        dir=$(finished_copy "$name" "$rep")
        "$damage" "$dir/store/db"
        note=""
        (cd "$dir" && timeout 60 "$KILN" store verify store >verify.out 2>verify.err)
        rc=$?
        clean_exit "$rc" "$dir/verify.err" || note+="store verify exited $rc: $(grep -m1 -i 'panicked\|error' "$dir/verify.err"); "
        (cd "$dir" && timeout 120 "$KILN" run campaign.sexp >run.out 2>run.err </dev/null)
        rc=$?
        [[ $rc == 0 ]] || clean_exit "$rc" "$dir/run.err" ||
            note+="kiln run exited $rc: $(grep -m1 -i 'panicked\|error' "$dir/run.err"); "
        local left
        left=$(left_behind "$dir")
        tally "$f" "$dir" 0 0 n.a. ok "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
# sled keeps its data in db/db (and blobs/ for large values).
corrupt() { # 64 KiB of random bytes in the middle of every file of the db
    local file size
    for file in $(find "$1" -type f); do
        size=$(stat -c %s "$file")
        [[ $size -gt 0 ]] || continue
        head -c 65536 /dev/urandom | dd of="$file" bs=1 seek=$((size / 2)) conv=notrunc status=none
    done
}
truncate_half() {
    local file
    for file in $(find "$1" -type f -size +0); do truncate -s $(($(stat -c %s "$file") / 2)) "$file"; done
}
fault_store_corrupt() { store_damage "database corrupted (random bytes)" corrupt corrupt; }
fault_store_truncated() { store_damage "database truncated to half" truncated truncate_half; }

# The disk fills mid-campaign (a 64 MiB tmpfs): kiln must stop cleanly; with space again the
# resume ends with the reference trajectory.
fault_disk_full() {
    local f="disk full mid-campaign (tmpfs)" rep dir mnt rc note
    for ((rep = 1; rep <= REPS; rep++)); do
        mnt=$WORK/disk-$rep
        mkdir -p "$mnt"
        if ! mount -t tmpfs -o size=64m kiln-faults "$mnt" 2>/dev/null; then
            skip_row "$f" "cannot mount a tmpfs here (not root or no CAP_SYS_ADMIN)"
            return
        fi
        dir=$mnt/kf$$-diskfull-$rep
        mkdir -p "$dir"
        config "$dir" "$LOCAL"
        start "$dir"
        wait_until 60 has_decided "$dir" $((2 + RANDOM % (EXPECTED / 2)))
        dd if=/dev/zero of="$mnt/filler" bs=1M status=none 2>/dev/null
        finish "$KPID" 120; rc=$RC
        note=""
        # Full for the rest of the campaign: kiln either finishes (nothing more to write that
        # did not fit) or stops with an error; a panic or a signal is not clean.
        [[ $rc == 0 ]] || clean_exit "$rc" "$dir/kiln.err" || note+="kiln run exited $rc on a full disk: $(grep -m1 -i 'panicked\|error' "$dir/kiln.err"); "
        echo "full disk: kiln exited $rc: $(tail -1 "$dir/kiln.err")" >>"$WORK/diskfull.log"
        rm -f "$mnt/filler"
        local left
        left=$(left_behind "$dir")
        start "$dir"
        finish "$KPID" 300; rc=$RC
        [[ $rc == 0 ]] || note+="resume exited $rc: $(tail -2 "$dir/kiln.err" | tr '\n' ' '); "
        left=$((left + $(left_behind "$dir")))
        read -r lost dbl same verify <<<"$(check "$dir" "$WORK/reference.csv" "$EXPECT_ALL")"
        local keep=$WORK/kf$$-diskfull-$rep
        cp -a "$dir" "$keep"
        umount "$mnt"
        tally "$f" "$keep" "$lost" "$dbl" "$same" "$verify" "$left" "$note"
        [[ -z $note ]] || CLEAN[$f]=no
    done
}
