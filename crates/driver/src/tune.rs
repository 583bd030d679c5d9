//! `tessera tune` as one library call: [`Toolchain::tune`] takes a typed
//! [`TuneRequest`] (what to tune, the strategy and cost model, the session's and the
//! measurement's options, where to measure, the closing checks) and returns a
//! [`TuneReport`]; what happens meanwhile goes to a [`TuneEvents`] the caller gives (the
//! CLI's terminal is one). In order:
//!
//! 1. the request checked (the comparison's rounds, a `--resume`d log that must exist);
//! 2. the device pre-flight: a tracker's key must have a server now, a local device must
//!    open (else every candidate would fail with the same error, after its wait);
//! 3. the tasks (`tuning.rs`), the measurer, the strategy from the registry, the cost
//!    model by kind, and the search (`tessera_search::session`);
//! 4. for a network measured here: the in-network check of the tuned kernels (unless the
//!    log's own check stands: nothing new was measured), then the untuned and tuned
//!    builds compared in alternating rounds.

use crate::pipeline::Toolchain;
use crate::tuning::{BuildComparison, NetworkCheckOutcome};
use crate::{DriverError, NetworkSpec};
use std::path::PathBuf;
use std::time::Duration;
use tessera_backends::Target;
use tessera_costmodel::{PackSumParams, PackSumXgb, ProgramCostModel, RandomProgramModel};
use tessera_graph::dynamic::describe;
use tessera_graph::ConvPlan;
use tessera_rpc::TrackerClient;
use tessera_search::session::TuningTask;
use tessera_te::catalog::OpSpec;

use crate::range_tune::RangeTune;
pub use crate::range_tune::{point_estimates, sample_points, PointEstimates};

pub use tessera_search::measure::{MeasureOptions, RemoteOptions, DEFAULT_SLOW_CUTOFF};
pub use tessera_search::memory::{MemoryUse, ModelMemory, PriorSource};
pub use tessera_search::policy::PolicyOptions;
pub use tessera_search::scheduler::{SchedulerOptions, TaskSelection, NO_COST};
pub use tessera_search::session::{
    PrepareProgress, Progress, SessionOptions, SessionReport as TuneEvents, SessionSummary,
};

/// The fewest rounds of the closing comparison that can show a difference beyond the
/// noise (every round must agree: `runtime::timer::Comparison`).
pub const MIN_COMPARE_ROUNDS: usize = 3;

/// What a session tunes.
#[derive(Clone, Debug)]
pub enum TuneSubject {
    /// Every task of a network.
    Network(NetworkSpec),
    /// One catalog operator, for a target.
    Operator { op: OpSpec, target: Target },
}

impl TuneSubject {
    pub fn target(&self) -> &Target {
        match self {
            TuneSubject::Network(spec) => &spec.target,
            TuneSubject::Operator { target, .. } => target,
        }
    }
}

/// The auto-scheduler's cost model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostModelKind {
    /// Pack-sum gradient-boosted trees (TVM's `XGBModel`).
    Xgb,
    /// Random scores (TVM's `RandomModel`): the search without a model.
    Random,
}

impl std::str::FromStr for CostModelKind {
    type Err = DriverError;
    fn from_str(s: &str) -> Result<Self, DriverError> {
        match s {
            "xgb" => Ok(CostModelKind::Xgb),
            "random" => Ok(CostModelKind::Random),
            m => Err(DriverError::Request(format!(
                "unknown cost model `{m}` (xgb or random)"
            ))),
        }
    }
}

impl CostModelKind {
    fn build(self, seed: u64) -> Box<dyn ProgramCostModel> {
        match self {
            CostModelKind::Xgb => Box::new(PackSumXgb::new(PackSumParams::default())),
            CostModelKind::Random => Box::new(RandomProgramModel::new(seed)),
        }
    }
}

