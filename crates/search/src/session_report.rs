//! What a tuning session prints besides TVM's table (`scheduler::TaskScheduler::table`):
//! where its text goes ([`SessionReport`]), its progress after each round
//! ([`Progress`], one line), the task list, the re-measurement table, the tasks the
//! budget left untuned and a sequential session's AutoTVM line.

use crate::scheduler::{TaskScheduler, NO_COST};
use crate::session::TuningTask;
use std::fmt::Write as _;

/// Where a session's text goes: `out` the tables and lines (each text ends its lines
/// with a newline, so that a sink prints it as it is), `warn` what the user should know
/// (skipped log lines, records that do not replay), `progress` how far the search is
/// after each round (for a progress bar; nothing by default).
pub trait SessionReport {
    fn out(&mut self, text: &str);
    fn warn(&mut self, text: &str);
    fn progress(&mut self, _progress: &Progress) {}
    /// A phase other than the search's rounds (`baselines`: the default schedules
    /// measured; `re-measuring`: the best programs timed again): `done` of its `total`
    /// steps, `elapsed` seconds after it started (called after each step).
    fn phase(&mut self, _name: &str, _done: usize, _total: usize, _elapsed: f64) {}
}

/// How far a session's search is, after a round.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Trials in all (a resumed log's included) and the budget they count against.
    pub trials: usize,
    pub budget: usize,
    /// Trials measured by this session (the rate for an estimate of the time left).
    pub session_trials: usize,
    /// Seconds since this session's search started.
    pub elapsed: f64,
    /// The network's estimated latency (seconds), once every task has a cost.
    pub estimated_latency: Option<f64>,
    /// Whether the search has ended.
    pub done: bool,
}

/// One line: trials, time, time left, the estimated latency.
impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = 100.0 * self.trials as f64 / self.budget.max(1) as f64;
        write!(
            f,
            "{}/{} trials ({pct:.0}%) in {:.0} s",
            self.trials, self.budget, self.elapsed
        )?;
        if !self.done && self.session_trials > 0 {
            let rate = self.elapsed / self.session_trials as f64;
            let left = rate * self.budget.saturating_sub(self.trials) as f64;
            write!(f, ", about {left:.0} s left in the search")?;
        }
        if let Some(l) = self.estimated_latency {
            write!(f, ", estimated latency {:.3} ms", l * 1e3)?;
        }
        Ok(())
    }
}

/// Each task's header and compute DAG, as TVM prints them before tuning.
pub fn task_list(tasks: &[TuningTask]) -> String {
    let mut s = String::new();
    for (i, t) in tasks.iter().enumerate() {
        let task = &t.task;
        let _ = writeln!(
            s,
            "========== Task {i}  (workload key: {}) ==========",
            task.workload_key
        );
        let _ = writeln!(
            s,
            "# {}  weight: {}  FLOPs: {:.0}{}",
            task.name,
            t.weight,
            task.dag.flop_count(),
            t.choice
                .as_ref()
                .map(|c| format!("  (one option of {c})"))
                .unwrap_or_default()
        );
        let _ = writeln!(s, "{}", task.dag);
    }
    s
}

/// One program measured again after tuning.
#[derive(Clone, Debug)]
pub struct Remeasured {
    pub task: usize,
    /// The program's rank among the task's measured programs (0: the fastest).
    pub rank: usize,
    /// Its cost when the search measured it (seconds).
    pub first: f64,
    /// Its costs in the runs made now (`None`: the run failed).
    pub again: Vec<Option<f64>>,
}

impl Remeasured {
    /// The median of all its measurements (`record::stable_cost`).
    pub fn median(&self) -> f64 {
        let mut all = vec![self.first];
        all.extend(self.again.iter().map(|c| c.unwrap_or(f64::INFINITY)));
        crate::record::stable_cost(all)
    }
}

/// Milliseconds with four significant digits at least, for microsecond kernels too.
fn ms(c: f64) -> String {
    let v = c * 1e3;
    let decimals = if v > 0.0 && v < 1.0 {
        (3 - v.log10().floor() as i32).clamp(3, 9) as usize
    } else {
        3
    };
    format!("{v:.decimals$}")
}

/// The re-measurements of each task's fastest programs, and which one is now the best.
pub fn remeasure_table(rows: &[Remeasured], names: &[String], seconds: f64) -> String {
    let runs = rows.first().map_or(0, |r| r.again.len());
    let mut out = format!(
        "re-measured the fastest programs of each task, {runs} more runs each in fresh processes ({seconds:.0} s):\n"
    );
    out.push_str("| ID | Rank | First (ms) | Again (ms) | Median (ms) |\n");
    out.push_str("|---|---|---|---|---|\n");
    let ms_or_failed = |c: f64| {
        if c.is_finite() {
            ms(c)
        } else {
            "failed".to_string()
        }
    };
    for r in rows {
        let again: Vec<String> = r
            .again
            .iter()
            .map(|c| c.map_or_else(|| "failed".to_string(), ms))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            r.task,
            r.rank + 1,
            ms(r.first),
            again.join(" "),
            ms_or_failed(r.median())
        );
    }
    for (task, name) in names.iter().enumerate() {
        let of_task: Vec<&Remeasured> = rows.iter().filter(|r| r.task == task).collect();
        let Some(best) = of_task
            .iter()
            .filter(|r| r.median().is_finite())
            .min_by(|a, b| a.median().total_cmp(&b.median()))
        else {
            continue;
        };
        if best.rank != 0 {
            let rank1 = of_task.first().map_or(f64::INFINITY, |r| r.median());
            let _ = writeln!(
                out,
                "task {task} `{name}`: rank {} is the steadier best ({} ms median against rank 1's {})",
                best.rank + 1,
                ms(best.median()),
                ms_or_failed(rank1)
            );
        }
    }
    out
}

