//! Template tuning (AutoTVM) as a core search strategy: [`TemplateStrategy`] serves one
//! tuner (`xgb` and its variants, `ga`, `random`, `gridsearch`) and creates, for each
//! task that is one catalog operator a template fits, a [`TemplatePolicy`] — the
//! template's configuration space explored by that tuner behind the core's
//! [`SearchPolicy`]. Candidates are configurations (`ScheduleDesc::Config`).
//!
//! Records keep what `tessera tune --templates` has always written: the template's
//! workload key (`conv2d_nhwc.x86:[…]`) and the template's name as the task name, so
//! earlier logs resume and apply-history-best ([`crate::network::Configurations`]) finds
//! the configurations.
//!
//! The tuners rank candidates themselves (the XGB tuner with its own model), so the
//! policy never asks for the core's scorer. Measurements read back from a log before
//! the first proposal are the tuner's history (transfer learning: `load_history`);
//! later ones are its updates. A configuration proposed or read back is never proposed
//! again.

use crate::space::Config;
use crate::templates::{template_of, template_ops, TemplateTask};
use crate::tuners::{self, GaOptions, GaTuner, GridSearchTuner, RandomTuner, Tuner};
use crate::xgb::{XgbOptions, XgbTuner};
use std::collections::HashSet;
use tessera_ir::PrimFunc;
use tessera_search::policy::{
    Observation, PolicyError, PolicyInfo, PolicyOptions, Proposal, Scorer, SearchPolicy,
    SearchTask, StrategyFactory,
};
use tessera_search::ScheduleDesc;
use tessera_te::ComputeDag;

/// The tuner names the strategy serves: `xgb` with every loss and feature variant
/// (`xgb_knob`, `xgb_rank`, `xgb_rank_binary_curve`, …), then `ga`, `random`,
/// `gridsearch`. [`TemplateStrategy::new`] also takes the spellings
/// [`XgbOptions::parse`] accepts beyond these.
pub fn tuner_names() -> Vec<String> {
    let mut names = Vec::new();
    for loss in ["", "_reg", "_rank", "_rank_binary"] {
        for feature in ["", "_itervar", "_knob", "_curve"] {
            names.push(format!("xgb{loss}{feature}"));
        }
    }
    names.extend(["ga", "random", "gridsearch"].map(String::from));
    names
}

/// Whether `name` is a tuner the strategy serves.
fn is_tuner(name: &str) -> bool {
    matches!(name, "ga" | "random" | "gridsearch") || XgbOptions::parse(name).is_some()
}

/// The tuner `name` for `task`, seeded with `seed` (`None`: no such tuner).
fn make_tuner(name: &str, task: &TemplateTask, seed: u64) -> Option<Box<dyn Tuner + Send>> {
    Some(match name {
        "random" => Box::new(RandomTuner::new(seed)),
        "gridsearch" => Box::new(GridSearchTuner::new()),
        "ga" => Box::new(GaTuner::new(GaOptions::default(), seed)),
        other => Box::new(XgbTuner::new(task, XgbOptions::parse(other)?, seed)),
    })
}

/// Template tuning with one tuner, as a strategy.
#[derive(Clone, Debug)]
pub struct TemplateStrategy {
    name: String,
}

impl TemplateStrategy {
    /// The strategy of tuner `name` (see [`tuner_names`]).
    pub fn new(name: &str) -> Result<TemplateStrategy, PolicyError> {
        if !is_tuner(name) {
            return Err(PolicyError::UnknownStrategy {
                name: name.to_string(),
                known: tuner_names().join(", "),
            });
        }
        Ok(TemplateStrategy {
            name: name.to_string(),
        })
    }

    fn unsupported(&self, task: &SearchTask, reason: String) -> PolicyError {
        PolicyError::Unsupported {
            strategy: self.name.clone(),
            task: task.name.clone(),
            reason,
        }
    }

    /// The template task of `task`: its catalog operator's template, which must compute
    /// what the task's DAG computes (the same tensors: the session checks the baseline
    /// and every candidate against the policy's reference).
    fn template_task(&self, task: &SearchTask) -> Result<TemplateTask, PolicyError> {
        let spec = task.op.as_ref().ok_or_else(|| {
            self.unsupported(
                task,
                "template tuning takes one catalog operator (the task has no `op`; a \
                 network's template tasks come from `search::tasks::operator_tasks`)"
                    .into(),
            )
        })?;
        let lanes = task.hardware.f32_lanes();
        let def = template_of(spec, lanes).ok_or_else(|| {
            self.unsupported(
                task,
                format!(
                    "no template fits operator `{}` (templates: {})",
                    spec.name,
                    template_ops().join(", ")
                ),
            )
        })?;
        let t = TemplateTask::new(def, lanes).map_err(|e| self.unsupported(task, e.to_string()))?;
        let out = t.args.last().cloned().into_iter().collect::<Vec<_>>();
        let key = ComputeDag::new(&out)
            .map(|d| d.workload_key())
            .map_err(|e| self.unsupported(task, e.to_string()))?;
        let want = task.dag.workload_key();
        if key != want {
            let hint = t.def.mismatch_hint(lanes).unwrap_or_default();
            return Err(self.unsupported(
                task,
                format!(
                    "template `{}` computes {key}, the task {want}{hint}",
                    t.template
                ),
            ));
        }
        Ok(t)
    }
}

