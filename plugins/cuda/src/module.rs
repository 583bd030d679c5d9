//! The file a `cuda` artifact is: the kernels' CUDA C source, the PTX NVRTC made of it
//! and the architecture it was made for, and what the device needs to run them (each
//! kernel's arguments and launch sizes, the workspaces), as JSON with a format tag. The
//! driver assembles the PTX for the GPU when the device loads the module.

use crate::error::CudaError;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tessera_backends::cfamily::{DeviceSource, KernelLaunch, Workspace};

/// The format tag of the file.
pub const FORMAT: &str = "tessera-cuda/1";

/// A loadable CUDA module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaModule {
    pub format: String,
    /// The real architecture the PTX targets, `sm_80`.
    pub arch: String,
    pub source: String,
    pub ptx: String,
    pub kernels: Vec<KernelLaunch>,
    pub workspaces: Vec<Workspace>,
}

impl CudaModule {
    pub fn new(src: DeviceSource, arch: String, ptx: String) -> CudaModule {
        CudaModule {
            format: FORMAT.into(),
            arch,
            source: src.source,
            ptx,
            kernels: src.kernels,
            workspaces: src.workspaces,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a module serializes")
    }

    /// Reads a module file, refusing another format.
    pub fn read(path: &Path) -> Result<CudaModule, CudaError> {
        let err = |reason: String| CudaError::Module {
            path: path.display().to_string(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        let m: CudaModule =
            serde_json::from_slice(&bytes).map_err(|e| err(format!("not a CUDA module: {e}")))?;
        if m.format != FORMAT {
            return Err(err(format!(
                "module format `{}`, this device loads `{FORMAT}`",
                m.format
            )));
        }
        Ok(m)
    }
}
