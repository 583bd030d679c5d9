//! `tessera-backends`: targets, hardware parameters, the `Backend` trait and the built-in
//! CPU backend.
//!
//! - [`target`]: `Target` parsed from `cpu -mcpu=native -num-cores=2`, `cuda -arch=sm_90`, …
//! - [`hardware`]: `HardwareParams`, detected for the host CPU and overridable.
//! - [`backend`]: the `Backend` trait (codegen, build, device) and its errors.
//! - [`artifact`]: what a build produces and the runtime loads.
//! - [`cpu`]: C code generation and compilation with the system C compiler.

pub mod artifact;
pub mod backend;
pub mod cpu;
pub mod hardware;
pub mod process;
pub mod target;

pub use artifact::{Artifact, DeviceKind, ParamSpec};
pub use backend::{builtin_backend, Backend, BackendError};
pub use cpu::CpuBackend;
pub use hardware::HardwareParams;
pub use target::{Target, TargetError, TargetKind};
