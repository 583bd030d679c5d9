//! What a backend's build produces and a device loads.

use crate::target::TargetKind;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tessera_ir::visit::{walk_stmt, ExprVisitor, StmtVisitor};
use tessera_ir::{Buffer, DataType, PrimFunc, Stmt, StmtNode};

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
    /// Whether the function writes it (an output): its memory must not be shared with
    /// any other argument.
    #[serde(default)]
    pub written: bool,
}

impl ParamSpec {
    /// The parameter specs of a function (constant shapes; a symbolic one reads as
    /// empty), each marked written if the body stores to it.
    pub fn of(func: &PrimFunc) -> Vec<ParamSpec> {
        struct Stores(Vec<Buffer>);
        impl ExprVisitor for Stores {}
        impl StmtVisitor for Stores {
            fn visit_stmt(&mut self, s: &Stmt) {
                if let StmtNode::Store { buffer, .. } = s.node() {
                    if !self.0.contains(buffer) {
                        self.0.push(buffer.clone());
                    }
                }
                walk_stmt(self, s)
            }
        }
        let mut stores = Stores(Vec::new());
        stores.visit_stmt(&func.body);
        func.params
            .iter()
            .map(|p| ParamSpec {
                name: p.name().to_string(),
                dtype: p.dtype(),
                shape: p.const_shape().unwrap_or_default(),
                written: stores.0.contains(p),
            })
            .collect()
    }

    /// The bytes of the parameter's data, or `None` for a negative or overflowing size.
    pub fn nbytes(&self) -> Option<usize> {
        self.shape.iter().try_fold(self.dtype.bytes(), |acc, &d| {
            usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
        })
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
