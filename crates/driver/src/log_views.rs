//! A record log as people look into it (`tessera records show|best|distill`), as text
//! tables and JSON for every face: its records (filtered by workload, cut at a limit),
//! the best record of each workload and target with the groups the log's in-network
//! check keeps on another schedule and the workloads that never succeeded, and what a
//! distillation kept.

use std::collections::HashSet;
use std::fmt;
use tessera_search::record::{best_by_workload, stable_cost, ApplyHistoryBest, DistillSummary};
use tessera_search::record::{LoadedLog, Record};
use tessera_search::{workload_key, ScheduleDesc};

/// Rows as columns, some right-aligned, two spaces apart.
pub struct Table {
    pub header: Vec<&'static str>,
    pub right: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.header.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: Vec<&str>| {
            let mut out = String::new();
            for (i, cell) in cells.iter().enumerate() {
                let pad = " ".repeat(width[i].saturating_sub(cell.chars().count()));
                if i > 0 {
                    out.push_str("  ");
                }
                match (self.right[i], i + 1 < n) {
                    (true, _) => out.push_str(&format!("{pad}{cell}")),
                    (false, true) => out.push_str(&format!("{cell}{pad}")),
                    (false, false) => out.push_str(cell),
                }
            }
            writeln!(f, "{out}")
        };
        line(f, self.header.clone())?;
        for row in &self.rows {
            line(f, row.iter().map(String::as_str).collect())?;
        }
        Ok(())
    }
}

/// A workload key in a table: its hash's first characters and its shapes.
fn short_key(key: &str) -> String {
    workload_key::short(key, 40)
}

/// A schedule in a table: `default`, `config TEMPLATE #INDEX` or `steps (N)`.
pub fn schedule_text(s: &ScheduleDesc) -> String {
    match s {
        ScheduleDesc::Config {
            template, index, ..
        } => format!("config {template} #{index}"),
        ScheduleDesc::Steps { steps } => match steps.as_array() {
            Some(a) => format!("steps ({})", a.len()),
            None => "steps".into(),
        },
        ScheduleDesc::Default => "default".into(),
    }
}

/// The mean time (a range task's: its weighted cost, and at how many points).
fn mean_ms(r: &Record) -> String {
    match (r.is_usable(), &r.result.at_points) {
        (false, _) => "-".into(),
        (true, None) => format!("{:.4}", r.result.mean_cost() * 1e3),
        (true, Some(a)) => format!(
            "{:.4} ({} points)",
            r.result.mean_cost() * 1e3,
            a.points.len()
        ),
    }
}

/// A range task's time at each point, as JSON (`null` for one shape).
fn per_point_json(r: &Record) -> serde_json::Value {
    let Some(a) = r.result.at_points.as_ref().filter(|_| r.is_usable()) else {
        return serde_json::Value::Null;
    };
    let points: Vec<serde_json::Value> = (a.points.iter().zip(&a.means).zip(&a.weights))
        .map(|((p, m), w)| serde_json::json!({"sizes": p, "ms": m * 1e3, "weight": w}))
        .collect();
    serde_json::json!({"ranges": a.ranges, "points": points})
}

/// A record as JSON: its line (where known), keys, schedule, mean time and error.
fn record_json(line: Option<usize>, r: &Record) -> serde_json::Value {
    serde_json::json!({
        "line": line,
        "workload_key": r.workload_key,
        "task": r.task,
        "target": r.target,
        "schedule": schedule_text(&r.schedule),
        "mean_ms": r.is_usable().then(|| r.result.mean_cost() * 1e3),
        "per_point": per_point_json(r),
        "error": r.result.error_no.name(),
    })
}

/// `records show`: the records of a log, of one workload (its key, or the start of its
/// hash) and at most `limit` of them.
pub struct RecordsView<'a> {
    log: &'a LoadedLog,
    workload: Option<&'a str>,
    /// Line and record of each match.
    matching: Vec<(usize, &'a Record)>,
    shown: usize,
}

impl<'a> RecordsView<'a> {
    pub fn new(log: &'a LoadedLog, workload: Option<&'a str>, limit: Option<usize>) -> Self {
        let matching: Vec<(usize, &Record)> = log
            .lines
            .iter()
            .copied()
            .zip(&log.records)
            .filter(|(_, r)| workload.is_none_or(|w| workload_key::matches(&r.workload_key, w)))
            .collect();
        let shown = limit.unwrap_or(usize::MAX).min(matching.len());
        RecordsView {
            log,
            workload,
            matching,
            shown,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.matching[..self.shown]
                .iter()
                .map(|(line, r)| record_json(Some(*line), r))
                .collect(),
        )
    }
}

