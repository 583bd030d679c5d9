//! `tessera-te`: tensor expressions, compute DAGs, schedules, bound inference and
//! lowering to `tessera-ir`.
//!
//! - [`tensor`]: placeholders, computes, reductions, iteration variables.
//! - [`dag`]: the compute DAG (topological order, FLOPs, workload key, TVM's print).
//! - [`schedule`]: stages and schedule primitives.
//! - [`lower`](mod@lower): bound inference and lowering into a [`tessera_ir::PrimFunc`].
//! - [`schedules`]: default CPU schedules (register-blocked matmul and conv2d, injective).
//! - [`testing`]: random valid schedules for property tests.
//! - [`ops`]: the operator library (TVM's TOPI: convolutions, pooling, dense, softmax and
//!   normalizations, elementwise and injective operators).
//! - [`runtime_shape`]: runtime extents found by building a DAG at two sizes (one
//!   kernel for every size up to the largest).
//! - [`catalog`]: the operators that make sense as one kernel, by name and `--shape`
//!   (what `tessera op` and `tessera bench` build).

pub mod catalog;
pub mod dag;
mod dag_serde;
pub mod error;
pub mod lower;
pub mod ops;
mod rfactor;
pub mod runtime_shape;
pub mod schedule;
pub mod schedules;
pub mod tensor;
pub mod testing;

pub use dag::ComputeDag;
pub use error::{LowerError, ScheduleError, TeError};
pub use lower::lower;
pub use schedule::{Annotation, Attach, Relation, Schedule, Stage};
pub use tensor::{
    compute, compute_bounded, compute_tagged, compute_with_attrs, max, min, placeholder, prod,
    reduce_axis, reduce_axis_bounded, sum, Block, ComputeBody, IterKind, IterVar, OpKind, Reduce,
    ReduceOp, Tensor,
};
