//! `tessera-backends`: the `Backend` trait and the built-in CPU backend.
//!
//! - [`backend`]: the `Backend` trait (codegen, build, hardware parameters) and its errors.
//! - [`cfamily`]: the C-family printer and its dialects (C, OpenCL C), the device passes.
//! - [`cpu`]: the CPU's C and its compilation with the system C compiler.
//! - [`process`]: running a compiler as a child process with a timeout.
//!
//! `Target`, `HardwareParams` and `Artifact` live below, in `tessera-target` (the
//! runtime shares them without linking the compiler); they are re-exported here.

pub mod backend;
pub mod cfamily;
pub mod cpu;
pub mod process;

pub use backend::{builtin_backend, Backend, BackendError};
pub use cpu::CpuBackend;
pub use tessera_target::hardware::host_cpu_features;
pub use tessera_target::{
    Artifact, HardwareParams, LaunchDims, ParamSpec, Target, TargetError, TargetKind,
};
