//! A tuning session (TVM's `auto_scheduler.TaskScheduler.tune` with its measure
//! callbacks, for any strategy): the tasks of a network (or one operator), one
//! [`SearchPolicy`] per task, the task scheduler that gives rounds to tasks, the
//! measurer, the record log and the cost model shared by every task. In order:
//!
//! 1. each task's default schedule is measured once per log, as its baseline (what an
//!    untuned build runs, the estimate's stand-in until the task has a tuned latency);
//! 2. the log's earlier measurements of these tasks are read back: they count against
//!    the budget, go to the policies and train the model, so a killed run resumes where
//!    its log ends;
//! 3. rounds: the scheduler picks a task, its policy proposes (ranked by the model once
//!    it has `warmup` programs), the candidates are measured, appended to the log (one
//!    write + sync per batch) and observed; TVM's table after every round;
//! 4. each task's fastest programs are measured again, each run in a fresh process, so
//!    the history best is the steadiest, not the luckiest (`record::stable_cost`);
//! 5. the log's programs go into the model's memory (`crate::memory`), for later runs
//!    on other logs to start from.
//!
//! The model learns from every task's programs, labelled per task with TVM's normalized
//! throughput (the task's best cost over the program's cost; failures 0), and, with a
//! memory, from the programs of the target's earlier logs (from the first round on).

use crate::measure::{Candidate, MeasureError, Measurer, ProgramError, Reference, TaskInputs};
use crate::memory::{
    Dataset, MemoryError, MemoryUse, ModelMemory, Prior, PriorSource, TaskPrograms, PRIOR_CAP,
};
use crate::policy::{
    Observation, PolicyError, PolicyInfo, PolicyOptions, SearchPolicy, SearchTask, StrategyFactory,
};
use crate::record::{stable_cost, Record, RecordError, RecordWriter};
use crate::scheduler::{RoundOutcome, RoundRunner, SchedTask, SchedulerOptions, TaskScheduler};
use crate::session_report::{remeasure_table, task_list, Remeasured, RoundText};
pub use crate::session_report::{Progress, SessionReport};
use crate::sizes::at_largest_point;
use crate::time_profile::SessionProfile;
use crate::{MeasureResult, ScheduleDesc};
use std::cell::RefCell;
use std::collections::HashSet;
use std::path::PathBuf;
use tessera_costmodel::{store_features, ProgramCostModel, STORE_FEATURE_LEN};
use tessera_ir::PrimFunc;
use tessera_runtime::runner::SizePoints;

/// One task of a session.
pub struct TuningTask {
    pub task: SearchTask,
    /// How many times the network computes it.
    pub weight: usize,
    /// Its default schedule's program (what an untuned build runs), or why it does not
    /// lower; `None`: no baseline.
    pub default: Option<Result<PrimFunc, ProgramError>>,
    /// The label it shares with the other options of a convolution
    /// (`tessera_graph::Task::choice`): the objective counts the fastest of them only.
    pub choice: Option<String>,
    /// The size of its configuration space, where its strategy has one (a template's):
    /// a sequential session gives it at most that many trials.
    pub space: Option<u64>,
    /// A task built for ranges of sizes (a fused group of a network compiled for a
    /// range, issue 61): the points of the ranges its candidates are timed at, weighted.
    pub sizes: Option<tessera_runtime::runner::SizePoints>,
}

/// How a session runs.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    pub scheduler: SchedulerOptions,
    /// Measurements in all, the log's earlier ones included.
    pub trials: usize,
    /// Programs the model must have before it ranks proposals (TVM: 100).
    pub warmup: usize,
    /// Check each candidate's outputs against the task's reference program.
    pub check: bool,
    /// After tuning, measure each task's fastest N programs again (0: not at all) …
    pub remeasure_top: usize,
    /// … this many more runs each.
    pub remeasure_runs: usize,
    /// Called as `TuningSession::new` prepares each task (its policy and, with `check`,
    /// its reference outputs: a naive kernel compiled and run), with (done, total): the
    /// seconds before the first table, for a progress line.
    pub on_prepare: Option<PrepareProgress>,
    /// The cost model's memory across runs (`crate::memory`): what the model starts
    /// from, and where this log's dataset is written at the end; `None`: neither.
    pub memory: Option<MemoryUse>,
}

/// The callback of [`SessionOptions::on_prepare`].
#[derive(Clone)]
pub struct PrepareProgress(pub std::sync::Arc<dyn Fn(usize, usize) + Send + Sync>);

