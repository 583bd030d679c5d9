//! [`OpenClError`]: why the OpenCL plugin could not find a device, open it, read a
//! module file or take a target's options.

use std::path::PathBuf;

/// What went wrong in the OpenCL plugin outside a device call (those are the runtime's
/// `DeviceError`s).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenClError {
    /// No OpenCL runtime, platform or device on this machine; `hint` says what to
    /// install.
    #[error("{reason}; {hint}")]
    NoDevice { reason: String, hint: &'static str },
    /// The target's `-platform` / `-device-index` name no device here; the message
    /// lists the platforms and devices there are.
    #[error("{0}")]
    NoSuchDevice(String),
    /// The driver refused a step of opening the device.
    #[error("{device}: cannot {action}: {reason}")]
    Driver {
        device: String,
        action: &'static str,
        reason: String,
    },
    /// A module file that cannot be read, or is not an OpenCL module.
    #[error("{}: {reason}", path.display())]
    ModuleFile { path: PathBuf, reason: String },
    /// A module of another format.
    #[error("{}: module format `{found}`, this device loads `{expected}`", path.display())]
    ModuleFormat {
        path: PathBuf,
        found: String,
        expected: &'static str,
    },
    /// A target option the plugin refuses.
    #[error("{target}: {reason}")]
    Target { target: String, reason: String },
    /// The OpenCL C of a function could not be generated.
    #[error("{0}")]
    Codegen(String),
}