impl fmt::Display for RecordsView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (all, shown) = (self.matching.len(), self.shown);
        if all == 0 {
            return match self.workload {
                Some(w) if !self.log.records.is_empty() => writeln!(
                    f,
                    "no records of workload `{w}` ({} records in all)",
                    self.log.records.len()
                ),
                _ => writeln!(f, "no records"),
            };
        }
        let rows = self.matching[..shown]
            .iter()
            .map(|(line, r)| {
                vec![
                    line.to_string(),
                    short_key(&r.workload_key),
                    r.task.clone(),
                    r.target.clone(),
                    schedule_text(&r.schedule),
                    mean_ms(r),
                    r.result.error_no.name().to_string(),
                ]
            })
            .collect();
        let header = vec![
            "LINE",
            "WORKLOAD",
            "TASK",
            "TARGET",
            "SCHEDULE",
            "MEAN (ms)",
            "ERROR",
        ];
        let right = vec![true, false, false, false, false, true, false];
        write!(
            f,
            "{}",
            Table {
                header,
                right,
                rows
            }
        )?;
        if shown < all {
            writeln!(
                f,
                "… {} more (showing {shown} of {all} records)",
                all - shown
            )?;
        }
        if !self.log.checks.is_empty() {
            writeln!(
                f,
                "and {} in-network check lines (`tessera records best` names the groups they \
                 keep on their default schedule)",
                self.log.checks.len()
            )?;
        }
        Ok(())
    }
}

/// `records best`: the best successful record of every workload and target (of
/// `target` only, where given).
pub struct BestView<'a> {
    log: &'a LoadedLog,
    target: Option<&'a str>,
    best: std::collections::BTreeMap<(String, String), &'a Record>,
}

impl<'a> BestView<'a> {
    pub fn new(log: &'a LoadedLog, target: Option<&'a str>) -> Self {
        BestView {
            log,
            target,
            best: best_by_workload(&log.records, target),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(self.best.values().map(|r| record_json(None, r)).collect())
    }

    /// Best records a network build does not use: the in-network check timed another
    /// schedule (the default's or another candidate's) faster inside whole runs.
    fn overruled(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let median = |v: &[f64]| stable_cost(v.to_vec());
        for o in ApplyHistoryBest::from_log(self.log).overruled() {
            let c = &o.check;
            if self.target.is_some_and(|t| c.target != t) {
                continue;
            }
            let instead = match o.instead.schedule {
                ScheduleDesc::Default => "its default schedule".to_string(),
                _ => format!("another of its candidates ({:.3} ms)", o.instead_ms),
            };
            writeln!(
                f,
                "built with {instead}: {} ({}) on `{}`, whose best ran {:.3} ms in the network \
                 against the default's {:.3} ms (in-network check)",
                c.task,
                short_key(&c.workload_key),
                c.target,
                median(&c.tuned_ms),
                median(&c.default_ms)
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for BestView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: Vec<Vec<String>> = self
            .best
            .values()
            .map(|r| {
                vec![
                    r.task.clone(),
                    r.target.clone(),
                    mean_ms(r),
                    schedule_text(&r.schedule),
                    r.workload_key.clone(),
                ]
            })
            .collect();
        if rows.is_empty() {
            writeln!(f, "no successful records")?;
        } else {
            let header = vec!["TASK", "TARGET", "BEST (ms)", "SCHEDULE", "WORKLOAD"];
            let right = vec![false, false, true, false, false];
            write!(
                f,
                "{}",
                Table {
                    header,
                    right,
                    rows
                }
            )?;
        }
        self.overruled(f)?;
        // workloads that were measured but never succeeded
        let mut seen = HashSet::new();
        for r in &self.log.records {
            if self.target.is_some_and(|t| r.target != t) {
                continue;
            }
            let key = (r.workload_key.clone(), r.target.clone());
            if !self.best.contains_key(&key) && seen.insert(key) {
                writeln!(
                    f,
                    "no successful record: {} ({}) on `{}`",
                    r.task,
                    short_key(&r.workload_key),
                    r.target
                )?;
            }
        }
        Ok(())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What a distillation kept, as text.
pub fn distill_text(s: &DistillSummary) -> String {
    let mut text = format!(
        "kept {} of {} records ({} workload{})\n",
        s.kept,
        s.total,
        s.workloads,
        plural(s.workloads)
    );
    if !s.without_success.is_empty() {
        text.push_str(&format!(
            "dropped {} workload/target pair{} without a successful record\n",
            s.without_success.len(),
            plural(s.without_success.len())
        ));
    }
    text
}

/// What a distillation kept, as JSON.
pub fn distill_json(s: &DistillSummary) -> serde_json::Value {
    serde_json::json!({"kept": s.kept, "total": s.total, "workloads": s.workloads,
        "without_success": s.without_success.len()})
}
