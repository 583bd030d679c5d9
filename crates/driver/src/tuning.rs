//! What `tessera tune` asks of the pipeline: a network's (or one operator's) tuning
//! tasks, and after the search the in-network check of the tuned kernels and the
//! comparison of the untuned and tuned builds. The search itself is the library's
//! (`tessera_search::session`).

use crate::pipeline::Toolchain;
use crate::{DriverError, NetworkSpec};
use std::path::Path;
use tessera_backends::Target;
use tessera_graph::{ConvPlan, GraphModule};
use tessera_runtime::timer::{alternate, runs_within, time_once_ms, Comparison, Side};
use tessera_runtime::{TimeEvaluator, TimeResult};
use tessera_search::network_check::{
    candidate_histories, check_candidates_in_network, CheckOptions, NetworkCheck, Overruled,
    CANDIDATES,
};
use tessera_search::record::{ApplyHistoryBest, RecordWriter};
use tessera_search::session::TuningTask;
use tessera_te::catalog::OpSpec;

/// A phase's progress: its name, steps done, steps in all.
pub type PhaseProgress<'a> = &'a mut dyn FnMut(&str, usize, usize);

/// The in-network check's outcome.
pub struct NetworkCheckOutcome {
    pub options: CheckOptions,
    /// One check per tuned group and candidate schedule (empty: no group was built
    /// with a tuned schedule).
    pub checks: Vec<NetworkCheck>,
    /// The groups whose history best this check overruled: builds with the log now use
    /// the default schedule or another candidate.
    pub overruled: Vec<Overruled>,
}

impl NetworkCheckOutcome {
    /// No group was built with a tuned schedule: nothing checked.
    pub(crate) fn nothing(options: CheckOptions) -> NetworkCheckOutcome {
        NetworkCheckOutcome {
            options,
            checks: Vec::new(),
            overruled: Vec::new(),
        }
    }
}

/// Builds the network with one candidate history best: the network, and how many groups
/// it built from a record.
pub(crate) type CandidateBuild<'a> =
    &'a mut dyn FnMut(
        &ApplyHistoryBest,
    ) -> Result<(tessera_graph::CompiledNetwork, usize), DriverError>;

/// The in-network check's building phase.
pub(crate) const BUILDING: &str = "in-network check: building";

/// The untuned and tuned builds timed in alternating rounds.
pub struct BuildComparison {
    /// Distinct groups built with a tuned schedule.
    pub applied: usize,
    pub rounds: usize,
    /// Whole runs per side per round.
    pub runs: usize,
    pub untuned: TimeResult,
    pub tuned: TimeResult,
    /// Each round's medians, untuned as A and tuned as B.
    pub per_round: Comparison,
}

/// Rounds get at most this many whole runs per side, fewer where a run is long, so that
/// a side's share of a round stays near `COMPARE_ROUND_MS`.
const COMPARE_RUNS: usize = 4;
const COMPARE_ROUND_MS: f64 = 1000.0;

impl Toolchain {
    /// The tasks a session tunes for a network: the auto-scheduler's fused-group tasks of
    /// its plan, or with `templates` the catalog operators the template extensions fit
    /// to the target (each with the baseline an untuned build runs); and the plan.
    pub fn tuning_tasks(
        &self,
        spec: &NetworkSpec,
        templates: bool,
    ) -> Result<(ConvPlan, Vec<TuningTask>), DriverError> {
        let hw = self.hardware(&spec.target)?;
        if !templates {
            let plan = self.plan(spec)?;
            let tasks = tessera_search::tasks::plan_tasks(&plan, &spec.target, &hw)?;
            return Ok((plan, tasks));
        }
        let plan = self.plan_for_templates(spec)?;
        let tasks = tessera_search::tasks::operator_tasks(plan.base(), &spec.target, &hw)?;
        let tasks = tasks
            .into_iter()
            .filter_map(|mut t| {
                self.keep_template_task(&mut t, &spec.target, &hw)
                    .then_some(t)
            })
            .collect();
        Ok((plan, tasks))
    }

    /// The task of one catalog operator (`tessera tune --op`), with `templates` the
    /// baseline its template's untuned build runs (tuned even where the template fits
    /// another target: the strategy then says why).
    pub fn operator_tuning_task(
        &self,
        op: &OpSpec,
        target: &Target,
        templates: bool,
    ) -> Result<TuningTask, DriverError> {
        let hw = self.hardware(target)?;
        let mut task = tessera_search::tasks::operator_task(op, target, &hw)?;
        if templates {
            self.keep_template_task(&mut task, target, &hw);
        }
        Ok(task)
    }

    /// Whether the template extensions tune `task` for `target` (setting its baseline);
    /// a task none has an opinion of is kept, for the strategy to say so.
    fn keep_template_task(
        &self,
        task: &mut TuningTask,
        target: &Target,
        hw: &tessera_backends::HardwareParams,
    ) -> bool {
        self.extensions()
            .iter()
            .find_map(|e| e.keep_template_task(task, target, hw))
            .unwrap_or(true)
    }

