//! The auto-scheduler's tuning loop over the tasks of a network (TVM's
//! `auto_scheduler.TaskScheduler` + `SketchPolicy` + `XGBModel` together): a
//! [`RoundRunner`] that, for the task the scheduler picks, proposes a batch with the
//! task's [`SketchPolicy`], lowers and measures it, appends every measurement to the
//! record log (one write + sync per batch), and retrains the one cost model shared by
//! all tasks.
//!
//! The model learns from every task's programs, labelled per task with TVM's
//! normalized throughput (the task's best cost over the program's cost; failures 0).
//! The search samples at random until the model has `warmup` programs (TVM: 100).
//! [`AutoTuner::restore`] feeds the records of a log back in (the measured set, the
//! bests, the model's data), so a killed run resumes where its log ends.
//! [`AutoTuner::remeasure`] measures each task's fastest programs again, each run in a
//! fresh process, so that the history best is judged by the median of several
//! measurements (`tessera_search::record::stable_cost`), not by its luckiest one.

use crate::annotate::AnnotateParams;
use crate::search::{SearchParams, SketchPolicy};
use crate::sketch::{SketchError, SketchTarget};
use tessera_costmodel::{store_features, ProgramCostModel};
use tessera_ir::transform::expanded_size;
use tessera_ir::PrimFunc;
use tessera_search::measure::{Candidate, Measurer, Reference};
use tessera_search::record::{Record, RecordError, RecordWriter};
use tessera_search::scheduler::{RoundOutcome, RoundRunner};
use tessera_search::state::State;
use tessera_search::{MeasureResult, ScheduleDesc};
use tessera_te::{lower, ComputeDag};

/// One task of the auto-scheduler.
pub struct AutoTask {
    /// The fused function's name, for messages.
    pub name: String,
    pub dag: ComputeDag,
    pub workload_key: String,
}

/// What the driver needs besides the tasks.
#[derive(Clone, Debug)]
pub struct AutoTuneOptions {
    pub num_cores: i64,
    pub search: SearchParams,
    /// Programs the model must have before it guides the search.
    pub warmup: usize,
    /// Check each candidate's output against the unscheduled program's.
    pub check: bool,
    pub seed: u64,
    /// The target string written into records.
    pub target: String,
}

/// The per-task state of the driver.
struct TaskData {
    policy: SketchPolicy,
    reference: Option<Reference>,
    /// Each measured program's feature rows and cost (seconds; `None`: failed).
    programs: Vec<(Vec<Vec<f32>>, Option<f64>)>,
    best: Option<f64>,
}

/// A failure that stops tuning (not one candidate's).
#[derive(Debug, thiserror::Error)]
pub enum AutoTuneError {
    #[error("task `{task}`: {source}")]
    Sketch {
        task: String,
        #[source]
        source: SketchError,
    },
    #[error("task `{task}`: the reference outputs: {message}")]
    Reference { task: String, message: String },
    #[error("writing the record log: {0}")]
    Log(#[from] RecordError),
}

/// The auto-scheduler over a set of tasks.
pub struct AutoTuner<'a> {
    tasks: Vec<AutoTask>,
    data: Vec<TaskData>,
    measurer: &'a mut Measurer,
    writer: &'a mut RecordWriter,
    model: Box<dyn ProgramCostModel>,
    opts: AutoTuneOptions,
    /// Whether the model has seen data since its last training.
    stale: bool,
    /// The first error writing the log; tuning stops at the next round.
    pub log_error: Option<RecordError>,
    /// Called with a line for each notable event (a model fit, an empty batch).
    pub report: Box<dyn FnMut(&str) + 'a>,
}

/// Lowers a complete state into the function that is measured.
pub fn lower_state(state: &State, name: &str) -> Result<PrimFunc, String> {
    let r = state.replay().map_err(|e| e.to_string())?;
    lower(&r.schedule, &r.args, name).map_err(|e| e.to_string())
}

/// Whether `func` is within `max_code_size` IR nodes once its unrolled loops are
/// expanded (0: no limit).
pub(crate) fn code_within(func: &PrimFunc, max_code_size: u64) -> bool {
    max_code_size == 0 || expanded_size(&func.body) <= max_code_size
}

