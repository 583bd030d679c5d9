//! Search strategies as the core sees them (TVM's `SearchPolicy` and AutoTVM's
//! `Tuner` behind one interface): a [`StrategyFactory`] creates a [`SearchPolicy`] for
//! a [`SearchTask`]; the tuning session (`tessera_search::session`) then drives every
//! task's policy round by round under the task scheduler:
//!
//! 1. [`SearchPolicy::propose`] gives up to N new candidates, each a [`ScheduleDesc`]
//!    (what a record stores) with the program it lowers to. A policy may rank what it
//!    proposes through the [`Scorer`] the core passes: the session's shared cost model,
//!    scoring lowered programs.
//! 2. The session measures them and appends them to the log.
//! 3. [`SearchPolicy::observe`] gets the measured costs (of this round, or of a log read
//!    back on resume).
//!
//! Everything a policy takes and gives is serializable, so the same trait crosses the
//! plugin boundary (`tessera-plugin` carries it as sealed JSON and a scoring callback):
//! the core never names a strategy.
//!
//! A crate of its own so that what links a plugin (`tessera-plugin`, and through it
//! every device plugin) needs only the IR, the tensor expressions and the backends'
//! hardware description: not the measurement, the record log, the cost model (XGBoost's
//! C++), the ONNX importer or the RPC stack (tonic, tokio) that `tessera-search` brings.

use serde::{Deserialize, Serialize};
use tessera_backends::HardwareParams;
use tessera_ir::PrimFunc;
use tessera_te::catalog::OpSpec;
use tessera_te::ComputeDag;

/// One tuning task as a strategy sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchTask {
    /// The fused function's (or operator's) name, for messages.
    pub name: String,
    /// What is computed.
    pub dag: ComputeDag,
    /// The key records of this task carry (the DAG's workload key).
    pub workload_key: String,
    /// The target string records carry, e.g. `cpu -num-cores=2`.
    pub target: String,
    /// The target's hardware parameters.
    pub hardware: HardwareParams,
    /// The task as one catalog operator, where it is one (what template strategies
    /// tune: they refuse a task without it).
    #[serde(default)]
    pub op: Option<OpSpec>,
}

/// Options every strategy takes; strategy-specific knobs travel as `params`
/// (name → value, e.g. the sketch search's `population`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PolicyOptions {
    /// Seeds the policy's random choices: the same seed and the same measurements give
    /// the same proposals.
    pub seed: u64,
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
}

impl PolicyOptions {
    /// The parameter `name` parsed, or `default` when it is absent.
    pub fn param<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, PolicyError> {
        match self.params.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| PolicyError::BadParam {
                name: name.to_string(),
                value: v.clone(),
            }),
        }
    }
}

/// What a policy says of itself once created.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PolicyInfo {
    /// The key its records carry (a template strategy prefixes the template's name).
    pub workload_key: String,
    /// The name records carry as their task name (the template's, or the task's).
    pub record_name: String,
    /// Whether it ranks candidates through the core's scorer: the session trains its
    /// shared cost model only when some policy does.
    pub uses_scorer: bool,
}

/// A proposed candidate: its description (what a record stores) and its program, or
/// why it does not lower.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Proposal {
    pub schedule: ScheduleDesc,
    pub program: Result<PrimFunc, PolicyError>,
}

/// A measured candidate: its cost in seconds, `None` when it failed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Observation {
    pub schedule: ScheduleDesc,
    pub cost: Option<f64>,
}

/// Scores lowered programs for a policy, higher is better (the cost model's prediction);
/// a program that cannot be scored gets `f32::NEG_INFINITY`.
pub trait Scorer {
    fn score(&mut self, programs: &[PrimFunc]) -> Vec<f32>;
}

impl<F: FnMut(&[PrimFunc]) -> Vec<f32>> Scorer for F {
    fn score(&mut self, programs: &[PrimFunc]) -> Vec<f32> {
        self(programs)
    }
}

/// Why a strategy could not do what it was asked.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Serialize, Deserialize)]
pub enum PolicyError {
    #[error("no search strategy `{name}` (known: {known})")]
    UnknownStrategy { name: String, known: String },
    #[error("strategy `{strategy}` cannot tune task `{task}`: {reason}")]
    Unsupported {
        strategy: String,
        task: String,
        reason: String,
    },
    #[error("strategy parameter `{name}`: `{value}` is not a valid value")]
    BadParam { name: String, value: String },
    #[error("a candidate the policy does not understand: {0}")]
    BadCandidate(String),
    #[error("{0}")]
    Failed(String),
}

/// The search of one task.
pub trait SearchPolicy: Send {
    /// What it says of itself (asked once, after creation).
    fn info(&self) -> PolicyInfo;
    /// Up to `n` candidates never proposed before; empty when the space is exhausted.
    /// `scorer` is `None` until the core's cost model has enough data to rank.
    fn propose(
        &mut self,
        n: usize,
        scorer: Option<&mut dyn Scorer>,
    ) -> Result<Vec<Proposal>, PolicyError>;
    /// Measured results, of its proposals or of earlier runs read from a log (the
    /// session passes each distinct candidate once). One entry per observation: an
    /// error for one the policy cannot read back (it is then ignored).
    fn observe(&mut self, measured: &[Observation]) -> Vec<Result<(), PolicyError>>;
    /// The programs of candidates (e.g. to measure the best ones again).
    fn lower(&self, candidates: &[ScheduleDesc]) -> Vec<Result<PrimFunc, PolicyError>>;
    /// The unscheduled program, with the candidates' parameters in the same order: the
    /// reference their outputs are checked against.
    fn reference(&self) -> Result<PrimFunc, PolicyError>;
}

/// A search strategy: creates a policy per task.
pub trait StrategyFactory: Send + Sync {
    /// The strategy's name (`sketch`, `xgb`, `ga`, …).
    fn name(&self) -> &str;
    fn create(
        &self,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError>;
}

/// How a candidate's schedule is described in a record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScheduleDesc {
    /// A template configuration (AutoTVM): the template's name, the index in its space
    /// and the knob values.
    Config {
        template: String,
        index: u64,
        entity: serde_json::Value,
    },
    /// A transform-step history (the auto-scheduler).
    Steps { steps: serde_json::Value },
    /// A built-in default schedule (the untuned baseline).
    Default,
}
