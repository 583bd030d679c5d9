//! From a record to a schedule: the one seam. Each kind of record has one
//! [`RecordApplier`], the only code that turns such a record into a schedule: step
//! histories ([`StepHistories`], here, beside the state they replay) and template
//! configurations (the template plugin's, offered through its pipeline extension). A
//! network's build asks them for each fused group ([`Subject::Group`]), `tessera op
//! --log` and the peer benchmark for one catalog operator ([`Subject::Operator`]), both
//! through [`Appliers`], which holds the log's history best for the build and counts
//! what applied and what did not. So a record gives the same schedule wherever its
//! workload occurs.

use crate::extension::RecordKind;
use crate::record::{ApplyHistoryBest, Record};
use crate::state::{State, StateError};
use crate::ScheduleDesc;
use std::sync::Mutex;
use tessera_graph::{BuildContext, Graph, GroupCompute, ScheduleHook};
use tessera_te::catalog::OpSpec;
use tessera_te::{ComputeDag, Schedule, Tensor};

/// What a record is applied to.
#[derive(Clone, Copy)]
pub enum Subject<'a> {
    /// A fused group of a network being built: the function's arguments are the group's.
    Group {
        graph: &'a Graph,
        group: &'a GroupCompute,
        ctx: &'a BuildContext,
    },
    /// One catalog operator: the function's arguments are what the applier's schedule
    /// computes from (the replayed DAG's, the template's).
    Operator {
        spec: &'a OpSpec,
        ctx: &'a BuildContext,
    },
}

impl Subject<'_> {
    /// The compute DAG whose workload key finds its records.
    pub fn dag(&self) -> Result<ComputeDag, ApplyError> {
        match self {
            Subject::Group { group, .. } => group
                .dag()
                .map_err(|e| ApplyError::new("the group's compute DAG", e)),
            Subject::Operator { spec, .. } => spec
                .dag()
                .map_err(|e| ApplyError::new("the operator's compute DAG", e)),
        }
    }
}

