//! Passes that rewrite functions on their way to code generation, one pass per file.
//!
//! For the CPU: `auto_unroll`, `split_wide_vectors` (register-wide vectors),
//! `unroll_loops`, `unswitch_guards`, `vectorize_loops`, `lower_floor_div`,
//! `hoist_size_arith` (a range kernel's index arithmetic over its runtime sizes, bound
//! once per iteration of the loop it depends on). For a GPU, before
//! those: `split_host_device` (the kernels and their launch extents), then per kernel
//! `storage_sync` (barriers for shared memory). `thread_allreduce` builds the tree of a
//! reduction across the threads of a block, which lowering emits.
//!
//! Each pass's before/after behaviour is pinned by filetests in
//! `tests/filetests/passes/` (`tests/pass_filetests.rs`; `TESSERA_BLESS=1` rewrites them).

mod auto_unroll;
mod code_size;
mod error;
mod floor_div;
mod hoist_sizes;
mod split_host_device;
mod split_vectors;
mod storage_sync;
mod thread_allreduce;
mod unroll;
mod unswitch;
mod vectorize;

pub use auto_unroll::{auto_unroll, AUTO_MAX_DEPTH, AUTO_UNROLL_PRAGMA};
pub use code_size::expanded_size;
pub use error::TransformError;
pub use floor_div::lower_floor_div;
pub use hoist_sizes::hoist_size_arith;
pub use split_host_device::{split_host_device, DeviceKernel, SplitFunc, ThreadExtents};
pub use split_vectors::split_wide_vectors;
pub use storage_sync::storage_sync;
pub use thread_allreduce::{thread_allreduce, AllreduceInfo, ALLREDUCE_ATTR};
pub use unroll::{unroll_loops, MAX_UNROLL};
pub use unswitch::{unswitch_guards, MAX_BODY_NODES};
pub use vectorize::{vectorize_loops, NotVectorized};
