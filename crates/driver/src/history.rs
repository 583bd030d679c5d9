//! Stage 5, schedule lookup: a log's history best applied to a build through the
//! record appliers (`tessera_search::apply`: the core's step histories first, then each
//! extension's kind, template configurations, for the groups they leave), each
//! convolution's algorithm picked by the log's measurements of its options, and what
//! the build applied reported. Single operators (`tessera op --log`) take the same
//! appliers ([`Toolchain::appliers`]).

use crate::extension::RecordKind;
use crate::pipeline::{Build, Toolchain};
use crate::{DriverError, NetworkSpec};
use std::collections::HashSet;
use tessera_backends::Target;
use tessera_graph::{ConvAlgorithm, ConvPlan, Graph};
use tessera_search::apply::{Appliers, RecordApplier, StepHistories};
use tessera_search::record::{ApplyHistoryBest, LoadedLog, Record};
use tessera_search::ScheduleDesc;

/// What a build applied.
#[derive(Clone, Debug, Default)]
pub struct BuildReport {
    /// Whether a log was given.
    pub with_log: bool,
    /// Distinct fused groups built with a tuned schedule.
    pub applied: usize,
    /// The algorithm of each convolution with a choice, and whether the log's
    /// measurements chose it (empty without a log).
    pub algorithms: Vec<(ConvAlgorithm, bool)>,
    /// Tuned groups the log's in-network check kept on their default schedule.
    pub overruled: usize,
    /// The hooks' warnings: tasks without a record, records that did not apply.
    pub warnings: Vec<String>,
    /// Why nothing of the log applied, when nothing did.
    pub nothing_applied: Option<String>,
}

/// Whether `records` hold template configurations (which apply to HWIO convolutions
/// only: [`Toolchain::plan_for_templates`]).
pub fn holds_configurations(records: &[Record]) -> bool {
    records
        .iter()
        .any(|r| matches!(r.schedule, ScheduleDesc::Config { .. }))
}

impl Toolchain {
    /// The record appliers of a build on `target` over `best`: step histories, then —
    /// where the log holds configurations (`configurations`) or the target needs them —
    /// every extension's applier of configurations.
    pub fn appliers(
        &self,
        best: &ApplyHistoryBest,
        target: &Target,
        configurations: bool,
    ) -> Result<Appliers, DriverError> {
        let hw = self.hardware(target)?;
        let configurations = configurations || self.needs(target).configurations_always;
        let mut appliers: Vec<Box<dyn RecordApplier>> = vec![Box::new(StepHistories)];
        appliers.extend(
            self.extensions()
                .iter()
                .filter_map(|e| e.record_applier(target, &hw))
                .filter(|a| a.record_kind() == RecordKind::Steps || configurations),
        );
        Ok(Appliers::new(appliers, best.clone(), &target.to_string()))
    }

    /// Compiles `g` with `best` through the record appliers; returns the network, the
    /// groups built from a record and the appliers' warnings.
    pub fn compile_with_best(
        &self,
        g: &Graph,
        target: &Target,
        best: &ApplyHistoryBest,
        configurations: bool,
    ) -> Result<(tessera_graph::CompiledNetwork, usize, Vec<String>), DriverError> {
        let appliers = self.appliers(best, target, configurations)?;
        let compiled = self.compile_graph(g, target, Some(&appliers))?;
        Ok((compiled, appliers.applied(), appliers.warnings()))
    }

    /// Stages 5–7 for a plan: with `log`, each convolution's algorithm picked by the
    /// log's measurements and every group's history best applied; without one, the
    /// rule's algorithms and default schedules (but the configuration hooks still asked
    /// where the target needs them: VTA's packed convolutions then take TVM's fallback
    /// configuration, on VTA).
    pub fn compile_plan(
        &self,
        plan: &ConvPlan,
        target: &Target,
        log: Option<&LoadedLog>,
    ) -> Result<Build, DriverError> {
        match log {
            Some(log) => self.compile_with_log(plan, target, log, true),
            None if self.needs(target).configurations_always => {
                let mut b = self.compile_with_log(plan, target, &LoadedLog::default(), false)?;
                b.report.with_log = false;
                Ok(b)
            }
            None => Ok(Build {
                network: self.compile_graph(plan.rule_graph(), target, None)?,
                report: BuildReport::default(),
            }),
        }
    }

