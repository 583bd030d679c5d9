//! The CUDA plugin's errors. The plugin ABI carries them as text (`to_string`), so each
//! message names what failed and, for a missing library, what to install.

use thiserror::Error;

/// What to install for NVRTC.
pub const NVRTC_HINT: &str = "install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc-cu12`, \
    or set TESSERA_NVRTC to the path of a libnvrtc.so.N";

/// What to install for the driver.
pub const DRIVER_HINT: &str = "install the NVIDIA driver (libcuda.so.1); building kernels \
    needs only NVRTC, running them needs the driver and a GPU";

/// An error of the CUDA plugin.
#[derive(Clone, Debug, Error)]
pub enum CudaError {
    /// NVRTC could not be loaded.
    #[error("NVRTC (libnvrtc.so.N) not found (looked in: {searched}); {NVRTC_HINT}")]
    NvrtcMissing { searched: String },
    /// NVRTC refused a kernel source.
    #[error("NVRTC could not compile `{entry}` for {arch} (its log follows):\n{log}")]
    Compile {
        entry: String,
        arch: String,
        log: String,
    },
    /// No CUDA driver library.
    #[error("no CUDA driver: libcuda.so.1 could not be loaded; {DRIVER_HINT}")]
    NoDriver,
    /// A driver but no usable device.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A driver call that failed.
    #[error("CUDA: {what}: {error}")]
    Driver { what: String, error: String },
    /// A target string or option this plugin does not take.
    #[error("target `{target}`: {reason}")]
    Target { target: String, reason: String },
    /// A module file that cannot be read or is not a CUDA module.
    #[error("{path}: {reason}")]
    Module { path: String, reason: String },
    /// No `ptxas` binary.
    #[error(
        "ptxas not found (looked in: {searched}); install the CUDA toolkit or \
             `pip install nvidia-cuda-nvcc-cu12`, or set TESSERA_PTXAS"
    )]
    PtxasMissing { searched: String },
    /// `ptxas` could not be run, or refused the PTX.
    #[error("ptxas: {0}")]
    Ptxas(String),
}

impl CudaError {
    pub(crate) fn driver(what: impl Into<String>, error: impl std::fmt::Display) -> CudaError {
        CudaError::Driver {
            what: what.into(),
            error: error.to_string(),
        }
    }
}
