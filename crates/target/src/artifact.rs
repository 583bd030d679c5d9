//! What a backend's build produces and a device loads.

use crate::target::TargetKind;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tessera_ir::{DataType, PrimFunc};

/// How a GPU kernel is launched (TVM's thread extents): grid and block dimensions and the
/// dynamic shared memory per block. Host kernels (the CPU's) take none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaunchDims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
}

/// One parameter of a compiled function: what the caller must pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    pub dtype: DataType,
    pub shape: Vec<i64>,
}

impl ParamSpec {
    /// The parameter specs of a function (constant shapes; a symbolic one reads as empty).
    pub fn of(func: &PrimFunc) -> Vec<ParamSpec> {
        func.params
            .iter()
            .map(|p| ParamSpec {
                name: p.name().to_string(),
                dtype: p.dtype(),
                shape: p.const_shape().unwrap_or_default(),
            })
            .collect()
    }
}

/// A built kernel: a file a device of `device`'s kind can load, and how to call it.
///
/// For the CPU the artifact is a shared object exporting
/// `int32_t <entry>(void** args, int32_t num_args)`: `args[i]` points to the data of
/// parameter `i` (dense, row-major, of `params[i]`'s type and shape). It returns 0 on
/// success, non-zero on failure (e.g. a temporary allocation failed, or a wrong count).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// The kind of target it was built for; only a device of that kind loads it.
    pub device: TargetKind,
    /// The loadable file (a shared object for the CPU; whatever the plugin's device
    /// loads for a plugin's kind). A device reads it when it loads the module.
    pub path: PathBuf,
    /// The generated source it was built from.
    pub source_path: PathBuf,
    /// The exported entry symbol.
    pub entry: String,
    pub params: Vec<ParamSpec>,
    /// Launch dimensions of a GPU kernel (none for host kernels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchDims>,
}