    /// [`Toolchain::compile_plan`] with `log`; `explain`: say why nothing of it applied,
    /// when nothing did.
    fn compile_with_log(
        &self,
        plan: &ConvPlan,
        target: &Target,
        log: &LoadedLog,
        explain: bool,
    ) -> Result<Build, DriverError> {
        let best = ApplyHistoryBest::from_log(log);
        let target_str = target.to_string();
        let (graph, algorithms) = tessera_search::tasks::pick_algorithms(plan, &best, &target_str)?;
        let configurations = holds_configurations(&log.records);
        let (network, applied, warnings) =
            self.compile_with_best(&graph, target, &best, configurations)?;
        let nothing_applied = if explain && applied == 0 {
            let mut keys = self.task_keys(plan, target)?;
            keys.extend(self.template_task_keys(plan.base(), target)?);
            Some(
                tessera_search::record::why_nothing_applies(&log.records, &keys, &target_str)
                    .unwrap_or_else(|| {
                        "its records for this network's tasks all failed or were overruled by \
                         the in-network check"
                            .into()
                    }),
            )
        } else {
            None
        };
        Ok(Build {
            network,
            report: BuildReport {
                with_log: true,
                applied,
                algorithms,
                overruled: best.overruled().len(),
                warnings,
                nothing_applied,
            },
        })
    }

    /// The workload keys of `plan`'s auto-scheduler tasks.
    fn task_keys(&self, plan: &ConvPlan, target: &Target) -> Result<Vec<String>, DriverError> {
        let (tasks, _) = plan.tasks(target)?;
        Ok(tasks.into_iter().map(|t| t.workload_key).collect())
    }

    /// The workload keys of `g`'s template tasks (every extension's).
    fn template_task_keys(&self, g: &Graph, target: &Target) -> Result<Vec<String>, DriverError> {
        Ok(self
            .template_tasks(g, target)?
            .into_iter()
            .map(|t| t.workload_key)
            .collect())
    }

    /// Stages 1–4 for a build with `log`: the template plan (every convolution direct,
    /// weights HWIO, which configurations need) where the log's configurations fit the
    /// network better than its step histories, else [`Toolchain::plan`] (weights packed,
    /// Winograd where it pays). A log holding both kinds takes the plan under which more
    /// of its tasks have a record, so that appending template records to an
    /// auto-scheduler log does not throw its step histories (and Winograd) away; the
    /// network is imported once either way.
    pub fn plan_for_log(
        &self,
        spec: &NetworkSpec,
        log: Option<&LoadedLog>,
    ) -> Result<ConvPlan, DriverError> {
        let Some(log) = log else {
            return self.plan(spec);
        };
        let keys_where = |kind: fn(&ScheduleDesc) -> bool| -> HashSet<&str> {
            log.records
                .iter()
                .filter(|r| kind(&r.schedule))
                .map(|r| r.workload_key.as_str())
                .collect()
        };
        let configs = keys_where(|s| matches!(s, ScheduleDesc::Config { .. }));
        if configs.is_empty() {
            return self.plan(spec);
        }
        let steps = keys_where(|s| matches!(s, ScheduleDesc::Steps { .. }));
        if steps.is_empty() {
            return self.plan_for_templates(spec);
        }
        let plan = self.plan(spec)?;
        let hits = |keys: &[String], have: &HashSet<&str>| {
            keys.iter().filter(|k| have.contains(k.as_str())).count()
        };
        let by_steps = hits(&self.task_keys(&plan, &spec.target)?, &steps);
        let by_configs = hits(
            &self.template_task_keys(plan.base(), &spec.target)?,
            &configs,
        );
        if by_steps > 0 && by_configs > 0 {
            self.warn(&format!(
                "the log holds step histories for {by_steps} tasks and template \
                 configurations for {by_configs}; a build takes one plan, and takes the {}",
                if by_configs > by_steps {
                    "templates' (direct convolutions, HWIO weights)"
                } else {
                    "auto-scheduler's (packed weights, Winograd where it pays)"
                }
            ));
        }
        // the template plan is the same optimized network, taken as it is
        Ok(if by_configs > by_steps {
            ConvPlan::fixed(plan.base().clone())
        } else {
            plan
        })
    }

    /// The template tasks of `g` for `target`, from every extension that has templates.
    pub fn template_tasks(
        &self,
        g: &Graph,
        target: &Target,
    ) -> Result<Vec<crate::TemplateTaskInfo>, DriverError> {
        let hw = self.hardware(target)?;
        Ok(self
            .extensions()
            .iter()
            .filter_map(|e| e.template_tasks(g, target, &hw))
            .flatten()
            .collect())
    }

    /// Reads a record log, its skipped lines sent as warnings
    /// ([`Toolchain::warn_skipped`]): every command that reads a log reads it through
    /// here.
    pub fn read_log(&self, path: &std::path::Path) -> Result<LoadedLog, DriverError> {
        let log = tessera_search::record::load(path)?;
        self.warn_skipped(path, &log.skipped);
        Ok(log)
    }

    /// Sends the skipped lines of the log at `path` as warnings: at most ten, then a
    /// count.
    pub fn warn_skipped(&self, path: &std::path::Path, skipped: &[(usize, String)]) {
        const SHOWN: usize = 10;
        let shown = &skipped[..skipped.len().min(SHOWN)];
        for w in tessera_search::record::skipped_warnings(path, shown) {
            self.warn(&w);
        }
        if skipped.len() > SHOWN {
            self.warn(&format!(
                "{}: {} more lines skipped",
                path.display(),
                skipped.len() - SHOWN
            ));
        }
    }
}
