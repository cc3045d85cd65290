use super::*;

#[test]
fn finds_the_unified_mount_among_v1_ones() {
    let info = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    assert_eq!(
        cgroup2_mount(info),
        Some(PathBuf::from("/sys/fs/cgroup/unified"))
    );
    assert_eq!(cgroup2_mount(&info[..info.find('\n').unwrap()]), None);
}

#[test]
fn finds_its_own_folder_in_each_v1_hierarchy() {
    let info = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                36 31 0:33 /box /mnt/cpuacct rw - cgroup cgroup rw,cpuacct,cpu\n\
                41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    let own = "4:memory:/process_api/b5\n2:cpuacct:/\n1:cpu:/\n0::/\n";
    assert_eq!(
        v1_own_dir(info, own, "memory"),
        Ok(PathBuf::from("/sys/fs/cgroup/memory/process_api/b5"))
    );
    assert_eq!(
        v1_own_dir(info, own, "cpu"),
        Ok(PathBuf::from("/sys/fs/cgroup/cpu"))
    );
    // A subtree mounted elsewhere, controllers sharing a hierarchy.
    let shared = "36 31 0:33 /box /mnt/cpuacct rw - cgroup cgroup rw,cpuacct,cpu\n";
    assert_eq!(
        v1_own_dir(shared, "3:cpu,cpuacct:/box/run\n", "cpu"),
        Ok(PathBuf::from("/mnt/cpuacct/run"))
    );
    let e = v1_own_dir(info, own, "pids").unwrap_err();
    assert!(e.contains("pids controller"), "{e}");
    let e = v1_own_dir(info, "0::/\n", "memory").unwrap_err();
    assert!(e.contains("/proc/self/cgroup"), "{e}");
}

#[test]
fn reads_membership_and_events() {
    assert_eq!(
        unified_path("4:memory:/a\n0::/user.slice/x.scope\n"),
        Some("/user.slice/x.scope")
    );
    assert_eq!(unified_path("4:memory:/a\n"), None);
    let events = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n";
    assert_eq!(keyed_value(events, "oom_kill"), Some(2));
    assert_eq!(keyed_value(events, "oom"), Some(1));
}

#[test]
fn missing_controllers_are_named() {
    let support = LimitSupport {
        cpu: true,
        memory: false,
        detail: "x offers: cpu".into(),
        cgroup: Some(CgroupVersion::V2),
    };
    let limits = Limits {
        cpus: Some(1.0),
        memory_bytes: Some(1 << 20),
    };
    let e = support.check(&limits).unwrap_err();
    assert!(e.contains("memory controller"), "{e}");
    assert!(e.contains("(memory 1048576)"), "{e}");
    assert!(support
        .check(&Limits {
            cpus: Some(2.0),
            memory_bytes: None
        })
        .is_ok());
}
