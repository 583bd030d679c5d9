//! What to build: a network's source (the model zoo or an ONNX file), the target, the
//! layout to compile in and the algorithm choices a build may make — the request every
//! stage of [`crate::Toolchain`] reads.

use std::path::PathBuf;
use tessera_backends::Target;
use tessera_graph::onnx::ImportOptions;
use tessera_graph::zoo::ZooOptions;
use tessera_graph::Layout;

/// Where a network comes from.
#[derive(Clone, Debug)]
pub enum NetworkSource {
    /// A network of the model zoo, generated with `options` (whose layout is the
    /// spec's: see [`NetworkSpec::layout`]).
    Zoo { name: String, options: ZooOptions },
    /// An ONNX model file and how to import it.
    Onnx {
        path: PathBuf,
        options: ImportOptions,
    },
}

impl NetworkSource {
    /// A zoo network with its default options (batch 1, seed 0, its own image size).
    pub fn zoo(name: &str) -> NetworkSource {
        NetworkSource::Zoo {
            name: name.to_string(),
            options: ZooOptions::default(),
        }
    }

    /// An ONNX file imported with the default options.
    pub fn onnx(path: impl Into<PathBuf>) -> NetworkSource {
        NetworkSource::Onnx {
            path: path.into(),
            options: ImportOptions::default(),
        }
    }
}

/// One network to build for one target.
#[derive(Clone, Debug)]
pub struct NetworkSpec {
    pub source: NetworkSource,
    pub target: Target,
    /// The layout to compile in; `None`: the one the target's extension asks for, else
    /// NHWC (the auto-scheduler's).
    pub layout: Option<Layout>,
    /// Whether a CPU build in NHWC may compute 3×3 stride-1 convolutions with Winograd
    /// (`graph::conv_plan`); false computes every convolution directly.
    pub winograd: bool,
    /// A size known only when the module runs (a `--shape` range), the source's input
    /// shapes holding its largest value ([`crate::runtime_size`]).
    pub runtime_size: Option<Box<crate::runtime_size::RuntimeSize>>,
}

impl NetworkSpec {
    /// `source` for `target`, in the target's layout, Winograd allowed.
    pub fn new(source: NetworkSource, target: Target) -> NetworkSpec {
        NetworkSpec {
            source,
            target,
            layout: None,
            winograd: true,
            runtime_size: None,
        }
    }

    /// The same spec in `layout`.
    pub fn with_layout(mut self, layout: Layout) -> NetworkSpec {
        self.layout = Some(layout);
        self
    }
}