/// One tuning session, as a caller asks for it.
#[derive(Clone, Debug)]
pub struct TuneRequest {
    pub subject: TuneSubject,
    /// Template tuning (AutoTVM) over the anchor operators instead of the auto-scheduler
    /// over fused groups.
    pub templates: bool,
    /// The strategy, by its name in the registry (`sketch`, `xgb`, `ga`, …).
    pub strategy: String,
    pub cost_model: CostModelKind,
    /// The record log, appended to; a log given again resumes.
    pub log: PathBuf,
    /// The log must exist (a resumed run).
    pub resume: bool,
    pub session: SessionOptions,
    pub policy: PolicyOptions,
    /// How candidates are built and measured; `rpc` measures on a tracker's servers.
    pub measure: MeasureOptions,
    /// After tuning a network here, time each tuned kernel inside whole runs against its
    /// default schedule (`Toolchain::check_in_network`).
    pub network_check: bool,
    /// Rounds of the closing comparison of the untuned and tuned builds (0: none, else
    /// at least [`MIN_COMPARE_ROUNDS`]).
    pub compare_rounds: usize,
    /// A network with runtime sizes: the points its kernels are timed at, each one
    /// value per size the spec names (empty: the largest and its quarters,
    /// [`crate::range_tune::sample_points`]).
    pub sample: Vec<Vec<i64>>,
}

impl TuneRequest {
    /// `subject` tuned into `log` as `tessera tune` does by default: the auto-scheduler
    /// with the xgb model, 64 trials in rounds of 64, every candidate checked, the three
    /// best of each task measured again three times, no model memory, measured here;
    /// then the in-network check and 5 comparison rounds.
    pub fn new(subject: TuneSubject, log: impl Into<PathBuf>) -> TuneRequest {
        let trials = 64;
        TuneRequest {
            subject,
            templates: false,
            strategy: "sketch".into(),
            cost_model: CostModelKind::Xgb,
            log: log.into(),
            resume: false,
            session: SessionOptions {
                scheduler: SchedulerOptions::default(),
                trials,
                warmup: trials.min(100),
                check: true,
                remeasure_top: 3,
                remeasure_runs: 3,
                on_prepare: None,
                memory: None,
            },
            policy: PolicyOptions::default(),
            measure: MeasureOptions::default(),
            network_check: true,
            compare_rounds: 5,
            sample: Vec::new(),
        }
    }
}

/// What a network's closing steps build and time: its plan, or its module for ranges.
#[derive(Clone, Copy)]
enum Closing<'a> {
    Plan(&'a ConvPlan),
    Range(&'a RangeTune),
}

/// One task of a finished session.
#[derive(Clone, Debug)]
pub struct TunedTask {
    pub name: String,
    pub workload_key: String,
    pub weight: usize,
    /// Its best latency in seconds ([`NO_COST`] when none).
    pub best: f64,
}

/// How the in-network check went.
pub enum CheckStep {
    /// Not run: one operator, a remote or simulated device, a target whose defaults run
    /// elsewhere, or not asked for.
    NotRun,
    /// Nothing new was measured: the log's own check stands.
    Stands,
    Ran(NetworkCheckOutcome),
}

/// How the closing comparison went.
pub enum CompareStep {
    /// One operator, or `compare_rounds` 0.
    Skipped,
    /// No group got a tuned schedule: the two builds are one.
    NothingApplied,
    /// A template tune of a network whose selections count sizes at run time (named):
    /// its builds are compiled for them, which the template path's check and
    /// comparison do not do (the auto-scheduler tunes it as a range module).
    Ranges(String),
    Compared(BuildComparison),
    /// A module for ranges of sizes compared at each point of the tune's sample (the
    /// point's name and its comparison).
    ComparedAtPoints(Vec<(String, BuildComparison)>),
}

/// What a session ends with.
pub struct TuneReport {
    pub summary: SessionSummary,
    pub tasks: Vec<TunedTask>,
    /// The network's name (none for one operator).
    pub network: Option<String>,
    pub check: CheckStep,
    pub comparison: CompareStep,
    /// A network tuned for ranges of sizes: the estimate at each point of the sample.
    pub per_point: Option<PointEstimates>,
}

/// Checks that the compare rounds can tell a speed-up from noise.
pub fn check_compare_rounds(n: usize) -> Result<(), DriverError> {
    if n != 0 && n < MIN_COMPARE_ROUNDS {
        return Err(DriverError::Request(format!(
            "{n} comparison rounds: {n} rounds cannot tell a speed-up from noise: give 0 (no \
             comparison) or at least {MIN_COMPARE_ROUNDS}"
        )));
    }
    Ok(())
}

/// Fails with the reason unless the tracker of `rpc` has a server of its key.
pub fn check_remote_key(rpc: &RemoteOptions) -> Result<(), DriverError> {
    let mut c = TrackerClient::connect(&rpc.tracker, &rpc.token, Duration::from_secs(5))?;
    let n = c
        .summary()?
        .servers
        .iter()
        .filter(|s| s.key == rpc.key)
        .count();
    if n == 0 {
        return Err(DriverError::Request(format!(
            "the RPC tracker at {} has no server of key `{}` (see `tessera rpc queue`)",
            rpc.tracker, rpc.key
        )));
    }
    Ok(())
}

/// Sends a pipeline phase's progress to `events` (no elapsed time: the phases of the
/// closing checks are short).
fn phase_to(events: &mut dyn TuneEvents) -> impl FnMut(&str, usize, usize) + '_ {
    move |name, done, total| events.phase(name, done, total, 0.0)
}

