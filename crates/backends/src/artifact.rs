//! What a backend's build produces and the runtime loads.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tessera_ir::{DataType, PrimFunc};

/// The kind of device an artifact runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeviceKind {
    Cpu,
    Cuda,
    OpenCl,
    Vta,
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

/// A built kernel.
///
/// For the CPU the artifact is a shared object exporting
/// `int32_t <entry>(void** args, int32_t num_args)`: `args[i]` points to the data of
/// parameter `i` (dense, row-major, of `params[i]`'s type and shape). It returns 0 on
/// success, non-zero on failure (e.g. a temporary allocation failed, or a wrong count).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub device: DeviceKind,
    /// The loadable file (a shared object for the CPU).
    pub path: PathBuf,
    /// The generated source it was built from.
    pub source_path: PathBuf,
    /// The exported entry symbol.
    pub entry: String,
    pub params: Vec<ParamSpec>,
}