impl StrategyFactory for TemplateStrategy {
    fn name(&self) -> &str {
        &self.name
    }

    fn create(
        &self,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError> {
        let t = self.template_task(task)?;
        let tuner = make_tuner(&self.name, &t, options.seed).ok_or_else(|| {
            PolicyError::UnknownStrategy {
                name: self.name.clone(),
                known: tuner_names().join(", "),
            }
        })?;
        Ok(Box::new(TemplatePolicy::new(t, tuner)))
    }
}

/// One task's template search behind the core's interface.
pub struct TemplatePolicy {
    task: TemplateTask,
    tuner: Box<dyn Tuner + Send>,
    /// Configurations proposed or observed: never proposed again.
    seen: HashSet<u64>,
    /// Whether it has proposed yet (observations before that are the log's history).
    proposed: bool,
}

impl TemplatePolicy {
    /// The policy of `tuner` over `task` (what the strategy creates by name; a caller
    /// with a tuner of its own settings makes one directly).
    pub fn new(task: TemplateTask, tuner: Box<dyn Tuner + Send>) -> TemplatePolicy {
        TemplatePolicy {
            task,
            tuner,
            seen: HashSet::new(),
            proposed: false,
        }
    }

    /// The template task it tunes.
    pub fn task(&self) -> &TemplateTask {
        &self.task
    }

    /// The configuration a description of this template stands for (its knob values
    /// decide, as when today's logs are read back).
    fn config_of(&self, desc: &ScheduleDesc) -> Result<Config, PolicyError> {
        let ScheduleDesc::Config {
            template, entity, ..
        } = desc
        else {
            return Err(PolicyError::BadCandidate(
                "not a template configuration (ScheduleDesc::Config)".into(),
            ));
        };
        if *template != self.task.template {
            return Err(PolicyError::BadCandidate(format!(
                "a configuration of template `{template}`, not of `{}`",
                self.task.template
            )));
        }
        self.task
            .space
            .from_entity(entity)
            .map_err(|e| PolicyError::BadCandidate(e.to_string()))
    }

    /// The lowered program of `config` (named as `tessera tune --templates` names it).
    fn program(&self, config: &Config) -> Result<PrimFunc, PolicyError> {
        let name = format!("{}_{}", self.task.template.replace('.', "_"), config.index);
        self.task
            .instantiate(config, &name)
            .map_err(|e| PolicyError::Failed(e.to_string()))
    }

    /// Up to `n` configurations the tuner proposes that were never proposed or
    /// observed. A tuner that ignores history (grid search) may propose what the log
    /// already has: those are skipped, at most as many as there were seen.
    fn fresh_indices(&mut self, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        let limit = n + self.seen.len();
        let mut drawn = 0;
        while out.len() < n && drawn < limit {
            let batch = self.tuner.next_batch(&self.task.space, n - out.len());
            if batch.is_empty() {
                break;
            }
            drawn += batch.len();
            out.extend(batch.into_iter().filter(|i| self.seen.insert(*i)));
        }
        out
    }
}

impl SearchPolicy for TemplatePolicy {
    fn info(&self) -> PolicyInfo {
        PolicyInfo {
            workload_key: self.task.workload_key.clone(),
            record_name: self.task.template.clone(),
            uses_scorer: false,
        }
    }

    fn propose(
        &mut self,
        n: usize,
        _scorer: Option<&mut dyn Scorer>,
    ) -> Result<Vec<Proposal>, PolicyError> {
        self.proposed = true;
        self.fresh_indices(n)
            .into_iter()
            .map(|i| {
                let c = self.task.space.get(i).map_err(|e| {
                    PolicyError::Failed(format!("the tuner proposed configuration {i}: {e}"))
                })?;
                Ok(Proposal {
                    schedule: ScheduleDesc::Config {
                        template: self.task.template.clone(),
                        index: c.index,
                        entity: self.task.space.entity_json(&c),
                    },
                    program: self.program(&c),
                })
            })
            .collect()
    }

    fn observe(&mut self, measured: &[Observation]) -> Vec<Result<(), PolicyError>> {
        let flop = self.task.flop;
        let mut taken = Vec::new();
        let mut verdicts = Vec::with_capacity(measured.len());
        for o in measured {
            match self.config_of(&o.schedule) {
                Ok(c) => {
                    self.seen.insert(c.index);
                    taken.push(tuners::Observation {
                        index: c.index,
                        // GFLOPS; a failure 0
                        gflops: o.cost.map_or(0.0, |s| flop / s.max(1e-12) / 1e9),
                    });
                    verdicts.push(Ok(()));
                }
                Err(e) => verdicts.push(Err(e)),
            }
        }
        if !taken.is_empty() {
            if self.proposed {
                self.tuner.update(&self.task.space, &taken);
            } else {
                self.tuner.load_history(&self.task.space, &taken);
            }
        }
        verdicts
    }

    fn lower(&self, candidates: &[ScheduleDesc]) -> Vec<Result<PrimFunc, PolicyError>> {
        candidates
            .iter()
            .map(|d| {
                let c = self.config_of(d)?;
                self.program(&c)
            })
            .collect()
    }

    fn reference(&self) -> Result<PrimFunc, PolicyError> {
        self.task
            .naive("reference")
            .map_err(|e| PolicyError::Failed(e.to_string()))
    }
}
