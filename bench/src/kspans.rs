//! Runs as the kernel saw them: when each run's program was exec'd and when
//! it exited, from the `sched` trace events, recorded in a tracefs instance
//! of our own (ftrace: no perf events, so nothing that changes how the
//! kernel switches a task with perf counters, as kiln's runs have).
//!
//! Two tools that time different spans of a run (kiln from just before exec
//! to the exit it is told of, hyperfine from before its spawn to after its
//! wait) cannot compare their overheads by their own clocks. The kernel's
//! clock is the same for both: the time from one run's exit to the next
//! run's exec is what a tool spends per run on everything but the program
//! (the end of the exit, reaping, counters, bookkeeping, the next spawn),
//! whatever it times.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Where tracefs is mounted, in the order tried.
const TRACEFS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Ring buffer per CPU, KiB: room for a few hundred thousand events.
const BUFFER_KB: &str = "32768";

/// The events recorded.
const EVENTS: &[&str] = &[
    "sched/sched_process_fork",
    "sched/sched_process_exec",
    "sched/sched_process_exit",
];

/// A tracefs instance recording process fork, exec and exit.
pub struct Recorder {
    instance: PathBuf,
}

impl Recorder {
    /// Starts recording (a fresh instance, CLOCK_MONOTONIC timestamps, the
    /// forking process's thread group id in each line); `Err` where tracefs
    /// is not mounted or not writable (not root).
    pub fn start() -> Result<Recorder> {
        let root = TRACEFS
            .iter()
            .map(Path::new)
            .find(|p| p.join("instances").is_dir())
            .context("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)")?;
        remove_stale_instances(&root.join("instances"));
        let instance = root.join(format!("instances/kiln-bench-{}", std::process::id()));
        fs::create_dir(&instance)
            .with_context(|| format!("cannot create {}", instance.display()))?;
        let recorder = Recorder { instance };
        let set = |file: &str, value: &str| {
            let path = recorder.instance.join(file);
            fs::write(&path, value).with_context(|| format!("cannot write {}", path.display()))
        };
        // One clock for every CPU: a run may exit on one and the next exec on another.
        set("trace_clock", "mono")?;
        set("buffer_size_kb", BUFFER_KB)?;
        set("options/record-tgid", "1")?;
        for event in EVENTS {
            set(&format!("events/{event}/enable"), "1")?;
        }
        set("tracing_on", "1")?;
        Ok(recorder)
    }

    /// Stops recording and returns the events, in time order.
    pub fn finish(self) -> Result<Vec<Event>> {
        fs::write(self.instance.join("tracing_on"), "0")?;
        let text = fs::read_to_string(self.instance.join("trace"))?;
        let mut events: Vec<Event> = text.lines().filter_map(Event::parse).collect();
        events.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
        let lost = text
            .lines()
            .find_map(|l| l.strip_prefix("# entries-in-buffer/entries-written: "))
            .and_then(|s| s.split_once('/'))
            .and_then(|(kept, written)| {
                Some(written.trim().parse::<u64>().ok()? - kept.trim().parse::<u64>().ok()?)
            });
        if let Some(n) = lost.filter(|&n| n > 0) {
            bail!("the trace buffer overflowed: {n} events lost");
        }
        Ok(events)
    }
}

/// Removes the instances of bench runs that were killed before they could
/// (each holds its ring buffers until removed).
fn remove_stale_instances(instances: &Path) {
    let Ok(entries) = fs::read_dir(instances) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("kiln-bench-")) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Events off, then the instance (and its buffer) goes.
        for event in EVENTS {
            let _ = fs::write(self.instance.join(format!("events/{event}/enable")), "0");
        }
        let _ = fs::remove_dir(&self.instance);
    }
}

/// One recorded tracepoint hit.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Kernel time, seconds.
    pub time_s: f64,
    /// What happened.
    pub kind: EventKind,
}

/// The three tracepoints.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// Process `parent` (its thread group) created `child`.
    Fork { parent: u32, child: u32 },
    /// `pid` exec'd `filename`.
    Exec { pid: u32, filename: String },
    /// `pid` exited.
    Exit { pid: u32 },
}