impl std::fmt::Debug for PrepareProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrepareProgress(..)")
    }
}

/// A failure that stops a session (not one candidate's).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("there is no task to tune")]
    NoTasks,
    #[error("task `{task}`: {source}")]
    Policy {
        task: String,
        #[source]
        source: PolicyError,
    },
    #[error("task `{task}`: the reference outputs: {message}")]
    Reference { task: String, message: String },
    #[error(transparent)]
    Measure(#[from] MeasureError),
    #[error(transparent)]
    Log(#[from] RecordError),
    #[error("the cost model's memory: {0}")]
    Memory(#[from] MemoryError),
}

/// What a session ends with.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSummary {
    /// Trials in all (the log's earlier ones included).
    pub trials: usize,
    /// Each task's best latency (seconds; `scheduler::NO_COST` when none).
    pub best_costs: Vec<f64>,
    /// The network's estimated latency (seconds), where every task has a number.
    pub estimated_latency: Option<f64>,
    /// Trials this session measured (0 when the log had already spent the budget).
    pub new_trials: usize,
    /// The share (0–1) of the estimated latency in tasks never measured, which keep
    /// their default schedules (`TaskScheduler::untuned_part`), where it is known.
    pub untuned_share: Option<f64>,
    /// Whether the log held in-network check lines when the session read it (with no
    /// new trials, that check still stands).
    pub log_checked: bool,
    /// Where the rounds' time went.
    pub profile: SessionProfile,
}

/// The per-task state of a session.
struct TaskState {
    policy: Box<dyn SearchPolicy>,
    info: PolicyInfo,
    reference: Option<Reference>,
    /// Each measured program's feature rows and cost (when the model learns).
    programs: Vec<(Vec<Vec<f32>>, Option<f64>)>,
    best: Option<f64>,
    /// Successful measurements in order (for re-measurement), each candidate once.
    good: Vec<(ScheduleDesc, f64)>,
    /// Measurements taken (failures included).
    measured: usize,
    /// The default schedule's steadiest time, when it was measured.
    baseline: Option<f64>,
}

/// The rounds' side of a session: what [`RoundRunner`] needs.
struct Rounds<'r, 's> {
    tasks: Vec<TuningTask>,
    states: Vec<TaskState>,
    measurer: Measurer,
    writer: RecordWriter,
    model: Box<dyn ProgramCostModel>,
    /// Whether some policy ranks through the model (else it is never trained).
    learn: bool,
    /// Programs of earlier logs the model trains on beside this session's.
    prior: Prior,
    stale: bool,
    warmup: usize,
    log_error: Option<RecordError>,
    /// Shared with the scheduler's table callback (one borrow at a time).
    report: &'r RefCell<&'s mut dyn SessionReport>,
    /// Where the rounds' time went (the measurer keeps its own part).
    profile: SessionProfile,
}

/// A tuning session over tasks.
pub struct TuningSession {
    tasks: Vec<TuningTask>,
    states: Vec<TaskState>,
    /// Why each task the strategy cannot tune was left out (it keeps its default).
    skipped: Vec<SessionError>,
    measurer: Measurer,
    log: PathBuf,
    model: Box<dyn ProgramCostModel>,
    opts: SessionOptions,
}

impl TuningSession {
    /// A session whose policies `strategy` creates, one per task; task `i`'s policy is
    /// seeded with `options.seed + i`. The reference outputs are computed here, so a task
    /// that cannot be checked fails early. A task the strategy cannot tune (or whose
    /// reference cannot be computed) is left out, with a warning when the session runs,
    /// and keeps its default schedule; when no task is left, that is the error.
    pub fn new(
        tasks: Vec<TuningTask>,
        strategy: &dyn StrategyFactory,
        options: &PolicyOptions,
        measurer: Measurer,
        log: impl Into<PathBuf>,
        model: Box<dyn ProgramCostModel>,
        opts: SessionOptions,
    ) -> Result<TuningSession, SessionError> {
        if tasks.is_empty() {
            return Err(SessionError::NoTasks);
        }
        let mut states = Vec::with_capacity(tasks.len());
        let mut kept = Vec::with_capacity(tasks.len());
        let mut skipped = Vec::new();
        let total = tasks.len();
        for (i, t) in tasks.into_iter().enumerate() {
            if let Some(p) = &opts.on_prepare {
                (p.0)(i, total);
            }
            match task_state(&t, i, strategy, options, &measurer, &opts) {
                Ok(state) => {
                    states.push(state);
                    kept.push(t);
                }
                Err(e) => skipped.push(e),
            }
        }
        if let Some(p) = &opts.on_prepare {
            (p.0)(total, total);
        }
        // a task the strategy cannot tune keeps its default schedule; none left is an error
        if kept.is_empty() {
            return Err(skipped.into_iter().next().expect("there were tasks"));
        }
        let tasks = kept;
        Ok(TuningSession {
            tasks,
            states,
            skipped,
            measurer,
            log: log.into(),
            model,
            opts,
        })
    }

    /// The tasks it tunes, in order (the order of `SessionSummary::best_costs`).
    pub fn tasks(&self) -> &[TuningTask] {
        &self.tasks
    }

    /// Runs the session to its end (see the module's steps).
    pub fn run(self, report: &mut dyn SessionReport) -> Result<SessionSummary, SessionError> {
        let TuningSession {
            tasks,
            states,
            skipped,
            measurer,
            log,
            model,
            opts,
        } = self;
        for e in &skipped {
            report.warn(&format!("{e}; it keeps its default schedule"));
        }
        report.out(&task_list(&tasks));
        let (earlier, log_checked) = read_log(&log, report)?;
        let report = RefCell::new(report);
        let learn = states.iter().any(|s| s.info.uses_scorer);
        let prior = match &opts.memory {
            Some(m) if learn => {
                load_prior(m, &log, &tasks[0].task.target, &mut **report.borrow_mut())?
            }
            _ => Prior::default(),
        };
        let mut rounds = Rounds {
            tasks,
            states,
            measurer,
            writer: RecordWriter::open(&log)?,
            model,
            learn,
            stale: !prior.is_empty(),
            prior,
            warmup: opts.warmup,
            log_error: None,
            report: &report,
            profile: SessionProfile::default(),
        };
        let mut scheduler = TaskScheduler::new(rounds.sched_tasks(), opts.scheduler.clone());
        for (i, t) in rounds.tasks.iter().enumerate() {
            if let Some(n) = t.space {
                scheduler.set_space(i, n);
            }
        }
        // a sequential session's budget is its tasks' (`--trials` each, at most a space)
        let budget = scheduler.sequential_budget().unwrap_or(opts.trials);
        let baselines = rounds.measure_baselines(&earlier)?;
        for (i, cost) in rounds.baseline_costs(&earlier, &baselines) {
            scheduler.set_baseline(i, cost);
            rounds.states[i].baseline = Some(cost);
        }
        for (i, bound, other) in scheduler.prune_options() {
            let t = &rounds.tasks[i];
            rounds.out(&format!(
                "task {i} ({}, an option of {}) is not tuned: even at {:.1}x the best default \
                 schedule's throughput it would take {:.3} ms, and another option's default \
                 takes {:.3} ms\n",
                t.task.name,
                t.choice.as_deref().unwrap_or("a convolution"),
                crate::scheduler::OPTION_SPEEDUP_BOUND,
                bound * 1e3,
                other * 1e3
            ));
        }
        let taken = rounds.restore(&earlier);
        // a model that starts from earlier logs ranks the first round
        rounds.retrain();
        if taken > 0 {
            rounds.out(&format!(
                "resumed from {}: {taken} earlier measurements of these tasks\n",
                log.display()
            ));
            for (i, s) in rounds.states.iter().enumerate() {
                scheduler.restore(i, s.measured, s.best);
            }
        }
        let start = std::time::Instant::now();
        let first = scheduler.total_trials();
        // the measurer's profile so far (the baselines) is not the rounds'
        let measured_before = rounds.measurer.profile().clone();
        let progress = |s: &TaskScheduler, done: bool| Progress {
            trials: s.total_trials(),
            session_trials: s.total_trials() - first,
            budget,
            elapsed: start.elapsed().as_secs_f64(),
            estimated_latency: s.estimated_latency(),
            done,
        };
        let mut text = RoundText::new(rounds.tasks.iter().map(|t| t.task.dag.flop_count()));
        let reason = scheduler.tune(budget, &mut rounds, &mut |s, next| {
            let table = text.after_round(s, next, start.elapsed().as_secs_f64());
            let p = progress(s, false);
            p.trace();
            let mut r = report.borrow_mut();
            r.out(&table);
            r.progress(&p);
        });
        report.borrow_mut().progress(&progress(&scheduler, true));
        if let Some(e) = rounds.log_error.take() {
            return Err(e.into());
        }
        rounds.out(&format!(
            "tuning ended ({reason:?}) after {} trials in {:.0} s; dead tasks: {:?}\n",
            scheduler.total_trials(),
            start.elapsed().as_secs_f64(),
            scheduler.dead()
        ));
        let new_trials = scheduler.total_trials() - first;
        let mut profile = std::mem::take(&mut rounds.profile);
        profile.total = start.elapsed().as_secs_f64();
        profile.trials = new_trials;
        profile.measure = rounds.measurer.profile().since(&measured_before);
        if new_trials > 0 {
            rounds.out(&profile.to_string());
        }
        // a log whose budget was already spent was re-measured by the run that spent it
        if new_trials == 0 && taken > 0 {
            rounds.out(&format!(
                "{} already holds {} trials, the budget of --trials {}: nothing was measured \
                 (give a larger --trials to tune further)\n",
                log.display(),
                scheduler.total_trials(),
                opts.trials
            ));
        } else {
            rounds.remeasure_and_say(opts.remeasure_top, opts.remeasure_runs)?;
        }
        if let Some(m) = opts.memory.as_ref().filter(|_| rounds.learn) {
            rounds.remember(m, &log);
        }
        rounds.out(&crate::session_report::unreached(&rounds.tasks, &scheduler));
        let untuned = scheduler.untuned_part();
        if let Some(line) = untuned.and_then(crate::session_report::untuned_line) {
            rounds.out(&line);
        }
        Ok(SessionSummary {
            trials: scheduler.total_trials(),
            best_costs: scheduler.best_costs().to_vec(),
            estimated_latency: scheduler.estimated_latency(),
            new_trials,
            untuned_share: untuned.map(|(total, part)| part / total),
            log_checked,
            profile,
        })
    }
}

/// Task `i`'s policy (seeded with `options.seed + i`) and, when candidates are checked,
/// its reference outputs.
fn task_state(
    t: &TuningTask,
    i: usize,
    strategy: &dyn StrategyFactory,
    options: &PolicyOptions,
    measurer: &Measurer,
    opts: &SessionOptions,
) -> Result<TaskState, SessionError> {
    let policy_err = |source| SessionError::Policy {
        task: t.task.name.clone(),
        source,
    };
    let seeded = PolicyOptions {
        seed: options.seed.wrapping_add(i as u64),
        ..options.clone()
    };
    let policy = strategy.create(&t.task, &seeded).map_err(policy_err)?;
    let info = policy.info();
    let reference = if opts.check {
        let naive = policy.reference().map_err(policy_err)?;
        let outputs = t.task.dag.outputs.len();
        let mut r = Reference::compute_at(measurer.backend(), &naive, outputs, 1, t.sizes.as_ref())
            .map_err(|e| SessionError::Reference {
                task: t.task.name.clone(),
                message: e.to_string(),
            })?;
        r.atol_of_max = t.task.dag.check_atol_of_max();
        Some(r)
    } else {
        None
    };
    Ok(TaskState {
        policy,
        info,
        reference,
        programs: Vec::new(),
        best: None,
        good: Vec::new(),
        measured: 0,
        baseline: None,
    })
}

/// The programs of earlier logs the model starts from (`m.source`), said in one line;
/// the datasets of the cache that cannot be read are warnings, a log named with
/// `--model-from` without a dataset is the error.
fn load_prior(
    m: &MemoryUse,
    log: &std::path::Path,
    target: &str,
    report: &mut dyn SessionReport,
) -> Result<Prior, SessionError> {
    let memory = ModelMemory::new(&m.root, target);
    let sets = match &m.source {
        PriorSource::Fresh => return Ok(Prior::default()),
        PriorSource::OtherLogs => {
            let (sets, errors) = memory.read_all(Some(log));
            for e in errors {
                report.warn(&format!("the cost model's memory: {e}"));
            }
            sets
        }
        PriorSource::Logs(logs) => logs
            .iter()
            .map(|l| memory.read(l))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let prior = Prior::sample(&sets, STORE_FEATURE_LEN, PRIOR_CAP);
    if !prior.is_empty() {
        let logs: Vec<String> = prior
            .sources
            .iter()
            .map(|(l, n)| format!("{} ({n})", l.display()))
            .collect();
        report.out(&format!(
            "cost model: starts from {} programs of {} earlier log(s) of target `{target}`: {} \
             (--fresh-model starts from nothing)\n",
            prior.len(),
            prior.sources.len(),
            logs.join(", ")
        ));
    }
    Ok(prior)
}

/// The log's records so far (none when it does not exist yet) and whether it holds an
/// in-network check; skipped lines are warnings.
fn read_log(
    log: &std::path::Path,
    report: &mut dyn SessionReport,
) -> Result<(Vec<Record>, bool), SessionError> {
    if !log.exists() {
        return Ok((Vec::new(), false));
    }
    let loaded = crate::record::load(log)?;
    for w in crate::record::skipped_warnings(log, &loaded.skipped) {
        report.warn(&w);
    }
    Ok((loaded.records, !loaded.checks.is_empty()))
}

/// `funcs` as the cost model sees them: for a task built for ranges of sizes, at the
/// largest point of its sample ([`crate::sizes`]).
fn modelled(funcs: &[PrimFunc], sizes: Option<&SizePoints>) -> Vec<PrimFunc> {
    match sizes {
        Some(s) => funcs.iter().map(|f| at_largest_point(f, s)).collect(),
        None => funcs.to_vec(),
    }
}

/// The feature rows of each program, computed on all cores (empty for a program whose
/// thread panicked).
pub fn features_of_programs(funcs: &[PrimFunc]) -> Vec<Vec<Vec<f32>>> {
    crate::par::par_map(funcs, Vec::new(), store_features)
}

impl Rounds<'_, '_> {
    /// Measures each task's fastest programs again ([`Rounds::remeasure`]) and prints
    /// what that found.
    fn remeasure_and_say(&mut self, top: usize, runs: usize) -> Result<(), SessionError> {
        let start = std::time::Instant::now();
        let again = self.remeasure(top, runs)?;
        if !again.is_empty() {
            let names: Vec<String> = self.tasks.iter().map(|t| t.task.name.clone()).collect();
            let seconds = start.elapsed().as_secs_f64();
            self.out(&remeasure_table(&again, &names, seconds));
        }
        Ok(())
    }

    fn out(&self, text: &str) {
        self.report.borrow_mut().out(text);
    }
    fn warn(&self, text: &str) {
        self.report.borrow_mut().warn(text);
    }

    fn sched_tasks(&self) -> Vec<SchedTask> {
        self.tasks
            .iter()
            .map(|t| SchedTask {
                weight: t.weight as f64,
                flop: t.task.dag.flop_count(),
                group: None,
                choice: t.choice.clone(),
            })
            .collect()
    }

    fn record(&self, task: usize, schedule: ScheduleDesc, result: MeasureResult) -> Record {
        let info = &self.states[task].info;
        Record::new(
            &info.workload_key,
            &self.tasks[task].task.target,
            &info.record_name,
            schedule,
            result,
        )
    }

    /// Measures the default schedule of every task the log has no baseline of, and
    /// appends them.
    fn measure_baselines(&mut self, earlier: &[Record]) -> Result<Vec<Record>, SessionError> {
        let mut out = Vec::new();
        let todo: Vec<usize> = (0..self.tasks.len())
            .filter(|&i| {
                let key = &self.states[i].info.workload_key;
                let target = &self.tasks[i].task.target;
                let known = earlier.iter().any(|r| {
                    matches!(r.schedule, ScheduleDesc::Default)
                        && &r.target == target
                        && &r.workload_key == key
                });
                !known && self.tasks[i].default.is_some()
            })
            .collect();
        let start = std::time::Instant::now();
        for (done, &i) in todo.iter().enumerate() {
            self.report.borrow_mut().phase(
                "baselines",
                done,
                todo.len(),
                start.elapsed().as_secs_f64(),
            );
            let Some(func) = self.tasks[i].default.clone() else {
                continue;
            };
            let outputs = self.tasks[i].task.dag.outputs.len();
            let inputs = TaskInputs {
                reference: self.states[i].reference.as_ref(),
                sizes: self.tasks[i].sizes.as_ref(),
            };
            let r = self
                .measurer
                .measure_task(&[Candidate { func }], outputs, inputs, None);
            if let Some(r) = r.into_iter().next() {
                out.push(self.record(i, ScheduleDesc::Default, r));
            }
        }
        if !todo.is_empty() {
            let elapsed = start.elapsed().as_secs_f64();
            self.report
                .borrow_mut()
                .phase("baselines", todo.len(), todo.len(), elapsed);
        }
        self.writer.append_batch(&out)?;
        Ok(out)
    }

    /// Each task's baseline latency: the steadiest of its default schedule's
    /// measurements (the log's and this run's).
    fn baseline_costs(&self, earlier: &[Record], now: &[Record]) -> Vec<(usize, f64)> {
        (0..self.tasks.len())
            .filter_map(|i| {
                let key = &self.states[i].info.workload_key;
                let target = &self.tasks[i].task.target;
                let costs: Vec<f64> = earlier
                    .iter()
                    .chain(now)
                    .filter(|r| {
                        matches!(r.schedule, ScheduleDesc::Default)
                            && &r.target == target
                            && &r.workload_key == key
                    })
                    .map(|r| r.result.mean_cost())
                    .collect();
                (!costs.is_empty()).then(|| (i, stable_cost(costs)))
            })
            .collect()
    }

    /// Feeds the log's measurements of these tasks back in (each distinct candidate
    /// once: a repeat is a re-measurement, not a trial). Returns how many were taken.
    fn restore(&mut self, records: &[Record]) -> usize {
        let mut seen: HashSet<(usize, String)> = HashSet::new();
        let mut per_task: Vec<Vec<(usize, Observation)>> = vec![Vec::new(); self.tasks.len()];
        for (k, r) in records.iter().enumerate() {
            if matches!(r.schedule, ScheduleDesc::Default) {
                continue;
            }
            let Some(i) = (0..self.tasks.len()).find(|&i| {
                self.states[i].info.workload_key == r.workload_key
                    && self.tasks[i].task.target == r.target
            }) else {
                continue;
            };
            let text = serde_json::to_string(&r.schedule).unwrap_or_default();
            if !seen.insert((i, text)) {
                continue;
            }
            let cost = r.result.is_ok().then(|| r.result.mean_cost());
            per_task[i].push((
                k,
                Observation {
                    schedule: r.schedule.clone(),
                    cost,
                },
            ));
        }
        // what each task's policy took, then noted in the log's order
        let mut taken: Vec<(usize, usize, Observation, Vec<Vec<f32>>)> = Vec::new();
        for (i, obs) in per_task.into_iter().enumerate() {
            let list: Vec<Observation> = obs.iter().map(|(_, o)| o.clone()).collect();
            let verdicts = self.states[i].policy.observe(&list);
            let name = self.tasks[i].task.name.clone();
            let mut kept: Vec<(usize, Observation)> = Vec::new();
            for ((k, o), v) in obs.into_iter().zip(verdicts) {
                match v {
                    Ok(()) => kept.push((k, o)),
                    Err(e) => self.warn(&format!("a record of task `{name}`: {e}")),
                }
            }
            let feats = self.features_of_candidates(i, &kept);
            taken.extend(kept.into_iter().zip(feats).map(|((k, o), f)| (k, i, o, f)));
        }
        taken.sort_by_key(|(k, ..)| *k);
        let n = taken.len();
        for (_, i, o, f) in taken {
            self.note(i, o, f);
        }
        if n > 0 {
            self.retrain();
        }
        n
    }

    /// The feature rows of candidates of task `i` (empty when the model does not learn
    /// or a candidate does not lower).
    fn features_of_candidates(&self, i: usize, obs: &[(usize, Observation)]) -> Vec<Vec<Vec<f32>>> {
        if !self.learn {
            return vec![Vec::new(); obs.len()];
        }
        let descs: Vec<ScheduleDesc> = obs.iter().map(|(_, o)| o.schedule.clone()).collect();
        let lowered = self.states[i].policy.lower(&descs);
        let ok: Vec<PrimFunc> = lowered
            .iter()
            .filter_map(|f| f.as_ref().ok().cloned())
            .collect();
        let ok = modelled(&ok, self.tasks[i].sizes.as_ref());
        let mut feats = features_of_programs(&ok).into_iter();
        lowered
            .iter()
            .map(|f| match f {
                Ok(_) => feats.next().unwrap_or_default(),
                Err(_) => Vec::new(),
            })
            .collect()
    }

    /// Notes one measured candidate of task `i` (after its policy observed it).
    fn note(&mut self, i: usize, o: Observation, feats: Vec<Vec<f32>>) {
        let s = &mut self.states[i];
        s.measured += 1;
        if let Some(c) = o.cost {
            if s.best.is_none_or(|b| c < b) {
                s.best = Some(c);
            }
            s.good.push((o.schedule, c));
        }
        if self.learn {
            s.programs.push((feats, o.cost));
            self.stale = true;
        }
    }

    /// The programs the model trains on: this session's and the earlier logs'.
    fn num_programs(&self) -> usize {
        self.states.iter().map(|s| s.programs.len()).sum::<usize>() + self.prior.len()
    }

    /// This log's dataset: every task's programs with their normalized throughputs.
    fn dataset(&self, log: &std::path::Path) -> Dataset {
        let tasks = self
            .states
            .iter()
            .filter_map(|s| {
                let best = s.best?;
                let (programs, labels) = s
                    .programs
                    .iter()
                    .filter(|(f, _)| !f.is_empty())
                    .map(|(f, c)| (f.clone(), c.map_or(0.0, |c| (best / c) as f32)))
                    .unzip();
                Some(TaskPrograms {
                    workload_key: s.info.workload_key.clone(),
                    programs,
                    labels,
                })
            })
            .collect();
        Dataset {
            log: crate::memory::absolute(log),
            target: self.tasks[0].task.target.clone(),
            tasks,
        }
    }

    /// Writes this log's dataset into the memory (a failure is a warning: the log holds
    /// every measurement, and the next run on it writes the dataset again).
    fn remember(&self, m: &MemoryUse, log: &std::path::Path) {
        let set = self.dataset(log).thinned(crate::memory::DATASET_CAP);
        if set.num_programs() == 0 {
            return;
        }
        let memory = ModelMemory::new(&m.root, &set.target);
        match memory.store(&set) {
            Ok(path) => self.out(&format!(
                "the cost model's memory: {} programs of {} kept in {}\n",
                set.num_programs(),
                log.display(),
                path.display()
            )),
            Err(e) => self.warn(&format!("the cost model's memory was not updated: {e}")),
        }
    }

    fn retrain(&mut self) {
        if !self.learn || !self.stale || self.num_programs() < self.warmup {
            return;
        }
        let mut xs = self.prior.programs.clone();
        let mut ys = self.prior.labels.clone();
        for s in &self.states {
            let Some(best) = s.best else { continue };
            for (f, c) in &s.programs {
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
                let line = format!(
                    "    cost model `{}` trained on {} programs\n",
                    self.model.name(),
                    xs.len()
                );
                self.out(&line);
            }
            Err(e) => self.out(&format!("    cost model not trained: {e}\n")),
        }
    }

    /// Measures candidates of task `i` and appends them to the log.
    fn measure_and_log(
        &mut self,
        i: usize,
        descs: &[ScheduleDesc],
        funcs: Vec<Result<PrimFunc, ProgramError>>,
    ) -> (Vec<MeasureResult>, Result<(), RecordError>) {
        let cands: Vec<Candidate> = funcs.into_iter().map(|func| Candidate { func }).collect();
        let outputs = self.tasks[i].task.dag.outputs.len();
        // the best time known: the tuned candidates', or before any the default's, which
        // the search keeps anyway (what a far slower candidate is cut against)
        let state = &self.states[i];
        let best_known = match (state.best, state.baseline) {
            (Some(b), Some(d)) => Some(b.min(d)),
            (b, d) => b.or(d),
        };
        let inputs = TaskInputs {
            reference: state.reference.as_ref(),
            sizes: self.tasks[i].sizes.as_ref(),
        };
        let results = self
            .measurer
            .measure_task(&cands, outputs, inputs, best_known);
        let records: Vec<Record> = descs
            .iter()
            .zip(&results)
            .map(|(d, r)| self.record(i, d.clone(), r.clone()))
            .collect();
        let logging = std::time::Instant::now();
        let logged = self.writer.append_batch(&records);
        self.profile.logging += logging.elapsed().as_secs_f64();
        (results, logged)
    }

    /// Measures the `top` fastest candidates of every task `runs` more times, each run in
    /// a fresh runner process (one batch per run, the process restarted before it),
    /// appending every measurement to the log.
    fn remeasure(&mut self, top: usize, runs: usize) -> Result<Vec<Remeasured>, SessionError> {
        let mut out = Vec::new();
        if top == 0 || runs == 0 {
            return Ok(out);
        }
        let start = std::time::Instant::now();
        let todo: Vec<usize> = (0..self.tasks.len())
            .filter(|&t| !self.states[t].good.is_empty())
            .collect();
        if todo.is_empty() {
            return Ok(out);
        }
        let total = todo.len();
        for (done, &task) in todo.iter().enumerate() {
            let elapsed = start.elapsed().as_secs_f64();
            self.report
                .borrow_mut()
                .phase("re-measuring", done, total, elapsed);
            let mut leaders: Vec<&(ScheduleDesc, f64)> = self.states[task].good.iter().collect();
            leaders.sort_by(|a, b| a.1.total_cmp(&b.1));
            leaders.truncate(top);
            if leaders.is_empty() {
                continue;
            }
            let descs: Vec<ScheduleDesc> = leaders.iter().map(|(d, _)| d.clone()).collect();
            let mut rows: Vec<Remeasured> = leaders
                .iter()
                .enumerate()
                .map(|(rank, (_, first))| Remeasured {
                    task,
                    rank,
                    first: *first,
                    again: Vec::new(),
                })
                .collect();
            let funcs: Vec<Result<PrimFunc, ProgramError>> = self.states[task]
                .policy
                .lower(&descs)
                .into_iter()
                .map(|f| f.map_err(ProgramError::from))
                .collect();
            for _ in 0..runs {
                self.measurer.restart_runner();
                let (results, logged) = self.measure_and_log(task, &descs, funcs.clone());
                logged?;
                for (row, r) in rows.iter_mut().zip(&results) {
                    row.again.push(r.is_ok().then(|| r.mean_cost()));
                }
            }
            out.extend(rows);
        }
        let elapsed = start.elapsed().as_secs_f64();
        self.report
            .borrow_mut()
            .phase("re-measuring", total, total, elapsed);
        Ok(out)
    }

    /// The core's scorer over the shared model: feature rows, then the prediction; a
    /// program without rows scores `f32::NEG_INFINITY`.
    fn score(
        model: &dyn ProgramCostModel,
        funcs: &[PrimFunc],
        sizes: Option<&SizePoints>,
    ) -> Vec<f32> {
        let feats = features_of_programs(&modelled(funcs, sizes));
        let scores = model
            .predict(&feats)
            .unwrap_or_else(|_| vec![f32::NEG_INFINITY; funcs.len()]);
        scores
            .into_iter()
            .zip(&feats)
            .map(|(s, f)| if f.is_empty() { f32::NEG_INFINITY } else { s })
            .collect()
    }
}

impl RoundRunner for Rounds<'_, '_> {
    fn run_round(&mut self, task: usize, n: usize) -> RoundOutcome {
        if self.log_error.is_some() {
            return RoundOutcome::default();
        }
        let use_model = self.learn && self.model.is_trained() && self.num_programs() >= self.warmup;
        let model = &*self.model;
        let sizes = self.tasks[task].sizes.clone();
        let mut scorer = |funcs: &[PrimFunc]| Rounds::score(model, funcs, sizes.as_ref());
        let policy = &mut self.states[task].policy;
        let searching = std::time::Instant::now();
        let proposed = if use_model {
            policy.propose(n, Some(&mut scorer))
        } else {
            policy.propose(n, None)
        };
        self.profile.search += searching.elapsed().as_secs_f64();
        let name = self.tasks[task].task.name.clone();
        let proposals = match proposed {
            Ok(p) if p.is_empty() => {
                self.out(&format!(
                    "    task `{name}`: the search has nothing new to propose\n"
                ));
                return RoundOutcome::default();
            }
            Ok(p) => p,
            Err(e) => {
                self.warn(&format!("task `{name}`: {e}"));
                return RoundOutcome::default();
            }
        };
        let (descs, funcs): (Vec<ScheduleDesc>, Vec<Result<PrimFunc, ProgramError>>) = proposals
            .into_iter()
            .map(|p| (p.schedule, p.program.map_err(ProgramError::from)))
            .unzip();
        let featuring = std::time::Instant::now();
        let feats: Vec<Vec<Vec<f32>>> = funcs
            .iter()
            .map(|f| match f {
                Ok(f) if self.learn => {
                    store_features(&modelled(std::slice::from_ref(f), sizes.as_ref())[0])
                }
                _ => Vec::new(),
            })
            .collect();
        self.profile.features += featuring.elapsed().as_secs_f64();
        let (results, logged) = self.measure_and_log(task, &descs, funcs);
        if let Err(e) = logged {
            self.log_error = Some(e);
        }
        let obs: Vec<Observation> = descs
            .into_iter()
            .zip(&results)
            .map(|(schedule, r)| Observation {
                schedule,
                cost: r.is_ok().then(|| r.mean_cost()),
            })
            .collect();
        for v in self.states[task].policy.observe(&obs) {
            if let Err(e) = v {
                self.warn(&format!("task `{name}`: {e}"));
            }
        }
        let best = obs.iter().filter_map(|o| o.cost).reduce(f64::min);
        let measured = obs.len();
        for (o, f) in obs.into_iter().zip(feats) {
            self.note(task, o, f);
        }
        let training = std::time::Instant::now();
        self.retrain();
        self.profile.training += training.elapsed().as_secs_f64();
        RoundOutcome {
            measured,
            best_cost: best,
        }
    }
}
