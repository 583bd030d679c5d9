//! `tessera-target`: what the compiler and the runtime both speak of, and nothing else.
//!
//! - [`target`]: [`Target`], parsed from `cpu -mcpu=native -num-cores=2`,
//!   `cuda -arch=sm_90`, or any kind a plugin provides (`testdev -lanes=8`): the set of
//!   kinds is open, a plugin's kind is a `TargetKind` like `cpu`.
//! - [`hardware`]: [`HardwareParams`], detected for the host CPU and overridable.
//! - [`artifact`]: [`Artifact`], what a backend's build produces and a device loads, and
//!   [`LaunchDims`], how a GPU kernel is launched.
//!
//! It sits below `tessera-backends` (the compiler) and `tessera-runtime` (devices), so
//! that a runtime, a device plugin or a device server links no compiler code.

pub mod artifact;
pub mod hardware;
pub mod target;

pub use artifact::{Artifact, LaunchDims, ParamSpec};
pub use hardware::HardwareParams;
pub use target::{Target, TargetError, TargetKind};
