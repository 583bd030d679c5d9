//! Passes that rewrite functions on their way to code generation, one pass per file.

mod unroll;
mod vectorize;

pub use unroll::{unroll_loops, MAX_UNROLL};
pub use vectorize::{vectorize_loops, NotVectorized};
