//! Typed errors of tensor-expression construction, scheduling and lowering.

use thiserror::Error;

/// An invalid tensor expression.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TeError {
    #[error("operator `{op}`: invalid shape {shape:?}: {reason}")]
    BadShape {
        op: String,
        shape: Vec<i64>,
        reason: String,
    },
    #[error("operator `{op}`: invalid reduction: {reason}")]
    BadReduce { op: String, reason: String },
    #[error("operator `{op}` reads buffer `{buffer}`, which belongs to no live tensor")]
    UnknownTensor { op: String, buffer: String },
    #[error("operator `{op}`: invalid attribute `{attr}`: {reason}")]
    BadAttr {
        op: String,
        attr: String,
        reason: String,
    },
    #[error("compute DAG: {0}")]
    Dag(String),
}

/// An invalid schedule request. Each names the stage and, where there is one, the axis.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ScheduleError {
    #[error("tensor `{0}` has no stage in this schedule")]
    UnknownStage(String),
    #[error("stage `{stage}`: axis `{axis}` is not a leaf axis of this stage")]
    NotLeaf { stage: String, axis: String },
    #[error("stage `{stage}`: cannot split axis `{axis}` by {value}: the factor or number of parts must be positive")]
    BadSplit {
        stage: String,
        axis: String,
        value: i64,
    },
    #[error("stage `{stage}`: cannot fuse `{outer}` and `{inner}`: {reason}")]
    BadFuse {
        stage: String,
        outer: String,
        inner: String,
        reason: String,
    },
    #[error("stage `{stage}`: invalid reorder: {reason}")]
    BadReorder { stage: String, reason: String },
    #[error("stage `{stage}`: cannot {what} the reduction axis `{axis}`")]
    ReduceAxis {
        stage: String,
        axis: String,
        what: String,
    },
    #[error("stage `{stage}`: thread axis {thread} is already bound to `{bound}`, cannot bind it to `{axis}` too")]
    ThreadBoundTwice {
        stage: String,
        axis: String,
        thread: String,
        bound: String,
    },
    #[error("stage `{stage}`: cannot compute at stage `{target}`: {reason}")]
    BadComputeAt {
        stage: String,
        target: String,
        reason: String,
    },
    #[error("stage `{stage}`: cannot inline: {reason}")]
    BadInline { stage: String, reason: String },
    #[error("stage `{stage}`: cannot {what}: {reason}")]
    BadCache {
        stage: String,
        what: String,
        reason: String,
    },
    #[error("stage `{stage}`: cannot rfactor on axis `{axis}`: {reason}")]
    BadRfactor {
        stage: String,
        axis: String,
        reason: String,
    },
    #[error("stage `{stage}`: {reason}")]
    Invalid { stage: String, reason: String },
    #[error(transparent)]
    Te(#[from] TeError),
}

/// A schedule that cannot be lowered.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LowerError {
    #[error("tensor `{0}` is read or produced but is not among the function arguments")]
    MissingArg(String),
    #[error("argument `{0}` is neither an input (placeholder) nor an output of the schedule")]
    BadArg(String),
    #[error("stage `{stage}` is computed at `{target}`, but {reason}")]
    BadAttach {
        stage: String,
        target: String,
        reason: String,
    },
    #[error("stage `{stage}`: {reason}")]
    Invalid { stage: String, reason: String },
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}
