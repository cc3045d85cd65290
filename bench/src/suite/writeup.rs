//! REPORT.md: its frame (heading, the machine, the targets, the notes), each
//! section's part in order, and the cells those parts' tables share.

use std::fs;
use std::io::Write;

use anyhow::Result;

use super::Suite;
use crate::report::{fmt, Results, Table};

/// A target and how it fared: (target, measured, detail, met).
pub(super) type Target = (String, String, String, Option<bool>);

/// One section's part of the report, below its heading: written into the page, giving the
/// targets it checked.
type Part = fn(&Suite, &Page<'_>, &mut Vec<u8>) -> Result<Vec<Target>>;

/// What every part of the report reads: the results, and the labels of the version
/// under test (`after`) and of the baseline (`before`), if one was measured.
pub(super) struct Page<'a> {
    pub(super) r: &'a Results,
    pub(super) after: &'a str,
    before: Option<&'a str>,
}

impl Page<'_> {
    /// A column heading, naming the two versions where there are two.
    pub(super) fn both(&self, label: &str) -> String {
        match self.before {
            Some(b) => format!("{label} ({b} → {})", self.after),
            None => label.to_string(),
        }
    }

    /// A cell: the median of `after`, with the baseline's before it where there is one.
    pub(super) fn pair(&self, section: &str, config: &str, metric: &str) -> String {
        let a = self.r.median(section, config, self.after, metric);
        match self.before {
            Some(b) => format!(
                "{} → **{}**",
                fmt(self.r.median(section, config, b, metric)),
                fmt(a)
            ),
            None => fmt(a),
        }
    }

    /// A before → after table of campaign runs: one column per (heading, metric), one row
    /// per (section, config, row name); configs that did not run are left out.
    pub(super) fn campaign_table(
        &self,
        first: &str,
        columns: &[(&str, &str)],
        rows: &[(&str, &str, &str)],
    ) -> Table {
        let head: Vec<String> = std::iter::once(first.to_string())
            .chain(columns.iter().map(|(h, _)| self.both(h)))
            .collect();
        let mut t = Table::new(&head.iter().map(String::as_str).collect::<Vec<_>>());
        for &(sec, c, name) in rows {
            if self.r.median(sec, c, self.after, "steps").is_some() {
                t.row(
                    std::iter::once(name.to_string())
                        .chain(columns.iter().map(|(_, m)| self.pair(sec, c, m)))
                        .collect(),
                );
            }
        }
        t
    }
}

impl Suite {
    pub(super) fn write_report(&self) -> Result<()> {
        let path = self.out.join("REPORT.md");
        let mut o = Vec::new();
        self.report_into(&mut o)?;
        // scripts/bench-builds writes its steps per hour into the report; they stay.
        if let Some(kept) = fs::read_to_string(&path)
            .ok()
            .as_deref()
            .and_then(builds_part)
        {
            writeln!(o, "{kept}")?;
        }
        fs::write(path, o)?;
        Ok(())
    }

    fn report_into(&self, o: &mut Vec<u8>) -> Result<()> {
        let page = Page {
            r: &self.results,
            after: &self.versions[0].label,
            before: self.versions.get(1).map(|v| v.label.as_str()),
        };
        writeln!(o, "# kiln benchmark report\n")?;
        writeln!(
            o,
            "Written by `scripts/bench` ({} s). Every figure is the median over repetitions; raw values \
             are in `raw.csv` (section, config, tool, rep, metric, value). Where two kiln builds are \
             compared, cells read `before → **after**`.\n",
            self.started.elapsed().as_secs()
        )?;
        let mut t = Table::new(&["machine", ""]);
        for (k, v) in &self.machine {
            t.row(vec![k.clone(), v.clone()]);
        }
        t.write(o)?;
        // (section, heading, part); only the sections that ran have a part.
        let parts: [(&str, &str, Part); 6] = [
            (
                "overhead",
                "1. Orchestration overhead (no-op steps)",
                Suite::write_overhead,
            ),
            (
                "fidelity",
                "2. Measurement fidelity and overhead against hyperfine",
                Suite::write_fidelity,
            ),
            ("store", "3. The store", Suite::write_store),
            ("scale", "4. Scale: 64 worker slots", Suite::write_scale),
            ("slurm", "5. Slurm workers", Suite::write_slurm),
            ("fleet", "6. A hundred SSH workers", Suite::write_fleet),
        ];
        let mut targets = Vec::new();
        for (section, heading, part) in parts {
            if self.results.rows.iter().any(|x| x.section == section) {
                writeln!(o, "## {heading}\n")?;
                targets.extend(part(self, &page, o)?);
            }
        }
        writeln!(o, "## Targets\n")?;
        let mut t = Table::new(&["target", "measured", "detail", "met"]);
        for (name, value, detail, ok) in &targets {
            t.row(vec![
                name.clone(),
                value.clone(),
                detail.clone(),
                match ok {
                    Some(true) => "yes".into(),
                    Some(false) => "**no**".into(),
                    None => "—".into(),
                },
            ]);
        }
        t.write(o)?;
        if !self.notes.is_empty() {
            writeln!(o, "## Notes\n")?;
            for n in &self.notes {
                writeln!(o, "- {n}")?;
            }
            writeln!(o)?;
        }
        Ok(())
    }
}

/// The part of REPORT.md that scripts/bench-builds writes, markers included.
fn builds_part(report: &str) -> Option<&str> {
    const START: &str = "<!-- scripts/bench-builds -->";
    const END: &str = "<!-- end scripts/bench-builds -->";
    let start = report.find(START)?;
    let end = report[start..].find(END)? + start + END.len();
    Some(&report[start..end])
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_builds_part_is_found_between_its_markers() {
        let report = "# r\n\n<!-- scripts/bench-builds -->\n## 6\nrows\n<!-- end scripts/bench-builds -->\ntail\n";
        assert_eq!(
            super::builds_part(report),
            Some("<!-- scripts/bench-builds -->\n## 6\nrows\n<!-- end scripts/bench-builds -->")
        );
        assert_eq!(super::builds_part("# r\n"), None);
    }
}
