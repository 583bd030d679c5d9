//! The graph crate's typed errors.

use tessera_backends::BackendError;
use tessera_runtime::RuntimeError;
use tessera_te::{LowerError, ScheduleError, TeError};

/// What can go wrong building, transforming, compiling or running a network.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// An operator's inputs or attributes do not fit (type and shape inference).
    #[error("node `{node}` ({op}): {source}")]
    Infer {
        node: String,
        op: String,
        #[source]
        source: Box<TeError>,
    },
    /// An operator was given the wrong number of inputs.
    #[error("node `{node}` ({op}): expects {expected} inputs, got {got}")]
    Arity {
        node: String,
        op: String,
        expected: String,
        got: usize,
    },
    /// A pass of the CPU rewrites (`cpu_rewrites::CPU_REWRITES`) failed.
    #[error("graph rewrite `{pass}`: {source}")]
    Pass {
        pass: &'static str,
        #[source]
        source: Box<GraphError>,
    },
    /// Another structural problem of the graph (a name used twice, a missing output…).
    #[error("{0}")]
    Invalid(String),
    /// The model zoo does not know the network or its options.
    #[error("{0}")]
    Zoo(String),
    /// An ONNX model could not be imported.
    #[error("ONNX import: {0}")]
    Onnx(String),
    /// A module file that cannot be loaded.
    #[error("module {path}: {reason}")]
    Module { path: String, reason: String },
    /// An input given to the executor does not fit.
    #[error("input `{name}`: {reason}")]
    Input { name: String, reason: String },
    /// A network built at two sizes of a runtime size is not the same network
    /// ([`crate::dynamic`]): other sizes may be.
    #[error("a network for {range}: at sizes {size}: {why}")]
    SizeStructure {
        range: String,
        size: String,
        why: String,
    },
    /// Scheduling a fused group failed.
    #[error("scheduling `{group}`: {source}")]
    Schedule {
        group: String,
        #[source]
        source: Box<ScheduleError>,
    },
    /// Lowering a fused group failed.
    #[error("lowering `{group}`: {source}")]
    Lower {
        group: String,
        #[source]
        source: Box<LowerError>,
    },
    /// Compiling a fused group failed.
    #[error("compiling `{group}`: {source}")]
    Backend {
        group: String,
        #[source]
        source: Box<BackendError>,
    },
    /// Loading or running a compiled kernel failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Device(#[from] tessera_runtime::DeviceError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
