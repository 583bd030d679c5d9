//! What a build applied, as the text every face prints: the convolutions' algorithms,
//! the groups a log's in-network check keeps on their default, the hooks' warnings,
//! how many groups a log reached (or why none), and the build's one-line summary.

use crate::{Build, BuildReport};
use std::path::Path;
use std::time::Duration;

/// A report's text: lines for the terminal and warnings (said apart, on stderr).
pub struct ReportText {
    pub lines: String,
    pub warnings: Vec<String>,
}

impl BuildReport {
    /// The report of a build with `log` (or none) as text.
    pub fn text(&self, log: Option<&Path>) -> ReportText {
        let mut lines = String::new();
        if self.with_log && !self.algorithms.is_empty() {
            lines.push_str(&self.algorithms_line());
        }
        if self.with_log && self.overruled > 0 {
            lines.push_str(&format!(
                "{} tuned groups keep their default schedule: the log's in-network \
                 check timed it faster than their history best\n",
                self.overruled
            ));
        }
        let mut warnings = self.warnings.clone();
        if let Some(log) = log {
            lines.push_str(&format!(
                "applied the history best of {} to {} distinct fused groups\n",
                log.display(),
                self.applied
            ));
            if let Some(why) = &self.nothing_applied {
                warnings.push(format!(
                    "nothing of {} applies to this build, which uses default schedules \
                     throughout: {why}",
                    log.display()
                ));
            }
        }
        ReportText { lines, warnings }
    }

    /// What a build with records chose for the convolutions with a choice: how many of
    /// each algorithm, and how many by measurement.
    fn algorithms_line(&self) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for (a, _) in &self.algorithms {
            let name = a.to_string();
            match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += 1,
                None => counts.push((name, 1)),
            }
        }
        let counts: Vec<String> = counts.iter().map(|(n, c)| format!("{c} {n}")).collect();
        let measured = self.algorithms.iter().filter(|(_, m)| *m).count();
        format!(
            "convolution algorithms: {} ({measured} of {} chosen by the log's measurements of \
             every option, the others by the rule)\n",
            counts.join(", "),
            self.algorithms.len()
        )
    }
}

impl Build {
    /// `built `NAME` for `TARGET`: … groups, … kernels … in S s; intermediate memory …`.
    pub fn summary_line(&self, took: Duration) -> String {
        let s = self.network.summary();
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        format!(
            "built `{}` for `{}`: {} fused groups, {} kernels generated and built in {:.1} s; \
             intermediate memory {:.1} MiB (without reuse {:.1} MiB)",
            self.network.name(),
            self.network.target(),
            s.groups,
            s.kernels,
            took.as_secs_f64(),
            mib(s.planned_bytes),
            mib(s.unplanned_bytes)
        )
    }
}
