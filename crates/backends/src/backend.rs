//! The `Backend` trait every device implements (the CPU here, plugins for the others).

use std::path::{Path, PathBuf};
use tessera_ir::PrimFunc;
use tessera_target::{Artifact, HardwareParams, Target, TargetKind};

/// Why a backend could not generate or build code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    #[error("{backend}: cannot generate code for `{func}`: {reason}")]
    Unsupported {
        backend: String,
        func: String,
        reason: String,
    },
    /// A pass left `func` malformed (checked in debug builds): a compiler bug.
    #[error("`{func}` after {pass} is malformed: {problem}")]
    Verify {
        func: String,
        pass: &'static str,
        problem: tessera_ir::verify::VerifyError,
    },
    #[error("no C compiler found: set $CC or install cc, gcc or clang (tried: {tried})")]
    CompilerNotFound { tried: String },
    #[error("C compiler `{compiler}` failed on {}:\n{message}", source_path.display())]
    CompileFailed {
        compiler: String,
        source_path: PathBuf,
        message: String,
    },
    #[error("C compiler `{compiler}` did not finish {} within {seconds} s", source_path.display())]
    CompileTimeout {
        compiler: String,
        source_path: PathBuf,
        seconds: f64,
    },
    #[error("{backend}: building `{func}` failed: {message}")]
    PluginBuild {
        backend: String,
        func: String,
        message: String,
    },
    #[error("I/O error at {}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("no backend for target `{target}`: {reason}")]
    NoBackend { target: String, reason: String },
    #[error("target `{target}` compiles for `-march={mcpu}`, which uses {} that this CPU lacks (it has: {}): its kernels would die with an illegal instruction here; compile with `-mcpu=native` (the default) or run on a CPU that has them", missing.join(", "), if host.is_empty() { "none of the tracked extensions".to_string() } else { host.join(", ") })]
    HostLacksFeatures {
        target: String,
        mcpu: String,
        missing: Vec<String>,
        host: Vec<String>,
    },
    #[error("C compiler `{compiler}` does not know `-march={mcpu}`: {message}")]
    UnknownMcpu {
        compiler: String,
        mcpu: String,
        message: String,
    },
}

/// A code generator and builder for one kind of device.
pub trait Backend: Send + Sync {
    /// The target this backend compiles for.
    fn target(&self) -> &Target;
    /// The kind of device the artifacts run on.
    fn device(&self) -> TargetKind {
        self.target().kind.clone()
    }
    /// The hardware parameters of that device.
    fn hardware_params(&self) -> &HardwareParams;
    /// The source code of `func` for this device.
    fn codegen(&self, func: &PrimFunc) -> Result<String, BackendError>;
    /// Generates and compiles `func` into a loadable artifact inside `out_dir`.
    fn build(&self, func: &PrimFunc, out_dir: &Path) -> Result<Artifact, BackendError>;
    /// Stops a build that takes longer than `timeout` (a `CompileTimeout` error), where
    /// the backend can; measurement also stops waiting for one that cannot.
    fn set_build_timeout(&mut self, timeout: std::time::Duration) {
        let _ = timeout;
    }
}

/// The built-in backend for `target` (the CPU); other kinds come from plugins.
pub fn builtin_backend(target: &Target) -> Result<Box<dyn Backend>, BackendError> {
    if target.kind.is_cpu() {
        return Ok(Box::new(crate::cpu::CpuBackend::new(target.clone())));
    }
    Err(BackendError::NoBackend {
        target: target.to_string(),
        reason: format!(
            "no backend plugin for `{}` is loaded (put one in `plugins/` beside the binary \
             or in a directory of TESSERA_PLUGIN_PATH)",
            target.kind
        ),
    })
}
