//! `tessera records`: look into a tuning record log, pick the best schedules, distill it
//! (the views are the driver's `log_views`), draw its curve (`plot.rs`).

use anyhow::{Context, Result};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use tessera_driver::log_views::{distill_json, distill_text, BestView, RecordsView};
use tessera_driver::records::{distill_file, LoadedLog};

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
            let log = load_warn(&file)?;
            let view = RecordsView::new(&log, workload.as_deref(), limit);
            crate::print_view(json, view.to_json(), &view);
        }
        RecordsCmd::Best { file, target, json } => {
            let log = load_warn(&file)?;
            let view = BestView::new(&log, target.as_deref());
            crate::print_view(json, view.to_json(), &view);
        }
        RecordsCmd::Plot { file, out, net } => crate::plot::plot(&file, &out, &net)?,
        RecordsCmd::Distill {
            input,
            output,
            json,
        } => {
            // The error names the file (input or output) and what failed.
            let s = distill_file(&input, &output)?;
            crate::plugins::toolchain().warn_skipped(&input, &s.skipped);
            crate::set_json(json);
            if json {
                println!("{}", distill_json(&s));
            }
            say_part!("{}", distill_text(&s));
        }
    }
    Ok(())
}

/// Loads a record log through the driver (`Toolchain::read_log`, which every reader of
/// a log goes through: its skipped lines are warnings), naming the file in an error.
pub(crate) fn load_warn(file: &Path) -> Result<LoadedLog> {
    crate::plugins::toolchain()
        .read_log(file)
        .with_context(|| format!("reading the record log {}", file.display()))
}
