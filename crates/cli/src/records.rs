//! `tessera records`: look into a tuning record log, pick the best schedules, distill it.

use anyhow::{Context, Result};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use tessera_driver::records::{best_by_workload, distill_file, LoadedLog, Record};
use tessera_driver::records::{workload_key, ScheduleDesc};

#[derive(Subcommand, Debug)]
pub enum RecordsCmd {
    /// List the records of a log: line, workload, task, target, schedule, mean time,
    /// error.
    #[command(
        after_help = "Examples:\n  tessera records show tune.json\n  tessera records show tune.json --workload 2d10de66 --limit 20"
    )]
    Show {
        /// The record log (JSON lines).
        file: PathBuf,
        /// Only the records of this workload: its whole key, or the start of its hash
        /// (the first column of the table).
        #[arg(long, value_name = "KEY")]
        workload: Option<String>,
        /// Show at most N records.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// One JSON array of the records on stdout instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// The best successful record of every workload (and target): task, target, best
    /// mean time, schedule, workload key.
    #[command(after_help = "Examples:\n  tessera records best tune.json --target cpu")]
    Best {
        /// The record log (JSON lines).
        file: PathBuf,
        /// Only records of this target string (compared exactly).
        #[arg(long, value_name = "T")]
        target: Option<String>,
        /// One JSON array of the best records on stdout instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Draw the tuning curve of a log as an SVG: each task's best (GFLOPS with a
    /// network's tasks, else its best time) against trials, and with --network or
    /// --onnx the network's estimated latency.
    #[command(
        after_help = "Examples:\n  tessera records plot r18.jsonl --network resnet-18 --out r18.svg\n  tessera records plot mm.jsonl --out mm.svg"
    )]
    Plot {
        /// The record log (JSON lines).
        file: PathBuf,
        /// The picture to write (SVG).
        #[arg(long, short, value_name = "FILE.svg")]
        out: PathBuf,
        /// The network the log tuned (as given to `tessera tune`): its tasks' weights
        /// and FLOPs.
        #[command(flatten)]
        net: Box<crate::network::NetworkArgs>,
    },
    /// Keep only the best successful record of every workload and target (TVM's
    /// distill); OUT is replaced atomically and may be IN.
    #[command(after_help = "Examples:\n  tessera records distill tune.json best.json")]
    Distill {
        /// The record log to read.
        input: PathBuf,
        /// The log to write.
        output: PathBuf,
        /// One JSON object of the counts on stdout instead of the text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: RecordsCmd) -> Result<()> {
    match cmd {
        RecordsCmd::Show {
            file,
            workload,
            limit,
            json,
        } => {
            crate::set_json(json);
            show(&file, workload.as_deref(), limit)
        }
        RecordsCmd::Best { file, target, json } => {
            crate::set_json(json);
            best(&file, target.as_deref())
        }
        RecordsCmd::Plot { file, out, net } => crate::plot::plot(&file, &out, &net),
        RecordsCmd::Distill {
            input,
            output,
            json,
        } => {
            crate::set_json(json);
            // The error names the file (input or output) and what failed.
            let s = distill_file(&input, &output)?;
            crate::plugins::toolchain().warn_skipped(&input, &s.skipped);
            if json {
                println!(
                    "{}",
                    serde_json::json!({"kept": s.kept, "total": s.total, "workloads": s.workloads,
                        "without_success": s.without_success.len()})
                );
            }
            say!(
                "kept {} of {} records ({} workload{})",
                s.kept,
                s.total,
                s.workloads,
                plural(s.workloads)
            );
            if !s.without_success.is_empty() {
                say!(
                    "dropped {} workload/target pair{} without a successful record",
                    s.without_success.len(),
                    plural(s.without_success.len())
                );
            }
            Ok(())
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Loads a record log through the driver (`Toolchain::read_log`, which every reader of
/// a log goes through: its skipped lines are warnings), naming the file in an error.
pub(crate) fn load_warn(file: &Path) -> Result<LoadedLog> {
    crate::plugins::toolchain()
        .read_log(file)
        .with_context(|| format!("reading the record log {}", file.display()))
}

/// A workload key in a table: its hash's first characters and its shapes.
fn short_key(key: &str) -> String {
    workload_key::short(key, 40)
}

fn schedule_text(s: &ScheduleDesc) -> String {
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

fn mean_ms(r: &Record) -> String {
    if r.is_usable() {
        format!("{:.4}", r.result.mean_cost() * 1e3)
    } else {
        "-".into()
    }
}

/// Prints rows as columns; `right[i]` right-aligns column i.
fn print_table(header: &[&str], right: &[bool], rows: &[Vec<String>]) {
    let n = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = width[i].saturating_sub(cell.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if right[i] {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                if i + 1 < n {
                    out.push_str(&" ".repeat(pad));
                }
            }
        }
        say!("{out}");
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn show(file: &Path, workload: Option<&str>, limit: Option<usize>) -> Result<()> {
    let log = load_warn(file)?;
    let matching: Vec<(usize, &Record)> = log
        .lines
        .iter()
        .copied()
        .zip(&log.records)
        .filter(|(_, r)| workload.is_none_or(|w| workload_key::matches(&r.workload_key, w)))
        .collect();
    if matching.is_empty() {
        if crate::json_mode() {
            println!("[]");
            return Ok(());
        }
        match workload {
            Some(w) if !log.records.is_empty() => {
                say!(
                    "no records of workload `{w}` ({} records in all)",
                    log.records.len()
                )
            }
            _ => say!("no records"),
        }
        return Ok(());
    }
    let shown = limit.unwrap_or(usize::MAX).min(matching.len());
    if crate::json_mode() {
        let v: Vec<serde_json::Value> = matching[..shown]
            .iter()
            .map(|(line, r)| record_json(Some(*line), r))
            .collect();
        println!("{}", serde_json::Value::Array(v));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = matching[..shown]
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
    print_table(
        &[
            "LINE",
            "WORKLOAD",
            "TASK",
            "TARGET",
            "SCHEDULE",
            "MEAN (ms)",
            "ERROR",
        ],
        &[true, false, false, false, false, true, false],
        &rows,
    );
    if shown < matching.len() {
        say!(
            "… {} more (showing {shown} of {} records)",
            matching.len() - shown,
            matching.len()
        );
    }
    if !log.checks.is_empty() {
        say!(
            "and {} in-network check lines (`tessera records best` names the groups they \
             keep on their default schedule)",
            log.checks.len()
        );
    }
    Ok(())
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
        "error": r.result.error_no.name(),
    })
}

fn best(file: &Path, target: Option<&str>) -> Result<()> {
    let log = load_warn(file)?;
    let best = best_by_workload(&log.records, target);
    if crate::json_mode() {
        let v: Vec<serde_json::Value> = best.values().map(|r| record_json(None, r)).collect();
        println!("{}", serde_json::Value::Array(v));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = best
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
        say!("no successful records");
    } else {
        print_table(
            &["TASK", "TARGET", "BEST (ms)", "SCHEDULE", "WORKLOAD"],
            &[false, false, true, false, false],
            &rows,
        );
    }
    // Best records that a network build does not use: the in-network check timed
    // another schedule (the default's or another candidate's) faster inside whole runs.
    let median = |v: &[f64]| tessera_driver::records::stable_cost(v.to_vec());
    let applied = tessera_driver::records::ApplyHistoryBest::from_log(&log);
    for o in applied.overruled() {
        let c = &o.check;
        if target.is_none_or(|t| c.target == t) {
            let instead = match o.instead.schedule {
                ScheduleDesc::Default => "its default schedule".to_string(),
                _ => format!("another of its candidates ({:.3} ms)", o.instead_ms),
            };
            say!(
                "built with {instead}: {} ({}) on `{}`, whose best ran {:.3} ms in the network \
                 against the default's {:.3} ms (in-network check)",
                c.task,
                short_key(&c.workload_key),
                c.target,
                median(&c.tuned_ms),
                median(&c.default_ms)
            );
        }
    }
    // Workloads that were measured but never succeeded.
    let mut seen = std::collections::HashSet::new();
    for r in &log.records {
        if target.is_some_and(|t| r.target != t) {
            continue;
        }
        let key = (r.workload_key.clone(), r.target.clone());
        if !best.contains_key(&key) && seen.insert(key) {
            say!(
                "no successful record: {} ({}) on `{}`",
                r.task,
                short_key(&r.workload_key),
                r.target
            );
        }
    }
    Ok(())
}