impl Toolchain {
    /// Runs the tuning session `req` asks for, its progress to `events`.
    pub fn tune(
        &self,
        req: &TuneRequest,
        events: &mut dyn TuneEvents,
    ) -> Result<TuneReport, DriverError> {
        check_compare_rounds(req.compare_rounds)?;
        if let TuneSubject::Network(NetworkSpec {
            runtime_size: Some(rs),
            ..
        }) = &req.subject
        {
            // a sample outside the ranges is refused before the device is opened
            sample_points(&rs.ranges, &req.sample)?;
        }
        if req.resume && !req.log.exists() {
            return Err(DriverError::Request(format!(
                "resuming: the log {} does not exist",
                req.log.display()
            )));
        }
        if let Some(rpc) = &req.measure.rpc {
            if self.remote() != Some(rpc) {
                // the session, its checks and comparison run on the tracker's servers
                return self.with_remote(Some(rpc.clone())).tune(req, events);
            }
        }
        let target = req.subject.target();
        let backend = self.registry().backend_for(target)?;
        if let Some(rpc) = &req.measure.rpc {
            check_remote_key(rpc)?;
        } else if !req.measure.simulated {
            let device =
                self.registry()
                    .device_for(target)
                    .map_err(|source| DriverError::NoDevice {
                        purpose: "tuning measures on",
                        target: target.to_string(),
                        source: Box::new(source),
                    })?;
            events.out(&format!("measuring on {}\n", device.describe()));
        }
        let (plan, tasks, range) = self.session_tasks(req)?;
        let measurer =
            tessera_search::measure::Measurer::with_backend(backend, req.measure.clone())?;
        let strategy = self.registry().strategy(&req.strategy)?;
        let session = tessera_search::session::TuningSession::new(
            tasks,
            &strategy,
            &req.policy,
            measurer,
            &req.log,
            req.cost_model.build(req.policy.seed),
            req.session.clone(),
        )
        .map_err(|e| self.session_error(req, e))?;
        let names: Vec<(String, String, usize)> = session
            .tasks()
            .iter()
            .map(|t| (t.task.name.clone(), t.task.workload_key.clone(), t.weight))
            .collect();
        let summary = session
            .run(events)
            .map_err(|e| self.session_error(req, e))?;
        let tasks = names
            .into_iter()
            .zip(&summary.best_costs)
            .map(|((name, workload_key, weight), &best)| TunedTask {
                name,
                workload_key,
                weight,
                best,
            })
            .collect();
        let mut report = TuneReport {
            tasks,
            network: plan.as_ref().map(|p| p.base().name.clone()),
            check: CheckStep::NotRun,
            comparison: CompareStep::Skipped,
            per_point: None,
            summary,
        };
        let closing = match (&range, &plan) {
            (Some(range), _) => Closing::Range(range),
            (None, Some(plan)) => {
                // template tuning of a detector: its builds are compiled for the counts
                let counted = tessera_graph::dynamic::selection_ranges(plan.rule_graph());
                if !counted.is_empty() {
                    report.comparison = CompareStep::Ranges(describe(&counted));
                    return Ok(report);
                }
                Closing::Plan(plan)
            }
            (None, None) => return Ok(report),
        };
        self.close(req, closing, &mut report, events)?;
        Ok(report)
    }

