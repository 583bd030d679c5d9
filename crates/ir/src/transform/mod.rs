//! Passes that rewrite functions on their way to code generation, one pass per file.

mod vectorize;

pub use vectorize::{vectorize_loops, NotVectorized};
