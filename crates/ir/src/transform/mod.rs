//! Passes that rewrite functions on their way to code generation, one pass per file.

mod auto_unroll;
mod code_size;
mod unroll;
mod vectorize;

pub use auto_unroll::{auto_unroll, AUTO_MAX_DEPTH, AUTO_UNROLL_PRAGMA};
pub use code_size::expanded_size;
pub use unroll::{unroll_loops, MAX_UNROLL};
pub use vectorize::{vectorize_loops, NotVectorized};
