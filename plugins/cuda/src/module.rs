//! The file a `cuda` artifact is: the kernels' CUDA C source, the PTX NVRTC made of it
//! and the architecture it was made for, the GPU code when the GPU was at hand, and
//! what the device needs to run them (each kernel's arguments and launch sizes, the
//! workspaces), as JSON with a format tag. The device loads the GPU code, else has the
//! driver assemble the PTX.

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
    /// The GPU code (CUBIN) for `arch`, base64, when it was built with the GPU at hand:
    /// loading it skips the driver's PTX assembly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin: Option<String>,
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
            cubin: None,
            kernels: src.kernels,
            workspaces: src.workspaces,
        }
    }

    /// The same module with the GPU code `cubin` (when there is one).
    pub fn with_cubin(mut self, cubin: Option<Vec<u8>>) -> CudaModule {
        use base64::Engine;
        self.cubin = cubin.map(|c| base64::engine::general_purpose::STANDARD.encode(c));
        self
    }

    /// The GPU code's bytes, when the module has it.
    pub fn cubin(&self) -> Option<Result<Vec<u8>, base64::DecodeError>> {
        use base64::Engine;
        self.cubin
            .as_ref()
            .map(|c| base64::engine::general_purpose::STANDARD.decode(c))
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
