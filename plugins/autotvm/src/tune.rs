//! The tuning loop of one template task: propose a batch, instantiate and measure it,
//! tell the tuner, report progress; stop after `n_trial` measurements or when the best
//! has not improved for `early_stopping` trials.

use crate::templates::TemplateTask;
use crate::tuners::{Observation, Tuner};
use std::time::Instant;
use tessera_search::measure::{Candidate, Measurer, Reference};
use tessera_search::{MeasureResult, ScheduleDesc};

/// Options of [`tune`].
#[derive(Clone, Debug)]
pub struct TuneOptions {
    pub n_trial: usize,
    /// Stop when the best has not improved for this many trials.
    pub early_stopping: Option<usize>,
    /// Candidates per measurement batch.
    pub batch: usize,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            n_trial: 64,
            early_stopping: None,
            batch: 8,
        }
    }
}

/// One measured configuration.
#[derive(Clone, Debug)]
pub struct Trial {
    pub index: u64,
    pub schedule: ScheduleDesc,
    pub result: MeasureResult,
    pub gflops: f64,
}

/// What a tuning run found.
#[derive(Clone, Debug)]
pub struct TuneSummary {
    pub trials: usize,
    pub best: Option<Trial>,
    pub seconds: f64,
}

/// GFLOPS of a result for `flop` operations (0 for a failure).
pub fn gflops_of(flop: f64, r: &MeasureResult) -> f64 {
    if r.is_ok() {
        flop / r.mean_cost() / 1e9
    } else {
        0.0
    }
}

/// Tunes `task` with `tuner`. `on_batch` receives every measured batch (to append it
/// to the record log); `progress` receives `(current GFLOPS, best GFLOPS, done, total,
/// seconds)` after each batch.
pub fn tune(
    task: &TemplateTask,
    tuner: &mut dyn Tuner,
    measurer: &mut Measurer,
    reference: Option<&Reference>,
    opts: &TuneOptions,
    on_batch: &mut dyn FnMut(&[Trial]),
    progress: &mut dyn FnMut(f64, f64, usize, usize, f64),
) -> TuneSummary {
    let start = Instant::now();
    let total = opts
        .n_trial
        .min(task.space.len().min(usize::MAX as u64) as usize);
    let mut done = 0;
    let mut best: Option<Trial> = None;
    let mut best_at = 0;
    while done < total {
        let n = opts.batch.max(1).min(total - done);
        let indices = tuner.next_batch(&task.space, n);
        if indices.is_empty() {
            break;
        }
        let configs: Vec<_> = indices
            .iter()
            .map(|&i| {
                task.space
                    .get(i)
                    .expect("tuners propose indices of the space")
            })
            .collect();
        let candidates: Vec<Candidate> = configs
            .iter()
            .map(|c| Candidate {
                func: task.instantiate(
                    c,
                    &format!("{}_{}", task.template.replace('.', "_"), c.index),
                ),
            })
            .collect();
        let results = measurer.measure(&candidates, 1, reference);
        let mut trials = Vec::with_capacity(results.len());
        let mut observations = Vec::with_capacity(results.len());
        let mut current: f64 = 0.0;
        for (c, r) in configs.iter().zip(results) {
            let g = gflops_of(task.flop, &r);
            current = current.max(g);
            observations.push(Observation {
                index: c.index,
                gflops: g,
            });
            trials.push(Trial {
                index: c.index,
                schedule: ScheduleDesc::Config {
                    template: task.template.clone(),
                    index: c.index,
                    entity: task.space.entity_json(c),
                },
                result: r,
                gflops: g,
            });
        }
        done += trials.len();
        for t in &trials {
            if t.gflops > 0.0 && best.as_ref().is_none_or(|b| t.gflops > b.gflops) {
                best = Some(t.clone());
                best_at = done;
            }
        }
        tuner.update(&task.space, &observations);
        on_batch(&trials);
        let best_g = best.as_ref().map_or(0.0, |b| b.gflops);
        progress(current, best_g, done, total, start.elapsed().as_secs_f64());
        if let Some(es) = opts.early_stopping {
            if done >= best_at + es {
                break;
            }
        }
    }
    TuneSummary {
        trials: done,
        best,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// TVM's progress line: `[Task  1/24]  Current/Best:   17.48/  23.90 GFLOPS | Progress: (20/20) | 15.17 s`.
pub fn progress_line(
    task_no: usize,
    tasks: usize,
    cur: f64,
    best: f64,
    done: usize,
    total: usize,
    secs: f64,
) -> String {
    format!(
        "[Task {task_no:>2}/{tasks:>2}]  Current/Best: {cur:>7.2}/{best:>7.2} GFLOPS | Progress: ({done}/{total}) | {secs:.2} s"
    )
}