/// A line for each task without a tuned latency: never reached by the budget (it keeps
/// its default schedule), or no valid schedule in its trials.
pub fn unreached(tasks: &[TuningTask], scheduler: &TaskScheduler) -> String {
    let mut out = String::new();
    for (i, (t, c)) in tasks.iter().zip(scheduler.best_costs()).enumerate() {
        if *c < NO_COST {
            continue;
        }
        let (name, w) = (&t.task.name, t.weight);
        let pruned = t.choice.is_some() && scheduler.dead().contains(&i);
        let _ = match scheduler.trials()[i] {
            0 if pruned => writeln!(
                out,
                "    task {i} `{name}` (weight {w}): not tuned, an option that cannot be its convolution's fastest"
            ),
            0 => writeln!(
                out,
                "    task {i} `{name}` (weight {w}): not reached by the budget (it keeps its default schedule)"
            ),
            n => writeln!(
                out,
                "    task {i} `{name}` (weight {w}): no valid schedule in {n} trials"
            ),
        };
    }
    out
}

/// The closing line on the part of the estimated latency (`total`, seconds) that stays
/// untuned (`part`): the share of the network's time the budget never reached. `None`
/// when every task was tuned.
pub fn untuned_line((total, part): (f64, f64)) -> Option<String> {
    (part > 0.0 && total > 0.0).then(|| {
        format!(
            "{:.1} % of the estimated latency ({:.3} of {:.3} ms) is in tasks never tuned, \
             which keep their default schedules\n",
            100.0 * part / total,
            part * 1e3,
            total * 1e3
        )
    })
}

impl Progress {
    /// The round's end as a `tracing` event (`-v`).
    pub fn trace(&self) {
        tracing::info!(
            trials = self.trials,
            budget = self.budget,
            seconds = self.elapsed,
            estimated_latency_ms = self.estimated_latency.map(|l| l * 1e3),
            "a tuning round ended"
        );
    }
}

/// What a session prints after each round: TVM's table, or in a sequential session
/// AutoTVM's line for the task under way (timed from the end of the round before its
/// first).
pub struct RoundText {
    flops: Vec<f64>,
    /// The task under way and when it began (seconds into the search).
    under_way: Option<(usize, f64)>,
    /// When the last round ended.
    round_end: f64,
}

impl RoundText {
    /// For tasks of these FLOPs.
    pub fn new(flops: impl Iterator<Item = f64>) -> RoundText {
        RoundText {
            flops: flops.collect(),
            under_way: None,
            round_end: 0.0,
        }
    }

    /// The text after a round that ended `now` seconds into the search.
    pub fn after_round(&mut self, s: &TaskScheduler, next: Option<usize>, now: f64) -> String {
        let task = s.last_round().map(|(t, _)| *t);
        if task.is_some() && self.under_way.map(|(t, _)| t) != task {
            self.under_way = task.map(|t| (t, self.round_end));
        }
        self.round_end = now;
        let began = self.under_way.map_or(0.0, |(_, b)| b);
        sequential_line(s, &self.flops, now - began).unwrap_or_else(|| s.table(now, next))
    }
}

/// AutoTVM's progress line for the last round of a sequential session (`tune_tasks`'
/// `progress_bar`): `[Task  1/24]  Current/Best:   17.48/  23.90 GFLOPS | Progress:
/// (20/20) | 15.17 s`, ending ` Done.` once the task has had its trials (or stopped
/// early). `flops`: each task's; `seconds`: since the task's first round began. `None`
/// outside a sequential session or before any round.
pub fn sequential_line(s: &TaskScheduler, flops: &[f64], seconds: f64) -> Option<String> {
    let (task, round) = s.last_round()?;
    let budget = s.task_budget(*task)?;
    let flop = *flops.get(*task)?;
    let gflops = |cost: f64| {
        if cost > 0.0 && cost < NO_COST {
            flop / cost / 1e9
        } else {
            0.0
        }
    };
    let current = round.best_cost.map_or(0.0, gflops);
    let best = gflops(s.best_costs()[*task]);
    let done = s.dead().contains(task);
    Some(format!(
        "[Task {:>2}/{:>2}]  Current/Best: {current:>7.2}/{best:>7.2} GFLOPS | Progress: ({}/{budget}) | {seconds:.2} s{}\n",
        task + 1,
        flops.len(),
        s.trials()[*task],
        if done { " Done." } else { "" }
    ))
}