impl Event {
    /// Parses a line of an instance's `trace` with `record-tgid`, as
    /// `  kiln-worker-100   (    100) [001] ..... 17500.000001: sched_process_fork: comm=kiln-worker pid=100 child_comm=kiln-worker child_pid=101`
    /// (the task's name may hold anything, so it is read from the right).
    fn parse(line: &str) -> Option<Event> {
        let (left, rest) = line.split_once(": sched_process_")?;
        let (event, fields) = rest.split_once(": ")?;
        let mut tokens = left.rsplitn(3, ' ');
        let time_s: f64 = tokens.next()?.parse().ok()?;
        let task = tokens.nth(1)?;
        // "name-tid   (  tgid) [cpu]": the thread group id is in the last parentheses.
        let tgid_at = task.rfind('(')?;
        let tgid: u32 = task[tgid_at + 1..].split(')').next()?.trim().parse().ok()?;
        let fields: BTreeMap<&str, &str> = fields
            .split_whitespace()
            .filter_map(|f| f.split_once('='))
            .collect();
        let pid = |k: &str| fields.get(k)?.parse::<u32>().ok();
        let kind = match event {
            "fork" => EventKind::Fork {
                parent: tgid,
                child: pid("child_pid")?,
            },
            "exec" => EventKind::Exec {
                pid: pid("pid")?,
                filename: fields.get("filename")?.to_string(),
            },
            "exit" => EventKind::Exit { pid: pid("pid")? },
            _ => return None,
        };
        Some(Event { time_s, kind })
    }
}

/// The programs a tool process ran for its runs: `[exec, exit]` in kernel
/// time for each child of `tool` that exec'd a file named `program` (its
/// last path component), in order.
pub fn runs_of(events: &[Event], tool: u32, program: &str) -> Vec<(f64, f64)> {
    let name = |f: &str| Path::new(f).file_name().map(|n| n == program);
    let mut children = std::collections::HashSet::new();
    let mut open: BTreeMap<u32, f64> = BTreeMap::new();
    let mut runs = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::Fork { parent, child } if *parent == tool => {
                children.insert(*child);
            }
            EventKind::Exec { pid, filename }
                if children.contains(pid) && name(filename) == Some(true) =>
            {
                open.insert(*pid, e.time_s);
            }
            EventKind::Exit { pid } => {
                if let Some(exec) = open.remove(pid) {
                    runs.push((exec, e.time_s));
                }
                // A pid exits once: a later fork may reuse it for another process.
                children.remove(pid);
            }
            _ => {}
        }
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs
}

/// The time from each run's exit to the next run's exec, seconds.
pub fn gaps(runs: &[(f64, f64)]) -> Vec<f64> {
    runs.windows(2).map(|w| w[1].0 - w[0].1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_events() {
        let fork = "     kiln-work(x)-100     (    100) [001] ..... 17500.000001: sched_process_fork: comm=kiln-worker pid=100 child_comm=kiln-worker child_pid=101";
        let exec = "            true-101     (    101) [000] ..... 17500.000025: sched_process_exec: filename=/usr/bin/true pid=101 old_pid=101";
        let exit = "            true-101     (    101) [000] ..... 17500.000030: sched_process_exit: comm=true pid=101 prio=120 group_dead=true";
        assert_eq!(
            Event::parse(fork).unwrap().kind,
            EventKind::Fork {
                parent: 100,
                child: 101
            }
        );
        assert_eq!(
            Event::parse(exec).unwrap(),
            Event {
                time_s: 17500.000025,
                kind: EventKind::Exec {
                    pid: 101,
                    filename: "/usr/bin/true".into()
                }
            }
        );
        assert_eq!(
            Event::parse(exit).unwrap().kind,
            EventKind::Exit { pid: 101 }
        );
        assert_eq!(Event::parse("# tracer: nop"), None);
    }

    #[test]
    fn runs_are_the_tools_children_that_ran_the_program() {
        let ev = |t: f64, kind| Event { time_s: t, kind };
        let events = vec![
            ev(
                1.0,
                EventKind::Fork {
                    parent: 10,
                    child: 11,
                },
            ),
            ev(
                1.1,
                EventKind::Exec {
                    pid: 11,
                    filename: "/usr/bin/true".into(),
                },
            ),
            // Another process's run of the same program is not ours.
            ev(
                1.15,
                EventKind::Fork {
                    parent: 99,
                    child: 98,
                },
            ),
            ev(
                1.16,
                EventKind::Exec {
                    pid: 98,
                    filename: "/usr/bin/true".into(),
                },
            ),
            ev(1.2, EventKind::Exit { pid: 11 }),
            ev(1.25, EventKind::Exit { pid: 98 }),
            ev(
                1.3,
                EventKind::Fork {
                    parent: 10,
                    child: 12,
                },
            ),
            ev(
                1.35,
                EventKind::Exec {
                    pid: 12,
                    filename: "/usr/bin/true".into(),
                },
            ),
            ev(1.6, EventKind::Exit { pid: 12 }),
        ];
        let runs = runs_of(&events, 10, "true");
        assert_eq!(runs, vec![(1.1, 1.2), (1.35, 1.6)]);
        let g = gaps(&runs);
        assert_eq!(g.len(), 1);
        assert!((g[0] - 0.15).abs() < 1e-12);
    }
}