    /// The in-network check after tuning `plan` into `log`: the network built with
    /// default schedules and with each of the log's `CANDIDATES` fastest schedules of
    /// every tuned group, all profiled in rotating rounds (`search::network_check`); the
    /// checks are appended to the log, and builds with it then use each group's fastest
    /// schedule inside the network.
    pub fn check_in_network(
        &self,
        plan: &ConvPlan,
        target: &Target,
        log: &Path,
        progress: PhaseProgress<'_>,
    ) -> Result<NetworkCheckOutcome, DriverError> {
        let loaded = self.read_log(log)?;
        // the records alone: an earlier check must not hide the schedule it overruled
        let bests = candidate_histories(&loaded.records, CANDIDATES);
        let target_str = target.to_string();
        let (graph, _) = tessera_search::tasks::pick_algorithms(plan, &bests[0], &target_str)?;
        let configurations = crate::history::holds_configurations(&loaded.records);
        let options = CheckOptions::default();
        let built = self.candidate_builds(&bests, progress, &mut |best| {
            let (built, applied, _) =
                self.compile_with_best(&graph, target, best, configurations)?;
            Ok((built, applied))
        })?;
        let Some(mut tuned) = built else {
            return Ok(NetworkCheckOutcome::nothing(options));
        };
        let mut default = self.load(self.compile_graph(&graph, target, None)?)?;
        progress(BUILDING, bests.len() + 1, bests.len() + 1);
        let rounds = options.rounds;
        let checks = check_candidates_in_network(
            &mut tuned,
            &mut default,
            &bests,
            &target_str,
            &options,
            &mut |done, _| progress("in-network check: timing", done, rounds),
        )?;
        Self::keep_checks(log, loaded, checks, options)
    }

    /// The builds of the in-network check with each of `bests` (`build` gives the
    /// network and how many groups it built from a record), loaded; `None` where the
    /// first applied nothing (no group to check). Leaves the default's build to the
    /// caller (its progress is the last step).
    pub(crate) fn candidate_builds(
        &self,
        bests: &[ApplyHistoryBest],
        progress: PhaseProgress<'_>,
        build: CandidateBuild<'_>,
    ) -> Result<Option<Vec<tessera_graph::GraphModule>>, DriverError> {
        let steps = bests.len() + 1;
        progress(BUILDING, 0, steps);
        let mut tuned = Vec::with_capacity(bests.len());
        for (j, best) in bests.iter().enumerate() {
            let (built, applied) = build(best)?;
            if j == 0 && applied == 0 {
                progress(BUILDING, steps, steps);
                return Ok(None);
            }
            tuned.push(self.load(built)?);
            progress(BUILDING, j + 1, steps);
        }
        Ok(Some(tuned))
    }

    /// Appends `checks` to `log` (read as `loaded` before them) and says which history
    /// bests they overruled: what builds with the log now use.
    pub(crate) fn keep_checks(
        log: &Path,
        mut loaded: tessera_search::record::LoadedLog,
        checks: Vec<NetworkCheck>,
        options: CheckOptions,
    ) -> Result<NetworkCheckOutcome, DriverError> {
        RecordWriter::open(log).and_then(|mut w| w.append_checks(&checks))?;
        loaded.checks.extend(checks.iter().cloned());
        let overruled = ApplyHistoryBest::from_log(&loaded)
            .overruled()
            .iter()
            .filter(|o| checks.contains(&o.check))
            .cloned()
            .collect();
        Ok(NetworkCheckOutcome {
            options,
            checks,
            overruled,
        })
    }

    /// Builds `plan` untuned and with the history best of `log` and times both in
    /// `rounds` alternating rounds (which side goes first alternates too); `None` where
    /// no group got a tuned schedule (the two builds are one).
    pub fn compare_untuned_and_tuned(
        &self,
        plan: &ConvPlan,
        target: &Target,
        log: &Path,
        rounds: usize,
        progress: PhaseProgress<'_>,
    ) -> Result<Option<BuildComparison>, DriverError> {
        let loaded = self.read_log(log)?;
        let tuned = self.compile_plan(plan, target, Some(&loaded))?;
        let applied = tuned.report.applied;
        if applied == 0 {
            return Ok(None);
        }
        let mut tuned = self.load(tuned.network)?;
        let mut untuned = self.load(self.compile_plan(plan, target, None)?.network)?;
        for m in [&mut untuned, &mut tuned] {
            m.set_random_inputs()?;
        }
        let c = self.compare_loaded(&mut untuned, &mut tuned, rounds, progress)?;
        Ok(Some(BuildComparison { applied, ..c }))
    }

    /// Times `untuned` and `tuned` (their inputs set) in `rounds` alternating rounds
    /// after a warm-up run each; `applied` is left 0 for the caller.
    pub(crate) fn compare_loaded(
        &self,
        untuned: &mut GraphModule,
        tuned: &mut GraphModule,
        rounds: usize,
        progress: PhaseProgress<'_>,
    ) -> Result<BuildComparison, DriverError> {
        for m in [&mut *untuned, &mut *tuned] {
            m.run()?;
        }
        // timed after the warm-up runs, which may compile kernels or move weights
        let two_runs_ms = time_once_ms(|| {
            untuned.run()?;
            tuned.run()
        })?;
        let runs = runs_within(two_runs_ms / 2.0, COMPARE_ROUND_MS, COMPARE_RUNS);
        let ev = TimeEvaluator::new(1, runs, 0.0);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut per_round = Comparison::default();
        alternate(
            rounds,
            |side| match side {
                Side::A => self.benchmark(untuned, &ev),
                Side::B => self.benchmark(tuned, &ev),
            },
            |round, x, y| {
                per_round.a.push(x.median_ms());
                per_round.b.push(y.median_ms());
                a.extend(x.results);
                b.extend(y.results);
                progress("comparing untuned and tuned", round + 1, rounds);
            },
        )?;
        let timed = |results| TimeResult { results, number: 1 };
        Ok(BuildComparison {
            applied: 0,
            rounds,
            runs,
            untuned: timed(a),
            tuned: timed(b),
            per_round,
        })
    }
}
