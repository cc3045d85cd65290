//! Readers of `/proc/<pid>/...`, shared by the launcher (which reaps a
//! killed process group's members) and the sampler (which measures them).
//! Kept apart so that neither of those modules depends on the other for them.

/// The pids whose process group is `pgid`, from `/proc`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| stat_field(&s, 5))
                .is_some_and(|g| g == pgid as i64)
        })
        .collect()
}

/// The resident memory of one process from its `stat` line, bytes (field 24, in pages).
pub fn resident_bytes(stat: &str) -> Option<u64> {
    Some(stat_field(stat, 24)?.max(0) as u64 * page_size())
}

/// The summed resident memory of the process group `pgid`, bytes.
pub fn group_resident_bytes(pgid: i32) -> u64 {
    group_members(pgid)
        .into_iter()
        .filter_map(|pid| {
            resident_bytes(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
        })
        .sum()
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no memory arguments.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/<pid>/stat` line, for fields after the name.
pub fn stat_field(stat: &str, n: usize) -> Option<i64> {
    // The name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_odd_names() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 5 1000 25";
        assert_eq!(stat_field(line, 4), Some(1));
        assert_eq!(stat_field(line, 5), Some(42));
        assert_eq!(stat_field(line, 14), Some(7));
        assert_eq!(stat_field(line, 24), Some(25));
    }
}
