# The last screen of scripts/test: the totals, and the failing and skipped tests by name.
# Usage: awk -v logfile=LOG -F '\t' -f test-summary.awk SKIPPED LOG
# The skipped tests, each once (a test may skip several parts), with the first reason.
FILENAME == ARGV[1] {
    if (!($1 in reason)) { reason[$1] = $2; order[++n] = $1 }
    next
}
/^test result:/ { split($0, w, " "); bins++; passed += w[4]; failed += w[6]; ignored += w[8] }
/ \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); bad = bad "\n  " $0; lost[$0] = 1 }
END {
    # A test that skipped a part and then failed is counted and named as failed.
    for (i = 1; i <= n; i++) {
        test = order[i]
        name = test; sub(/^[^:]*::/, "", name)
        if (!(name in lost)) { skips++; listed = listed "\n  " test ": " reason[test] }
    }
    printf "\nscripts/test: %d passed, %d failed, %d skipped%s, %d ignored, in %d test binaries (full output: %s)\n",
        passed - skips, failed, skips, skips ? " (named below)" : "", ignored, bins, logfile
    if (bad != "") printf "failed:%s\n", bad
    if (listed != "") printf "skipped:%s\n", listed
}
