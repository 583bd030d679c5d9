//! The file an `opencl` artifact is: the kernels' OpenCL C source and what the device
//! needs to run them (each kernel's arguments and launch sizes, the workspaces), as
//! JSON with a format tag — TVM keeps the same facts beside the source
//! (`*.tvm_meta.json`). The device builds the source when it loads the module.

use crate::error::OpenClError;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tessera_backends::cfamily::{DeviceSource, KernelLaunch, Workspace};

/// The format tag of the file.
pub const FORMAT: &str = "tessera-opencl/1";

/// A loadable OpenCL module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceModule {
    pub format: String,
    pub source: String,
    pub kernels: Vec<KernelLaunch>,
    pub workspaces: Vec<Workspace>,
}

impl DeviceModule {
    pub fn new(src: DeviceSource) -> DeviceModule {
        DeviceModule {
            format: FORMAT.into(),
            source: src.source,
            kernels: src.kernels,
            workspaces: src.workspaces,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a module serializes")
    }

    /// Reads a module file, refusing another format.
    pub fn read(path: &Path) -> Result<DeviceModule, OpenClError> {
        let file = |reason: String| OpenClError::ModuleFile {
            path: path.to_path_buf(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|e| file(e.to_string()))?;
        let m: DeviceModule = serde_json::from_slice(&bytes)
            .map_err(|e| file(format!("not an OpenCL module: {e}")))?;
        if m.format != FORMAT {
            return Err(OpenClError::ModuleFormat {
                path: path.to_path_buf(),
                found: m.format,
                expected: FORMAT,
            });
        }
        Ok(m)
    }
}
