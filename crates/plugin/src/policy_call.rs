//! One search-policy call as data. What the core asks of a strategy plugin's policy
//! crosses the boundary as one sealed [`PolicyCall`] through the root module's one
//! `policy_call` entry point, answered by one sealed [`PolicyAnswer`], as a device's
//! calls cross as the runtime's `DeviceCall`s: adding a call is a variant here, not a
//! new entry point and layout.

use serde::{Deserialize, Serialize};
use tessera_ir::PrimFunc;
use tessera_policy::{
    Observation, PolicyError, PolicyInfo, PolicyOptions, Proposal, ScheduleDesc, SearchTask,
};

/// A call of the `SearchPolicy` interface (or the factory's `create`) on a policy
/// handle.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PolicyCall {
    /// A policy of strategy `strategy` for `task` (on no handle): [`PolicyAnswer::Created`].
    Create {
        strategy: String,
        task: Box<SearchTask>,
        options: PolicyOptions,
    },
    /// [`PolicyAnswer::Info`].
    Info,
    /// Up to `n` proposals, ranked through the core's scorer when `with_scorer`:
    /// [`PolicyAnswer::Proposals`].
    Propose { n: u64, with_scorer: bool },
    /// [`PolicyAnswer::Observed`].
    Observe { measured: Vec<Observation> },
    /// [`PolicyAnswer::Lowered`].
    Lower { candidates: Vec<ScheduleDesc> },
    /// The unscheduled function: [`PolicyAnswer::Reference`].
    Reference,
    /// The handle's end: [`PolicyAnswer::Dropped`].
    Drop,
}

impl PolicyCall {
    /// The call's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyCall::Create { .. } => "create",
            PolicyCall::Info => "info",
            PolicyCall::Propose { .. } => "propose",
            PolicyCall::Observe { .. } => "observe",
            PolicyCall::Lower { .. } => "lower",
            PolicyCall::Reference => "reference",
            PolicyCall::Drop => "drop",
        }
    }
}

/// What a [`PolicyCall`] gives back.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PolicyAnswer {
    /// The new policy's handle.
    Created(u64),
    Info(PolicyInfo),
    Proposals(Vec<Proposal>),
    Observed(Vec<Result<(), PolicyError>>),
    Lowered(Vec<Result<PrimFunc, PolicyError>>),
    Reference(PrimFunc),
    Dropped,
}

impl PolicyAnswer {
    /// The answer's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyAnswer::Created(_) => "created",
            PolicyAnswer::Info(_) => "info",
            PolicyAnswer::Proposals(_) => "proposals",
            PolicyAnswer::Observed(_) => "observed",
            PolicyAnswer::Lowered(_) => "lowered",
            PolicyAnswer::Reference(_) => "reference",
            PolicyAnswer::Dropped => "dropped",
        }
    }
}