/// The feature rows of each state, computed on all cores: an empty bag for a state
/// that does not lower, or (with `max_code_size` above 0) whose program is larger
/// than that ([`SearchParams::max_code_size`](crate::search::SearchParams)).
pub fn features_of(states: &[State], max_code_size: u64) -> Vec<Vec<Vec<f32>>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(states.len().max(1));
    let chunk = states.len().div_ceil(threads).max(1);
    std::thread::scope(|sc| {
        let handles: Vec<_> = states
            .chunks(chunk)
            .map(|part| {
                sc.spawn(move || {
                    part.iter()
                        .map(|s| {
                            lower_state(s, "candidate")
                                .ok()
                                .filter(|f| code_within(f, max_code_size))
                                .map(|f| store_features(&f))
                                .unwrap_or_default()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // a chunk whose thread panicked gives empty bags, one per state, so that the
        // result stays aligned with `states`
        handles
            .into_iter()
            .zip(states.chunks(chunk))
            .flat_map(|(h, part)| h.join().unwrap_or_else(|_| vec![Vec::new(); part.len()]))
            .collect()
    })
}

impl<'a> AutoTuner<'a> {
    pub fn new(
        tasks: Vec<AutoTask>,
        measurer: &'a mut Measurer,
        writer: &'a mut RecordWriter,
        model: Box<dyn ProgramCostModel>,
        opts: AutoTuneOptions,
    ) -> Result<AutoTuner<'a>, AutoTuneError> {
        let target = SketchTarget::cpu(opts.num_cores);
        let mut data = Vec::with_capacity(tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            let policy = SketchPolicy::new(
                &t.dag,
                &target,
                AnnotateParams::cpu(opts.num_cores),
                opts.search.clone(),
                opts.seed.wrapping_add(i as u64),
            )
            .map_err(|source| AutoTuneError::Sketch {
                task: t.name.clone(),
                source,
            })?;
            let reference = if opts.check {
                let naive = lower_state(&State::new(&t.dag), "reference").map_err(|message| {
                    AutoTuneError::Reference {
                        task: t.name.clone(),
                        message,
                    }
                })?;
                Some(
                    Reference::compute(measurer.backend(), &naive, t.dag.outputs.len(), 1)
                        .map_err(|e| AutoTuneError::Reference {
                            task: t.name.clone(),
                            message: e.to_string(),
                        })?,
                )
            } else {
                None
            };
            data.push(TaskData {
                policy,
                reference,
                programs: Vec::new(),
                best: None,
            });
        }
        Ok(AutoTuner {
            tasks,
            data,
            measurer,
            writer,
            model,
            opts,
            stale: false,
            log_error: None,
            report: Box::new(|_| {}),
        })
    }

    pub fn tasks(&self) -> &[AutoTask] {
        &self.tasks
    }

    /// Each task's number of measured programs and best cost (seconds).
    pub fn progress(&self) -> Vec<(usize, Option<f64>)> {
        self.data
            .iter()
            .map(|d| (d.programs.len(), d.best))
            .collect()
    }

    /// Feeds a log's records back in: every step-history record of a task on this
    /// target is a measured program of that task. Returns how many were taken and the
    /// records that named a task but did not replay (with why).
    pub fn restore(&mut self, records: &[Record]) -> (usize, Vec<String>) {
        let mut taken = 0;
        let mut bad = Vec::new();
        let mut states: Vec<(usize, State, MeasureResult)> = Vec::new();
        let mut seen: std::collections::HashSet<(usize, String)> = Default::default();
        for r in records {
            let ScheduleDesc::Steps { steps } = &r.schedule else {
                continue;
            };
            if r.target != self.opts.target {
                continue;
            }
            let Some(i) = self
                .tasks
                .iter()
                .position(|t| t.workload_key == r.workload_key)
            else {
                continue;
            };
            // the search never measures a program twice: a repeat is a re-measurement
            // (see `remeasure`), not a trial
            if !seen.insert((i, steps.to_string())) {
                continue;
            }
            match State::from_json(&self.tasks[i].dag, steps) {
                Ok(s) => states.push((i, s, r.result.clone())),
                Err(e) => bad.push(format!("a record of task `{}`: {e}", self.tasks[i].name)),
            }
        }
        let all: Vec<State> = states.iter().map(|(_, s, _)| s.clone()).collect();
        let feats = features_of(&all, 0);
        for ((i, s, res), f) in states.into_iter().zip(feats) {
            self.note(i, &s, &res, f);
            taken += 1;
        }
        if taken > 0 {
            self.retrain();
        }
        (taken, bad)
    }

    fn note(&mut self, task: usize, s: &State, res: &MeasureResult, feats: Vec<Vec<f32>>) {
        let d = &mut self.data[task];
        let cost = res.is_ok().then(|| res.mean_cost());
        let flop = self.tasks[task].dag.flop_count();
        d.policy.record(s, cost.map(|c| flop / c.max(1e-12)));
        if let Some(c) = cost {
            if d.best.is_none_or(|b| c < b) {
                d.best = Some(c);
            }
        }
        d.programs.push((feats, cost));
        self.stale = true;
    }

    /// Programs with features, over all tasks.
    fn num_programs(&self) -> usize {
        self.data.iter().map(|d| d.programs.len()).sum()
    }

    fn retrain(&mut self) {
        if !self.stale || self.num_programs() < self.opts.warmup {
            return;
        }
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for d in &self.data {
            let Some(best) = d.best else { continue };
            for (f, c) in &d.programs {
                if f.is_empty() {
                    continue;
                }
                xs.push(f.clone());
                ys.push(c.map_or(0.0, |c| (best / c) as f32));
            }
        }
        if xs.is_empty() {
            return;
        }
        match self.model.update(&xs, &ys) {
            Ok(()) => {
                self.stale = false;
                (self.report)(&format!(
                    "cost model `{}` trained on {} programs",
                    self.model.name(),
                    xs.len()
                ));
            }
            Err(e) => (self.report)(&format!("cost model not trained: {e}")),
        }
    }
}

/// One program measured again by [`AutoTuner::remeasure`].
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
    /// The median of all its measurements (`stable_cost`).
    pub fn median(&self) -> f64 {
        let mut all = vec![self.first];
        all.extend(self.again.iter().map(|c| c.unwrap_or(f64::INFINITY)));
        tessera_search::record::stable_cost(all)
    }
}

impl AutoTuner<'_> {
    /// Measures `states` of `task` (lowered: `funcs`) and appends the batch to the log.
    fn measure_and_log(
        &mut self,
        task: usize,
        states: &[State],
        funcs: Vec<Result<PrimFunc, String>>,
    ) -> (Vec<MeasureResult>, Result<(), RecordError>) {
        let cands: Vec<Candidate> = funcs.into_iter().map(|func| Candidate { func }).collect();
        let t = &self.tasks[task];
        let results = self.measurer.measure(
            &cands,
            t.dag.outputs.len(),
            self.data[task].reference.as_ref(),
        );
        let records: Vec<Record> = states
            .iter()
            .zip(&results)
            .map(|(s, r)| {
                Record::new(
                    &t.workload_key,
                    &self.opts.target,
                    &t.name,
                    ScheduleDesc::Steps {
                        steps: s.steps_json(),
                    },
                    r.clone(),
                )
            })
            .collect();
        let logged = self.writer.append_batch(&records);
        (results, logged)
    }

    /// Measures the `top` fastest programs of every task `runs` more times, each run
    /// in a fresh process (one batch per run, so a program's runs are spread over the
    /// batches), and appends every measurement to the log.
    pub fn remeasure(&mut self, top: usize, runs: usize) -> Result<Vec<Remeasured>, AutoTuneError> {
        let mut out = Vec::new();
        if top == 0 || runs == 0 {
            return Ok(out);
        }
        for task in 0..self.tasks.len() {
            let leaders = self.data[task].policy.fastest(top);
            if leaders.is_empty() {
                continue;
            }
            let flop = self.tasks[task].dag.flop_count();
            let mut rows: Vec<Remeasured> = leaders
                .iter()
                .enumerate()
                .map(|(rank, (_, throughput))| Remeasured {
                    task,
                    rank,
                    first: flop / throughput,
                    again: Vec::new(),
                })
                .collect();
            let states: Vec<State> = leaders.into_iter().map(|(s, _)| s).collect();
            let funcs: Vec<Result<PrimFunc, String>> = states
                .iter()
                .enumerate()
                .map(|(k, s)| lower_state(s, &format!("cand{k}")))
                .collect();
            for _ in 0..runs {
                let (results, logged) = self.measure_and_log(task, &states, funcs.clone());
                logged?;
                for (row, r) in rows.iter_mut().zip(&results) {
                    row.again.push(r.is_ok().then(|| r.mean_cost()));
                }
            }
            out.extend(rows);
        }
        Ok(out)
    }
}

impl RoundRunner for AutoTuner<'_> {
    fn run_round(&mut self, task: usize, n: usize) -> RoundOutcome {
        if self.log_error.is_some() {
            return RoundOutcome::default();
        }
        let use_model = self.model.is_trained() && self.num_programs() >= self.opts.warmup;
        let model = &self.model;
        let d = &mut self.data[task];
        let max_code_size = d.policy.params().max_code_size;
        // a program that does not lower, or is too large, is never proposed
        let mut scorer = |states: &[State]| -> Vec<f32> {
            let feats = features_of(states, max_code_size);
            let scores = model
                .predict(&feats)
                .unwrap_or_else(|_| vec![f32::NEG_INFINITY; states.len()]);
            scores
                .into_iter()
                .zip(&feats)
                .map(|(score, f)| {
                    if f.is_empty() {
                        f32::NEG_INFINITY
                    } else {
                        score
                    }
                })
                .collect()
        };
        let batch = if use_model {
            d.policy.next_batch(n, Some(&mut scorer))
        } else {
            d.policy.next_batch(n, None)
        };
        if batch.is_empty() {
            (self.report)(&format!(
                "task `{}`: the search has nothing new to propose",
                self.tasks[task].name
            ));
            return RoundOutcome::default();
        }
        let funcs: Vec<Result<PrimFunc, String>> = batch
            .iter()
            .enumerate()
            .map(|(k, s)| lower_state(s, &format!("cand{k}")))
            .collect();
        let feats: Vec<Vec<Vec<f32>>> = funcs
            .iter()
            .map(|f| f.as_ref().map(store_features).unwrap_or_default())
            .collect();
        let (results, logged) = self.measure_and_log(task, &batch, funcs);
        if let Err(e) = logged {
            self.log_error = Some(e);
        }
        let mut best: Option<f64> = None;
        for ((s, r), f) in batch.iter().zip(&results).zip(feats) {
            if r.is_ok() {
                let c = r.mean_cost();
                best = Some(best.map_or(c, |b: f64| b.min(c)));
            }
            self.note(task, s, r, f);
        }
        self.retrain();
        RoundOutcome {
            measured: batch.len(),
            best_cost: best,
        }
    }
}