    /// A network's closing steps after its session: the in-network check (unless the
    /// log's own stands: nothing new was measured), for ranges the estimate per point,
    /// and the comparison of the untuned and tuned builds.
    fn close(
        &self,
        req: &TuneRequest,
        closing: Closing<'_>,
        report: &mut TuneReport,
        events: &mut dyn TuneEvents,
    ) -> Result<(), DriverError> {
        let target = req.subject.target();
        // the check times kernels here, in whole runs: not for a remote device (each
        // step would carry a round trip) nor a target whose defaults run on another
        // processor (VTA's, on its board's CPU)
        let local = req.measure.rpc.is_none() && !req.measure.simulated;
        let checks = local && req.network_check && !self.needs(target).no_network_check;
        let log = &req.log;
        if report.summary.new_trials == 0 && report.summary.log_checked {
            report.check = CheckStep::Stands;
        } else if checks {
            let progress = &mut phase_to(events);
            let outcome = match closing {
                Closing::Plan(plan) => self.check_in_network(plan, target, log, progress)?,
                Closing::Range(r) => self.check_range_in_network(r, target, log, progress)?,
            };
            report.check = CheckStep::Ran(outcome);
        }
        if let Closing::Range(range) = closing {
            let keys: Vec<(String, usize)> = (report.tasks.iter())
                .map(|t| (t.workload_key.clone(), t.weight))
                .collect();
            let loaded = self.read_log(log)?;
            let target = target.to_string();
            let estimates = point_estimates(&range.ranges, &range.points, &keys, &target, &loaded);
            report.per_point = Some(estimates);
            report.network = Some(range.name.clone());
        }
        if req.compare_rounds > 0 {
            let (rounds, progress) = (req.compare_rounds, &mut phase_to(events));
            let compared = match closing {
                Closing::Plan(plan) => self
                    .compare_untuned_and_tuned(plan, target, log, rounds, progress)?
                    .map(CompareStep::Compared),
                Closing::Range(r) => self
                    .compare_range_untuned_and_tuned(r, target, log, rounds, progress)?
                    .map(CompareStep::ComparedAtPoints),
            };
            report.comparison = compared.unwrap_or(CompareStep::NothingApplied);
        }
        Ok(())
    }

    /// The session's tasks: one operator's, a network's (with its plan), or those of a
    /// network compiled for ranges of sizes (with its name, ranges and sample).
    #[allow(clippy::type_complexity)]
    fn session_tasks(
        &self,
        req: &TuneRequest,
    ) -> Result<(Option<ConvPlan>, Vec<TuningTask>, Option<RangeTune>), DriverError> {
        let spec = match &req.subject {
            TuneSubject::Operator { op, target } => {
                let task = self.operator_tuning_task(op, target, req.templates)?;
                return Ok((None, vec![task], None));
            }
            TuneSubject::Network(spec) => spec,
        };
        let counted_only;
        let rs = match &spec.runtime_size {
            Some(rs) => rs,
            None => {
                let (plan, tasks) = self.tuning_tasks(spec, req.templates)?;
                let counted = tessera_graph::dynamic::selection_ranges(plan.rule_graph());
                if req.templates || counted.is_empty() {
                    if !req.sample.is_empty() {
                        return Err(DriverError::Request(
                            "--sample is for a network with runtime sizes (a --shape range)".into(),
                        ));
                    }
                    return Ok((Some(plan), tasks, None));
                }
                // a detector: its selections' counts are its runtime sizes, which its
                // module reads as a range module does (timed at their bounds)
                counted_only = crate::runtime_size::RuntimeSize {
                    ranges: Vec::new(),
                    at: Vec::new(),
                };
                &counted_only
            }
        };
        if req.templates {
            return Err(DriverError::Request(format!(
                "{rs}: template tuning of a network with runtime sizes is not there; the \
                 auto-scheduler (without --templates) tunes it for its ranges"
            )));
        }
        let points = sample_points(&rs.ranges, &req.sample)?;
        let (range, tasks) = self.range_tuning_tasks(spec, rs, &points)?;
        Ok((None, tasks, Some(range)))
    }

    fn session_error(
        &self,
        req: &TuneRequest,
        e: tessera_search::session::SessionError,
    ) -> DriverError {
        DriverError::Session {
            log: req.log.clone(),
            source: Box::new(e),
        }
    }
}
