//! Why a network could not be imported, prepared, compiled or loaded: one type for the
//! pipeline, each stage's own error kept as the source.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The request itself is wrong (a layout a target cannot take, no network named).
    #[error("{0}")]
    Request(String),
    /// A graph stage (import, passes, planning, compiling, loading) failed.
    #[error(transparent)]
    Graph(Box<tessera_graph::GraphError>),
    /// The ONNX file could not be imported.
    #[error("importing {}: {source}", path.display())]
    Import {
        path: PathBuf,
        source: Box<tessera_graph::GraphError>,
    },
    /// A target's preparation (an extension's [`crate::NetworkExtension::prepare`]).
    #[error("preparing the network for `{target}` ({extension}): {message}")]
    Prepare {
        target: String,
        extension: String,
        message: String,
    },
    /// The registry has no backend or device for the target, or its plugin failed.
    #[error(transparent)]
    Plugin(#[from] tessera_plugin::PluginError),
    /// A target string did not parse.
    #[error(transparent)]
    Target(#[from] tessera_backends::TargetError),
    /// A record log could not be read or appended to.
    #[error(transparent)]
    Record(#[from] tessera_search::record::RecordError),
    /// A catalog operator could not be made a task.
    #[error(transparent)]
    Catalog(#[from] tessera_te::catalog::CatalogError),
    /// A log's history best built for the operator does not lower.
    #[error("applying the history best of {}: {source}", log.display())]
    HistoryBest {
        log: PathBuf,
        source: Box<tessera_search::apply::ApplyError>,
    },
    /// A file or folder of the pipeline's own could not be made.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// A backend could not generate or build a kernel.
    #[error(transparent)]
    Backend(#[from] tessera_backends::BackendError),
    /// The reference interpreter failed on an operator's definition.
    #[error("reference interpreter: {0}")]
    Reference(tessera_ir::interp::InterpError),
    /// A host array could not be made, read or converted.
    #[error(transparent)]
    Runtime(#[from] tessera_runtime::RuntimeError),
    /// A device call failed while running or timing a network or an operator.
    #[error(transparent)]
    Device(#[from] tessera_runtime::DeviceError),
    /// A tracker's server could not be reached, or serves another kind of device.
    #[error(transparent)]
    Rpc(#[from] tessera_rpc::RpcError),
    /// A run's input files do not fit the network.
    #[error(transparent)]
    Input(#[from] crate::InputError),
    /// A tuning session could not start its measurer (no runner binary, the reference
    /// outputs not computed).
    #[error(transparent)]
    Measure(#[from] tessera_search::measure::MeasureError),
    /// A tuning session stopped.
    #[error("tuning into {}", log.display())]
    Session {
        log: PathBuf,
        #[source]
        source: Box<tessera_search::session::SessionError>,
    },
    /// The device a session would measure on, or a server serve, does not open here
    /// (`purpose`: "tuning measures on", "serving").
    #[error("{purpose} the device of `{target}`")]
    NoDevice {
        purpose: &'static str,
        target: String,
        #[source]
        source: Box<tessera_plugin::PluginError>,
    },
    /// A tuning curve could not be drawn or written.
    #[error("drawing {}", out.display())]
    Draw {
        out: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the servers of key `{key}` run `{served}` devices, not `{wanted}`")]
    RemoteKind {
        key: String,
        served: String,
        wanted: String,
    },
}

impl From<tessera_graph::GraphError> for DriverError {
    fn from(e: tessera_graph::GraphError) -> Self {
        DriverError::Graph(Box::new(e))
    }
}