/// A record (or a record kind's fallback) that did not give a schedule: which, and why.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct ApplyError {
    pub what: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl ApplyError {
    pub fn new(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ApplyError {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// A schedule an applier built.
pub struct Scheduled {
    pub schedule: Schedule,
    /// The arguments of the function it lowers to (a group's own, for a group).
    pub args: Vec<Tensor>,
    /// The record it came from; `None` for a record kind's fallback (a template's
    /// fallback configuration, which VTA's convolutions take untuned).
    pub record: Option<Record>,
}

/// The log's history best for one build, as the appliers see it: its queries, and the
/// warnings they leave (each missing task warned about once).
pub struct History {
    best: Mutex<ApplyHistoryBest>,
    target: String,
    warnings: Mutex<Vec<String>>,
}

impl History {
    fn lock(&self) -> std::sync::MutexGuard<'_, ApplyHistoryBest> {
        self.best.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The best record of `workload_key` on this target ([`ApplyHistoryBest::query`]).
    pub fn query(&self, workload_key: &str) -> Option<Record> {
        self.lock().query(workload_key, &self.target).cloned()
    }

    /// The best template configuration of `workload_key`, default schedules aside
    /// ([`ApplyHistoryBest::query_config`]).
    pub fn query_config(&self, workload_key: &str) -> Option<Record> {
        self.lock()
            .query_config(workload_key, &self.target)
            .cloned()
    }

    /// Warns once that `task` has no record and builds with `instead`
    /// ([`ApplyHistoryBest::warn_missing_using`]).
    pub fn warn_missing(&self, workload_key: &str, task: &str, instead: &str) {
        let w = self
            .lock()
            .warn_missing_using(workload_key, &self.target, task, instead);
        if let Some(w) = w {
            self.warn(w);
        }
    }

    /// Adds a warning of the build.
    pub fn warn(&self, w: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w);
    }
}

/// One record kind's way from a record to a schedule.
pub trait RecordApplier: Send + Sync {
    fn record_kind(&self) -> RecordKind;

    /// The workload keys under which it looks for `subject`'s records (none where no
    /// record of its kind can fit the subject).
    fn workload_keys(&self, subject: &Subject<'_>) -> Vec<String>;

    /// The schedule `subject`'s record of this kind in `history` gives; `Ok(None)`: no
    /// record of this kind for it (the next applier is asked, then the default schedule).
    fn apply(
        &self,
        subject: &Subject<'_>,
        history: &History,
    ) -> Result<Option<Scheduled>, ApplyError>;
}

/// Step histories (the auto-scheduler's records, and any strategy's that writes steps):
/// the best record of the subject's workload replayed on its DAG. A record whose best is
/// another kind (the default schedule measured fastest, a configuration) gives nothing.
pub struct StepHistories;

impl RecordApplier for StepHistories {
    fn record_kind(&self) -> RecordKind {
        RecordKind::Steps
    }

    fn workload_keys(&self, subject: &Subject<'_>) -> Vec<String> {
        subject
            .dag()
            .map(|d| vec![d.workload_key()])
            .unwrap_or_default()
    }

    fn apply(
        &self,
        subject: &Subject<'_>,
        history: &History,
    ) -> Result<Option<Scheduled>, ApplyError> {
        let dag = subject.dag()?;
        let key = dag.workload_key();
        let Some(record) = history.query(&key) else {
            return Ok(None);
        };
        let ScheduleDesc::Steps { steps } = &record.schedule else {
            return Ok(None);
        };
        let replayed = State::from_json(&dag, steps)
            .and_then(|s| s.replay())
            .map_err(|e: StateError| {
                ApplyError::new(
                    format!(
                        "the best record of `{}` (workload {key}) does not replay",
                        record.task
                    ),
                    e,
                )
            })?;
        let args = match subject {
            Subject::Group { group, .. } => group.args(),
            Subject::Operator { .. } => replayed.args,
        };
        Ok(Some(Scheduled {
            schedule: replayed.schedule,
            args,
            record: Some(record),
        }))
    }
}

/// The appliers of one build, in the order they are asked (step histories first), over
/// the log's history best; the [`ScheduleHook`] a network build takes.
pub struct Appliers {
    appliers: Vec<Box<dyn RecordApplier>>,
    history: History,
    applied: Mutex<usize>,
}

impl Appliers {
    /// `appliers` asked in turn (sorted: step histories first) over `best` for `target`.
    pub fn new(
        mut appliers: Vec<Box<dyn RecordApplier>>,
        best: ApplyHistoryBest,
        target: &str,
    ) -> Self {
        appliers.sort_by_key(|a| a.record_kind() != RecordKind::Steps);
        Appliers {
            appliers,
            history: History {
                best: Mutex::new(best),
                target: target.to_string(),
                warnings: Mutex::new(Vec::new()),
            },
            applied: Mutex::new(0),
        }
    }

    /// The first schedule an applier gives `subject`; a record that does not apply is
    /// warned about and the next applier asked.
    pub fn schedule(&self, subject: &Subject<'_>) -> Option<Scheduled> {
        for a in &self.appliers {
            match a.apply(subject, &self.history) {
                Ok(Some(s)) => {
                    if s.record.is_some() {
                        *self.applied.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                    }
                    return Some(s);
                }
                Ok(None) => {}
                Err(e) => self
                    .history
                    .warn(format!("{e}: using its default schedule")),
            }
        }
        None
    }

    /// Every applier's workload keys of `subject` ([`RecordApplier::workload_keys`]).
    pub fn workload_keys(&self, subject: &Subject<'_>) -> Vec<String> {
        self.appliers
            .iter()
            .flat_map(|a| a.workload_keys(subject))
            .collect()
    }

    /// Schedules built from a record so far (a network's distinct groups, as the build
    /// asks once per group).
    pub fn applied(&self) -> usize {
        *self.applied.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What did not apply, and the tasks that had no record, each with why.
    pub fn warnings(&self) -> Vec<String> {
        self.history
            .warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ScheduleHook for Appliers {
    fn schedule(
        &self,
        graph: &Graph,
        group: &GroupCompute,
        ctx: &BuildContext,
    ) -> Option<Schedule> {
        let subject = Subject::Group { graph, group, ctx };
        Appliers::schedule(self, &subject).map(|s| s.schedule)
    }
}

impl Appliers {
    /// `subject`'s function from the first schedule an applier gives, lowered as `name`,
    /// with the record it came from (`None`: a fallback); `Ok(None)`: no applier gave one.
    pub fn program(
        &self,
        subject: &Subject<'_>,
        name: &str,
    ) -> Result<Option<(tessera_ir::PrimFunc, Option<Record>)>, ApplyError> {
        let Some(s) = self.schedule(subject) else {
            return Ok(None);
        };
        let func = tessera_te::lower(&s.schedule, &s.args, name)
            .map_err(|e| ApplyError::new("lowering the applied schedule", e))?;
        Ok(Some((func, s.record)))
    }
}
