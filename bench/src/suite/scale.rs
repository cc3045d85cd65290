//! §4, scale: the no-op campaign on 64 local worker slots; controller CPU
//! against the workers' and the machine's.

use std::io::Write;

use anyhow::Result;

use super::campaign::noop_config;
use super::writeup::{Page, Target};
use super::Suite;
use crate::report::fmt;

impl Suite {
    pub(super) fn scale(&mut self) -> Result<()> {
        let workers: Vec<String> = (1..=8)
            .map(|k| format!("(local (name l{k}) (slots 8))"))
            .collect();
        let config = noop_config(self.sizes.scale_steps, 16, 4, &workers.join("\n    "));
        for rep in 0..self.sizes.reps {
            for v in self.order(rep) {
                let r = self.campaign(&v, "local-64", &config, &[])?;
                self.record_campaign("scale", "local-64", &v.label, rep, &r);
            }
        }
        Ok(())
    }

    /// §4 of the report: 64 slots against the 2 of §1, and its target.
    pub(super) fn write_scale(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        let (r, after) = (p.r, p.after);
        let ov = "overhead";
        let sc = "scale";
        writeln!(
            o,
            "8 local workers × 8 slots, the no-op benchmark, 16 chains × parallel 4 ({} steps per chain). \
             ctl share = the controller's CPU / all CPU of the run (controller, workers, `true`); \
             all-CPU cores = that total / wall; machine busy = /proc/stat busy share over the run \
             (everything on the machine; {} cores).\n",
            self.sizes.scale_steps,
            self.nproc()
        )?;
        p.campaign_table(
            "config",
            &[
                ("steps/s", "steps_per_s"),
                ("ctl CPU ms/step", "ctl_cpu_ms_per_step"),
                ("workers CPU ms/step", "children_cpu_ms_per_step"),
                ("ctl share", "ctl_share_of_cpu"),
                ("ctl cores", "ctl_cores"),
                ("all-CPU cores", "tree_cores"),
                ("machine busy", "machine_busy"),
            ],
            &[
                (ov, "local", "local, 2 slots (§1)"),
                (sc, "local-64", "local, 8 × 8 slots"),
            ],
        )
        .write(o)?;
        let share = r.median(sc, "local-64", after, "ctl_share_of_cpu");
        let busy = r.median(sc, "local-64", after, "machine_busy");
        let cores = r.median(sc, "local-64", after, "ctl_cores");
        Ok(vec![(
            "64 slots: cores saturated before the controller is".into(),
            format!(
                "ctl {} of a core, {} of all CPU; machine {} busy",
                fmt(cores),
                fmt(share),
                fmt(busy)
            ),
            p.pair(sc, "local-64", "steps_per_s") + " steps/s",
            cores.zip(busy).map(|(c, b)| c < 0.5 && b > 0.9),
        )])
    }
}
