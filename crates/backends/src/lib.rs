//! `tessera-backends`: the `Backend` trait and the built-in CPU backend.
//!
//! - [`backend`]: the `Backend` trait (codegen, build, hardware parameters) and its errors.
//! - [`cpu`]: C code generation and compilation with the system C compiler.
//! - [`process`]: running a compiler as a child process with a timeout.
//!
//! `Target`, `HardwareParams` and `Artifact` live below, in `tessera-target` (the
//! runtime shares them without linking the compiler); they are re-exported here.

pub mod backend;
pub mod cpu;
pub mod process;

pub use backend::{builtin_backend, Backend, BackendError};
pub use cpu::CpuBackend;
pub use tessera_target::{
    Artifact, HardwareParams, LaunchDims, ParamSpec, Target, TargetError, TargetKind,
};
