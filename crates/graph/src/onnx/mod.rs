//! The ONNX frontend: a `ModelProto` (decoded by prost from the bindings generated from
//! `onnx.proto`) becomes a [`Graph`].
//!
//! Supported: the operators of [`supported_ops`] — those of convolutional, MLP-style and
//! transformer models, from torchvision's exports to the classic model-zoo architectures
//! — every opset up to the newest the onnx package defines, operator by operator
//! ([`opset`]; older attribute forms are converted: BatchNormalization's `spatial`, Pad,
//! Slice, Reshape, Split, Squeeze and the reductions taking attributes where later
//! opsets take inputs, the legacy `broadcast`/`axis` of arithmetic, Upsample),
//! initializers with raw or typed data, external data files, and the shape arithmetic of
//! exported graphs (`Shape`, `Gather`, `ConstantOfShape`, `Range`…), which is folded
//! while importing: a node whose inputs are all constants and whose result is small is
//! evaluated at once by the reference interpreter.
//!
//! Each ONNX operator becomes one graph operator, or a few (a 1-D convolution is a 2-D
//! one between reshapes, `Mean` a chain of adds and a scale), so that every one is a
//! tensor expression with a default schedule and a tuning task. An unsupported operator
//! is an error naming it and its node; a malformed file is an error, never a panic.
//!
//! The converters live by family: [`nn`] (convolutions, pooling, normalization, dense
//! layers, softmax), [`elementwise`], [`shape`] (shape arithmetic and data movement),
//! [`index`] (gathers and scatters by element, triangles, running sums, one-hot,
//! arg-max), [`normalize`] (RMS, Lp and mean-variance normalization as their parts),
//! [`rnn`] (LSTM, GRU and RNN unrolled), [`attention`] (opset 23's Attention), [`rotary`]
//! (RotaryEmbedding), [`quant`] (quantize, dequantize, integer products), [`loss`] (the
//! likelihood losses), [`window`] (the signal windows), [`reduce`], [`resize`] and
//! [`einsum`]; [`CONVERTERS`] maps each operator type to the newest version of its
//! definition the converter implements ([`opset`]) and to the converter.

#[rustfmt::skip]
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod proto;

mod attention;
mod attrs;
mod einsum;
mod elementwise;
mod index;
mod loss;
mod nn;
mod normalize;
pub mod opset;
mod qproduct;
mod quant;
mod reduce;
mod resize;
mod rnn;
mod rotary;
mod select;
mod shape;
#[rustfmt::skip]
#[allow(missing_docs)]
pub mod schema_table;
mod tensor;
mod window;

use crate::error::GraphError;
use crate::fixed_inputs::FixedInput;
use crate::ir::{Graph, Op, Pattern, TensorType};
use attrs::NodeCtx;
use petgraph::stable_graph::NodeIndex;
use prost::Message;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tessera_ir::DataType;
use tessera_runtime::NDArray;

pub use shape::{resolve_reshape, ReshapeError};

/// What a converter returns: the graph value of each of the node's outputs, in order.
type Outputs = Result<Vec<NodeIndex>, GraphError>;

/// A converter of one ONNX operator type.
type Convert = fn(&mut Importer, &NodeCtx) -> Outputs;

/// Every supported ONNX operator type, the newest version of its definition the converter
/// implements (older ones too: see [`opset`]), and its converter.
const CONVERTERS: &[(&str, i64, Convert)] = &[
    ("Abs", 13, elementwise::math),
    ("Acos", 22, elementwise::math),
    ("Acosh", 22, elementwise::math),
    ("Add", 14, elementwise::arithmetic),
    ("AffineGrid", 20, resize::affine_grid),
    ("And", 7, elementwise::predicate),
    ("ArgMax", 13, index::arg_extreme),
    ("ArgMin", 13, index::arg_extreme),
    ("Asin", 22, elementwise::math),
    ("Asinh", 22, elementwise::math),
    ("Atan", 22, elementwise::math),
    ("Atanh", 22, elementwise::math),
    ("Attention", 25, attention::attention),
    ("AveragePool", 22, nn::pool),
    ("BatchNormalization", 15, nn::batch_norm),
    ("BitShift", 28, elementwise::bitwise),
    ("BitwiseAnd", 18, elementwise::bitwise),
    ("BitwiseNot", 18, elementwise::math),
    ("BitwiseOr", 18, elementwise::bitwise),
    ("BitwiseXor", 18, elementwise::bitwise),
    ("BlackmanWindow", 17, window::window),
    ("Cast", 28, elementwise::cast),
    ("CastLike", 25, elementwise::cast),
    ("Ceil", 13, elementwise::math),
    ("Celu", 28, elementwise::activation),
    ("CenterCropPad", 18, shape::center_crop_pad),
    ("Clip", 13, elementwise::clip),
    ("Col2Im", 18, nn::col2im),
    ("Compress", 28, select::compress),
    ("Concat", 13, shape::concat),
    ("Constant", 25, shape::constant),
    ("ConstantOfShape", 25, shape::constant_of_shape),
    ("Conv", 22, nn::conv),
    ("ConvInteger", 10, quant::conv_integer),
    ("ConvTranspose", 22, nn::conv_transpose),
    ("Cos", 22, elementwise::math),
    ("Cosh", 22, elementwise::math),
    ("CumProd", 26, index::cumulative),
    ("CumSum", 14, index::cumulative),
    ("DepthToSpace", 28, index::depth_space),
    ("DequantizeLinear", 28, quant::dequantize_linear),
    ("Div", 14, elementwise::arithmetic),
    ("Dropout", 22, shape::identity),
    ("DynamicQuantizeLinear", 11, quant::dynamic_quantize_linear),
    ("Einsum", 28, einsum::einsum),
    ("Elu", 22, elementwise::activation),
    ("Equal", 19, elementwise::predicate),
    ("Erf", 13, elementwise::unary),
    ("Exp", 13, elementwise::unary),
    ("Expand", 13, shape::expand),
    ("EyeLike", 22, index::eye_like),
    ("Flatten", 25, shape::flatten),
    ("Floor", 13, elementwise::math),
    ("GRU", 22, rnn::recurrent),
    ("Gather", 13, shape::gather),
    ("GatherElements", 13, index::gather_elements),
    ("GatherND", 13, index::gather_nd),
    ("Gelu", 20, elementwise::gelu),
    ("Gemm", 13, nn::gemm),
    ("GlobalAveragePool", 22, nn::global_pool),
    ("GlobalLpPool", 22, normalize::global_lp_pool),
    ("GlobalMaxPool", 22, nn::global_pool),
    ("Greater", 13, elementwise::predicate),
    ("GreaterOrEqual", 16, elementwise::predicate),
    ("GridSample", 22, resize::grid_sample),
    ("GroupNormalization", 21, nn::group_norm),
    ("HammingWindow", 17, window::window),
    ("HannWindow", 17, window::window),
    ("HardSigmoid", 22, elementwise::activation),
    ("HardSwish", 22, elementwise::math),
    ("Hardmax", 13, index::hardmax),
    ("Identity", 25, shape::identity),
    ("InstanceNormalization", 22, nn::instance_norm),
    ("IsInf", 20, elementwise::activation),
    ("IsNaN", 20, elementwise::math),
    ("LRN", 13, nn::lrn),
    ("LSTM", 22, rnn::recurrent),
    ("LayerNormalization", 17, nn::layer_norm),
    ("LeakyRelu", 16, elementwise::activation),
    ("Less", 13, elementwise::predicate),
    ("LessOrEqual", 16, elementwise::predicate),
    ("Log", 13, elementwise::math),
    ("LogSoftmax", 13, nn::softmax),
    ("LpNormalization", 22, normalize::lp_normalization),
    ("LpPool", 22, nn::lp_pool),
    ("MatMul", 13, nn::matmul),
    ("MatMulInteger", 10, quant::matmul_integer),
    ("Max", 13, elementwise::variadic),
    ("MaxPool", 22, nn::pool),
    ("MaxUnpool", 22, index::max_unpool),
    ("Mean", 13, elementwise::variadic),
    ("MeanVarianceNormalization", 13, normalize::mean_variance),
    ("Min", 13, elementwise::variadic),
    ("Mish", 22, elementwise::math),
    ("Mod", 28, elementwise::modulo),
    ("Mul", 14, elementwise::arithmetic),
    ("Neg", 13, elementwise::math),
    (
        "NegativeLogLikelihoodLoss",
        22,
        loss::negative_log_likelihood,
    ),
    ("NonMaxSuppression", 11, select::non_max_suppression),
    ("NonZero", 13, select::non_zero),
    ("Not", 1, elementwise::math),
    ("OneHot", 28, index::one_hot),
    ("Or", 7, elementwise::predicate),
    ("PRelu", 16, elementwise::prelu),
    ("Pad", 25, shape::pad),
    ("Pow", 15, elementwise::pow),
    ("QLinearConv", 10, quant::qlinear_conv),
    ("QLinearMatMul", 21, quant::qlinear_matmul),
    ("QuantizeLinear", 28, quant::quantize_linear),
    ("RMSNormalization", 23, normalize::rms_norm),
    ("RNN", 22, rnn::recurrent),
    ("Range", 27, shape::range),
    ("Reciprocal", 13, elementwise::math),
    ("ReduceL1", 18, reduce::reduce),
    ("ReduceL2", 18, reduce::reduce),
    ("ReduceLogSum", 28, reduce::reduce),
    ("ReduceLogSumExp", 28, reduce::reduce),
    ("ReduceMax", 20, reduce::reduce),
    ("ReduceMean", 18, reduce::reduce),
    ("ReduceMin", 20, reduce::reduce),
    ("ReduceProd", 18, reduce::reduce),
    ("ReduceSum", 13, reduce::reduce),
    ("ReduceSumSquare", 18, reduce::reduce),
    ("Relu", 14, elementwise::unary),
    ("Reshape", 25, shape::reshape),
    ("Resize", 19, resize::resize),
    ("ReverseSequence", 28, index::reverse_sequence),
    ("RotaryEmbedding", 23, rotary::rotary_embedding),
    ("Round", 22, elementwise::math),
    ("Scatter", 11, index::scatter_elements),
    ("ScatterElements", 18, index::scatter_elements),
    ("ScatterND", 18, shape::scatter_nd),
    ("Selu", 22, elementwise::activation),
    ("Shape", 25, shape::shape),
    ("Shrink", 9, elementwise::activation),
    ("Sigmoid", 13, elementwise::unary),
    ("Sign", 13, elementwise::math),
    ("Sin", 22, elementwise::math),
    ("Sinh", 22, elementwise::math),
    ("Size", 25, shape::size),
    ("Slice", 13, shape::slice),
    ("Softmax", 13, nn::softmax),
    ("SoftmaxCrossEntropyLoss", 13, loss::softmax_cross_entropy),
    ("Softplus", 22, elementwise::math),
    ("Softsign", 22, elementwise::math),
    ("SpaceToDepth", 28, index::depth_space),
    ("Split", 18, shape::split),
    ("Sqrt", 13, elementwise::unary),
    ("Squeeze", 25, shape::squeeze),
    ("Sub", 14, elementwise::arithmetic),
    ("Sum", 13, elementwise::variadic),
    ("SwiGLU", 28, elementwise::swiglu),
    ("Swish", 24, elementwise::activation),
    ("Tan", 22, elementwise::math),
    ("Tanh", 13, elementwise::unary),
    ("TensorScatter", 24, index::tensor_scatter),
    ("ThresholdedRelu", 22, elementwise::activation),
    ("Tile", 13, shape::tile),
    ("TopK", 24, index::top_k),
    ("Transpose", 25, shape::transpose),
    ("Trilu", 14, index::trilu),
    ("Unique", 28, select::unique),
    ("Unsqueeze", 25, shape::unsqueeze),
    ("Upsample", 10, resize::upsample),
    ("Where", 16, elementwise::where_),
    ("Xor", 7, elementwise::predicate),
];

/// The operator types the importer knows, in alphabetical order.
pub fn supported_ops() -> impl Iterator<Item = &'static str> {
    CONVERTERS.iter().map(|(name, _, _)| *name)
}

/// Standard-domain operators the importer refuses by design, by family: what a
/// refusal says of them.
const REFUSED_FAMILIES: &[(&str, &[&str])] = &[
    (
        "a training operator",
        &["Adagrad", "Adam", "Gradient", "Momentum"],
    ),
    (
        "a sequence or optional operator (no tensor value)",
        &[
            "ConcatFromSequence",
            "Optional",
            "OptionalGetElement",
            "OptionalHasElement",
            "SequenceAt",
            "SequenceConstruct",
            "SequenceEmpty",
            "SequenceErase",
            "SequenceInsert",
            "SequenceLength",
            "SequenceMap",
            "SplitToSequence",
        ],
    ),
    (
        "a string operator",
        &[
            "RegexFullMatch",
            "StringConcat",
            "StringNormalizer",
            "StringSplit",
            "TfIdfVectorizer",
        ],
    ),
    (
        "a random generator (its output is not a function of its inputs)",
        &[
            "Bernoulli",
            "Multinomial",
            "RandomNormal",
            "RandomNormalLike",
            "RandomUniform",
            "RandomUniformLike",
        ],
    ),
    (
        "its output shape depends on the data, which compiled modules do not take yet",
        &["If", "Loop", "Scan"],
    ),
];

/// What a refusal of the unsupported `op_type` adds: its family when it is refused by
/// design, or that it is not a standard operator.
fn unsupported_reason(op_type: &str) -> String {
    if let Some((why, _)) = REFUSED_FAMILIES
        .iter()
        .find(|(_, ops)| ops.contains(&op_type))
    {
        return format!(": {why}");
    }
    if opset::versions(op_type).is_none() {
        return ": not an operator of the standard ONNX domain".into();
    }
    format!(
        ": not implemented (the importer takes {} of the {} standard operators: \
         tessera_graph::onnx::supported_ops)",
        CONVERTERS.len(),
        schema_table::SCHEMAS.len()
    )
}

/// The largest inputs and result (in elements) of an elementwise, data-movement or
/// reduction node on constants that the importer evaluates at once: shape arithmetic
/// and small constants, not weight transforms (the graph passes fold those).
const FOLD_AT_IMPORT: i64 = 1 << 16;

pub(crate) fn err(msg: impl Into<String>) -> GraphError {
    GraphError::Onnx(msg.into())
}

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Shapes for inputs whose shape is symbolic (or to override it); symbolic dimensions
    /// without an entry here become 1.
    pub input_shapes: HashMap<String, Vec<i64>>,
    /// Shapes of the values a caller will feed (`tessera run --input NAME=FILE`): used
    /// for an input with symbolic dimensions that `input_shapes` does not set, where
    /// the rank agrees and the static dimensions match (a static mismatch is left for
    /// the caller's own check of its values).
    pub value_shapes: HashMap<String, Vec<i64>>,
    /// Values of inputs the caller will feed (`--input NAME=FILE` of `tessera run` and
    /// `tessera compile`): where an input decides what the import must know (a
    /// reduction's axes, Reshape's shape, Resize's sizes, Pad's pads, Slice's bounds…),
    /// the network is built for this value and its module refuses any other
    /// ([`crate::fixed_inputs`]). Other inputs' values are not read.
    pub input_values: HashMap<String, NDArray>,
    /// How the int8 products sum where a weight's adjacent byte pairs could overflow
    /// int16 (elsewhere both forms are exact and the faster one is taken).
    pub int8_products: Int8Products,
    /// Leave broadcasts on constants to run time ([`Graph::keep_broadcasts`]): set for
    /// the builds of a network for runtime sizes.
    pub keep_broadcasts: bool,
    /// The count each selection (`NonZero`, `NonMaxSuppression`, `Compress`, by node
    /// name) is built at: its bound where absent ([`crate::selection`]).
    pub counts: HashMap<String, i64>,
}

/// The arithmetic of the int8 products where it matters (a weight byte pair whose
/// products with uint8 data can exceed int16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Int8Products {
    /// ONNX's: every product summed exactly in int32.
    #[default]
    Exact,
    /// Adjacent byte products summed in int16 with saturation (`vpmaddubsw`), as
    /// onnxruntime and TVM do on x86 CPUs without VNNI: about 1.4× faster there, the
    /// results onnxruntime gives on such a CPU, and different from the exact ones only
    /// where a pair saturates.
    Saturating,
}

/// A name that is not an [`Int8Products`].
#[derive(Debug, thiserror::Error)]
#[error("`{0}`: the int8 products are `exact` or `saturating`")]
pub struct UnknownInt8Products(pub String);

impl std::str::FromStr for Int8Products {
    type Err = UnknownInt8Products;
    fn from_str(s: &str) -> Result<Int8Products, UnknownInt8Products> {
        match s {
            "exact" => Ok(Int8Products::Exact),
            "saturating" => Ok(Int8Products::Saturating),
            _ => Err(UnknownInt8Products(s.to_string())),
        }
    }
}

/// Reads and imports an ONNX file (external data is looked up next to it).
pub fn load(path: &Path, options: &ImportOptions) -> Result<Graph, GraphError> {
    load_reporting(path, options).map(|(g, _)| g)
}

/// [`load`], with the import's warnings (each symbolic input dimension given the
/// value 1, naming the `--shape` that sets it).
pub fn load_reporting(
    path: &Path,
    options: &ImportOptions,
) -> Result<(Graph, Vec<String>), GraphError> {
    let bytes = std::fs::read(path).map_err(|source| GraphError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    import_reporting(&bytes, &dir, options)
}

/// Imports a serialized `ModelProto`; `base_dir` is where external data files are.
pub fn import(bytes: &[u8], base_dir: &Path, options: &ImportOptions) -> Result<Graph, GraphError> {
    import_reporting(bytes, base_dir, options).map(|(g, _)| g)
}

/// [`import`], with the import's warnings (see [`load_reporting`]).
pub fn import_reporting(
    bytes: &[u8],
    base_dir: &Path,
    options: &ImportOptions,
) -> Result<(Graph, Vec<String>), GraphError> {
    let model = proto::ModelProto::decode(bytes)
        .map_err(|e| err(format!("not a valid ONNX model: {e}")))?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version())
        .ok_or_else(|| err("the model imports no version of the default operator set"))?;
    opset::check_opset(opset).map_err(|e| err(e.to_string()))?;
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| err("the model has no graph"))?;
    let mut imp = Importer {
        g: Graph::new(if graph.name().is_empty() {
            "onnx"
        } else {
            graph.name()
        }),
        values: HashMap::new(),
        opset,
        base_dir: base_dir.to_path_buf(),
        dequantized: HashMap::new(),
        input_values: options.input_values.clone(),
        int8_products: options.int8_products,
        counts: options.counts.clone(),
    };
    if options.keep_broadcasts {
        imp.g.keep_broadcasts();
    }
    for t in &graph.initializer {
        let v = imp.tensor(t)?;
        let c = imp.g.constant(t.name(), v);
        imp.values.insert(t.name().to_string(), c);
    }
    // every shape given must name an input of the model
    let real_inputs: Vec<&proto::ValueInfoProto> = graph
        .input
        .iter()
        .filter(|vi| !imp.values.contains_key(vi.name()))
        .collect();
    let mut given: Vec<&String> = options.input_shapes.keys().collect();
    given.sort();
    for name in given {
        if !real_inputs.iter().any(|vi| vi.name() == name) {
            let names: Vec<String> = real_inputs
                .iter()
                .map(|vi| format!("`{}` {}", vi.name(), declared_shape(vi)))
                .collect();
            return Err(err(format!(
                "a shape was given for `{name}`, which is not an input of the model (its inputs: {})",
                names.join(", ")
            )));
        }
    }
    let mut warnings = Vec::new();
    for vi in &graph.input {
        if imp.values.contains_key(vi.name()) {
            continue; // an initializer listed as an input (older exporters)
        }
        let ty = input_type(vi, options, &mut warnings)?;
        let n = imp.g.input(vi.name(), ty);
        imp.values.insert(vi.name().to_string(), n);
    }
    for (i, node) in graph.node.iter().enumerate() {
        let label = if node.name().is_empty() {
            format!("#{i} ({})", node.op_type())
        } else {
            node.name().to_string()
        };
        imp.node(node, &label)?;
    }
    let mut outs = Vec::new();
    for o in &graph.output {
        let n = imp.value(o.name(), "the graph outputs")?;
        outs.push(n);
    }
    if outs.is_empty() {
        return Err(err("the graph has no outputs"));
    }
    imp.g.set_outputs(outs);
    imp.g.validate()?;
    let removed = crate::passes::dead_code_elimination(&mut imp.g);
    tracing::info!(
        graph = %imp.g.name,
        opset,
        onnx_nodes = graph.node.len(),
        nodes = imp.g.len(),
        dead = removed,
        "imported an ONNX model"
    );
    Ok((imp.g, warnings))
}

/// The names of a serialized model's real inputs (graph inputs that are not
/// initializers), in order: the order of ONNX's test data sets' `input_k.pb` files.
pub fn graph_inputs(bytes: &[u8]) -> Result<Vec<String>, GraphError> {
    let model = proto::ModelProto::decode(bytes)
        .map_err(|e| err(format!("not a valid ONNX model: {e}")))?;
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| err("the model has no graph"))?;
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name()).collect();
    Ok(graph
        .input
        .iter()
        .filter(|vi| !inits.contains(vi.name()))
        .map(|vi| vi.name().to_string())
        .collect())
}

/// Reads a serialized `TensorProto` file (the `input_0.pb` of ONNX's test data sets);
/// external data is looked up next to it.
pub fn load_tensor(path: &Path) -> Result<NDArray, GraphError> {
    let bytes = std::fs::read(path).map_err(|source| GraphError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let t = proto::TensorProto::decode(bytes.as_slice())
        .map_err(|e| err(format!("{}: not a valid ONNX tensor: {e}", path.display())))?;
    let imp = Importer {
        g: Graph::new("tensor"),
        values: HashMap::new(),
        opset: schema_table::NEWEST_OPSET,
        base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        dequantized: HashMap::new(),
        input_values: HashMap::new(),
        int8_products: Int8Products::Exact,
        counts: HashMap::new(),
    };
    imp.tensor(&t)
}

/// An input's declared shape as ONNX writes it, `[N, 3, 224, 224]` (symbolic dimensions
/// by their names, unknown ones as `?`).
fn declared_shape(vi: &proto::ValueInfoProto) -> String {
    use proto::tensor_shape_proto::dimension::Value;
    let Some(proto::type_proto::Value::TensorType(t)) =
        vi.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return "(not a tensor)".into();
    };
    let dims: Vec<String> = t
        .shape
        .as_ref()
        .map(|s| s.dim.as_slice())
        .unwrap_or(&[])
        .iter()
        .map(|d| match &d.value {
            Some(Value::DimValue(v)) => v.to_string(),
            Some(Value::DimParam(p)) if !p.is_empty() => p.clone(),
            _ => "?".into(),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

fn input_type(
    vi: &proto::ValueInfoProto,
    options: &ImportOptions,
    warnings: &mut Vec<String>,
) -> Result<TensorType, GraphError> {
    let name = vi.name();
    let Some(proto::type_proto::Value::TensorType(t)) =
        vi.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Err(err(format!("input `{name}` is not a tensor")));
    };
    let dtype = tensor::dtype_of(t.elem_type()).ok_or_else(|| {
        err(format!(
            "input `{name}` has an unsupported element type {}",
            t.elem_type()
        ))
    })?;
    let dims = t.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[]);
    if let Some(s) = options.input_shapes.get(name) {
        if t.shape.is_some() && s.len() != dims.len() {
            return Err(err(format!(
                "the shape given for input `{name}` has {} dimensions, but the model declares \
                 {} ({})",
                s.len(),
                dims.len(),
                declared_shape(vi)
            )));
        }
        return Ok(TensorType::new(s, dtype));
    }
    let static_dim = |d: &proto::tensor_shape_proto::Dimension| match &d.value {
        Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)) if *v > 0 => Some(*v),
        _ => None,
    };
    if let Some(s) = options.value_shapes.get(name) {
        let fits = s.len() == dims.len()
            && dims
                .iter()
                .zip(s)
                .all(|(d, &v)| static_dim(d).is_none_or(|x| x == v));
        if fits && dims.iter().any(|d| static_dim(d).is_none()) {
            return Ok(TensorType::new(s, dtype));
        }
    }
    let mut symbolic = Vec::new();
    let shape: Vec<i64> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| match &d.value {
            Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)) if *v > 0 => *v,
            Some(proto::tensor_shape_proto::dimension::Value::DimParam(p)) if !p.is_empty() => {
                symbolic.push(format!("{i} (`{p}`)"));
                1
            }
            _ => {
                symbolic.push(format!("{i}"));
                1
            }
        })
        .collect();
    if !symbolic.is_empty() {
        let example: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        warnings.push(format!(
            "input `{name}` {} has symbolic dimension{} {}, taken as 1: give the shape with \
             --shape {name}={}",
            declared_shape(vi),
            if symbolic.len() > 1 { "s" } else { "" },
            symbolic.join(", "),
            example.join(",")
        ));
    }
    Ok(TensorType::new(&shape, dtype))
}

/// The import in progress: the graph so far and the graph node of every ONNX value.
pub(crate) struct Importer {
    g: Graph,
    values: HashMap<String, NodeIndex>,
    opset: i64,
    base_dir: PathBuf,
    /// What each `DequantizeLinear` output was made from ([`qproduct`]).
    dequantized: HashMap<NodeIndex, qproduct::Dequantized>,
    /// [`ImportOptions::input_values`].
    input_values: HashMap<String, NDArray>,
    /// [`ImportOptions::int8_products`].
    int8_products: Int8Products,
    /// [`ImportOptions::counts`].
    counts: HashMap<String, i64>,
}

/// A value given for a network input ([`ImportOptions::input_values`]) whose type is not
/// the input's.
#[derive(Debug, thiserror::Error)]
#[error("the value given for input `{input}` is {given}, but the input is {expected}")]
struct GivenValueMismatch {
    input: String,
    given: TensorType,
    expected: TensorType,
}

impl Importer {
    fn value(&self, name: &str, user: &str) -> Result<NodeIndex, GraphError> {
        self.values.get(name).copied().ok_or_else(|| {
            err(format!(
                "{user}: value `{name}` is not defined before its use"
            ))
        })
    }

    fn ty(&self, n: NodeIndex) -> &TensorType {
        &self.g.node(n).ty
    }

    fn shape(&self, n: NodeIndex) -> Vec<i64> {
        self.ty(n).shape.clone()
    }

    fn rank(&self, n: NodeIndex) -> usize {
        self.ty(n).shape.len()
    }

    /// The constant value of `n`, if it is a constant.
    fn constant(&self, n: NodeIndex) -> Option<&NDArray> {
        self.g.constant_value(n).map(|v| &**v)
    }

    /// The constant value of `n` as integers (for shape arithmetic).
    fn ints_of(&self, n: NodeIndex) -> Option<Vec<i64>> {
        let v = self.constant(n)?;
        Some(v.to_f64_vec().into_iter().map(|x| x as i64).collect())
    }

    /// Input `k` of `c`, whose value the import needs (an axis, a size, a bound): a
    /// constant, a network input whose value the caller gave in
    /// [`ImportOptions::input_values`], or a value computed from those
    /// ([`Importer::evaluate`]) — the network is then built for the given values, and the
    /// module refuses others ([`FixedInput`]).
    fn known_value(
        &mut self,
        c: &NodeCtx,
        k: usize,
        what: &str,
    ) -> Result<Option<NDArray>, GraphError> {
        let Some(n) = c.opt(k) else { return Ok(None) };
        let mut fixed = Vec::new();
        if let Some(v) = self.evaluate(n, &mut fixed, &mut HashMap::new(), 0) {
            let user = format!("{what} of `{}` ({})", c.label, c.op);
            for (input, value) in fixed {
                self.g
                    .fix_input(FixedInput::new(&input, &value, user.clone()));
            }
            return Ok(Some(v));
        }
        let computed = || {
            c.bad(format!(
                "{what} (input {k}) must be known at import time (it is computed in the \
                 network)"
            ))
        };
        let node = self.g.node(n);
        if !matches!(node.op, Op::Input) {
            return Err(computed());
        }
        let name = node.name.clone();
        match self.given_value(n) {
            None => Err(c.bad(format!(
                "{what} (input {k}) must be known at import time: it is the network input \
                 `{name}`; give its value when building (`--input {name}=FILE` of `tessera \
                 run` or `tessera compile`)"
            ))),
            Some(Err(e)) => Err(c.bad(e)),
            Some(Ok(_)) => Err(computed()),
        }
    }

    /// The value given for network input `n` ([`ImportOptions::input_values`]), `None`
    /// where none was, an error where it does not fit the input's type.
    fn given_value(&self, n: NodeIndex) -> Option<Result<NDArray, GivenValueMismatch>> {
        let node = self.g.node(n);
        let v = self.input_values.get(&node.name)?;
        let given: Vec<i64> = v.shape().iter().map(|&d| d as i64).collect();
        Some(if v.dtype() != node.ty.dtype || given != node.ty.shape {
            Err(GivenValueMismatch {
                input: node.name.clone(),
                given: TensorType::new(&given, v.dtype()),
                expected: node.ty.clone(),
            })
        } else {
            Ok(v.clone())
        })
    }

    /// The value of `n` when it is computed from constants and network inputs whose values
    /// were given (each such input pushed on `fixed`; a constant or a given input itself
    /// too), by the reference interpreter over at most [`FOLD_AT_IMPORT`] elements a
    /// computed value and 64 operators deep, each node once
    /// (`done`); `None` where any of it is not known.
    fn evaluate(
        &self,
        n: NodeIndex,
        fixed: &mut Vec<(String, NDArray)>,
        done: &mut HashMap<NodeIndex, NDArray>,
        depth: usize,
    ) -> Option<NDArray> {
        if let Some(v) = self.constant(n).or_else(|| done.get(&n)) {
            return Some(v.clone());
        }
        let node = self.g.node(n);
        if matches!(node.op, Op::Input) {
            let v = self.given_value(n)?.ok()?;
            fixed.push((node.name.clone(), v.clone()));
            done.insert(n, v.clone());
            return Some(v);
        }
        if depth > 64 || node.ty.numel() > FOLD_AT_IMPORT {
            return None;
        }
        let args = self.g.args(n);
        let values: Vec<NDArray> = args
            .iter()
            .map(|&a| self.evaluate(a, fixed, done, depth + 1))
            .collect::<Option<_>>()?;
        let refs: Vec<&NDArray> = values.iter().collect();
        let v = crate::reference::eval_op(&self.g, n, &refs).ok()?;
        done.insert(n, v.clone());
        Some(v)
    }

    /// Input `k` of `c` as integers: it must be known at import time when present
    /// ([`Importer::known_value`]).
    fn const_ints(
        &mut self,
        c: &NodeCtx,
        k: usize,
        what: &str,
    ) -> Result<Option<Vec<i64>>, GraphError> {
        Ok(self
            .known_value(c, k, what)?
            .map(|v| v.to_f64_vec().into_iter().map(|x| x as i64).collect()))
    }

    /// Input `k` of `c` as floats: it must be known at import time when present.
    fn const_floats(
        &mut self,
        c: &NodeCtx,
        k: usize,
        what: &str,
    ) -> Result<Option<Vec<f64>>, GraphError> {
        Ok(self.known_value(c, k, what)?.map(|v| v.to_f64_vec()))
    }

    fn int_const(
        &mut self,
        name: &str,
        shape: &[usize],
        v: &[i64],
    ) -> Result<NodeIndex, GraphError> {
        Ok(self.g.constant(name, NDArray::from_slice::<i64>(shape, v)?))
    }

    /// A scalar constant of `dtype`.
    fn scalar(&mut self, name: &str, dtype: DataType, v: f64) -> Result<NodeIndex, GraphError> {
        self.filled(name, dtype, &[], v)
    }

    /// A constant of `dtype` and `shape` whose every element is `v`.
    fn filled(
        &mut self,
        name: &str,
        dtype: DataType,
        shape: &[i64],
        v: f64,
    ) -> Result<NodeIndex, GraphError> {
        let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        let values = vec![v; dims.iter().product()];
        Ok(self
            .g
            .constant(name, NDArray::from_f64(dtype, &dims, &values)?))
    }

    /// Adds `op` on `ins`; when every input is a constant and the result is small, the
    /// node is evaluated at once and its value takes its place.
    fn op(&mut self, name: &str, op: Op, ins: &[NodeIndex]) -> Result<NodeIndex, GraphError> {
        // data movement and elementwise arithmetic only: a convolution or a product on
        // constants costs the interpreter too much here (the graph passes fold those)
        let cheap = matches!(
            op.pattern(),
            Some(Pattern::ElemWise | Pattern::Injective | Pattern::Reduce)
        );
        let n = self.g.op(name, op, ins)?;
        let fold = cheap
            && !self.g.is_kept_broadcast(n)
            && !ins.is_empty()
            && ins.iter().all(|&i| {
                self.g.constant_value(i).is_some() && self.ty(i).numel() <= FOLD_AT_IMPORT
            })
            && self.ty(n).numel() <= FOLD_AT_IMPORT;
        if !fold {
            return Ok(n);
        }
        let values: Vec<NDArray> = ins
            .iter()
            .map(|&i| (**self.g.constant_value(i).expect("checked")).clone())
            .collect();
        let refs: Vec<&NDArray> = values.iter().collect();
        let v = crate::reference::eval_op(&self.g, n, &refs)?;
        self.g.remove(n);
        Ok(self.g.constant(name, v))
    }

    /// `x · y` (or another broadcasting binary operator `b`).
    fn binary(
        &mut self,
        name: &str,
        b: crate::ir::Binary,
        x: NodeIndex,
        y: NodeIndex,
    ) -> Result<NodeIndex, GraphError> {
        self.op(name, Op::Binary(b), &[x, y])
    }

    /// `x` reshaped to `shape` (nothing when it already has it).
    fn reshape(
        &mut self,
        name: &str,
        x: NodeIndex,
        shape: Vec<i64>,
    ) -> Result<NodeIndex, GraphError> {
        if self.ty(x).shape == shape {
            return Ok(x);
        }
        self.op(name, Op::Reshape { shape }, &[x])
    }

    fn node(&mut self, node: &proto::NodeProto, label: &str) -> Result<(), GraphError> {
        let op_type = node.op_type();
        if !matches!(node.domain(), "" | "ai.onnx") {
            return Err(err(format!(
                "node `{label}`: operator `{}::{op_type}` of a custom domain is not supported",
                node.domain()
            )));
        }
        let Some((implemented, convert)) = CONVERTERS
            .iter()
            .find(|(name, _, _)| *name == op_type)
            .map(|(_, v, f)| (*v, *f))
        else {
            return Err(err(format!(
                "unsupported operator `{op_type}` (node `{label}`){}",
                unsupported_reason(op_type)
            )));
        };
        opset::check(op_type, self.opset, implemented)
            .map_err(|e| err(format!("node `{label}`: {e}")))?;
        // Inputs; an empty name is an omitted optional input.
        let mut ins: Vec<Option<NodeIndex>> = Vec::with_capacity(node.input.len());
        for i in &node.input {
            ins.push(if i.is_empty() {
                None
            } else {
                Some(self.value(i, &format!("node `{label}`"))?)
            });
        }
        let ctx = NodeCtx::new(node, label, ins);
        tracing::trace!(node = label, op = op_type, "converting");
        if node.output.iter().all(String::is_empty) {
            return Err(ctx.bad("the node has no output"));
        }
        let outs = convert(self, &ctx)?;
        for (name, v) in node.output.iter().zip(outs) {
            if !name.is_empty() {
                self.values.insert(name.clone(), v);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The converter table: sorted (as `supported_ops` promises), every operator a
    /// standard one at a version where its definition changed, none above the newest.
    #[test]
    fn every_converter_names_a_real_definition() {
        let names: Vec<&str> = supported_ops().collect();
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "not sorted: {names:?}"
        );
        for (op, implemented, _) in CONVERTERS {
            let versions = opset::versions(op).unwrap_or_else(|| panic!("{op} is not standard"));
            assert!(
                versions.contains(implemented),
                "{op} {implemented}: {versions:?}"
            );
        }
        // the floor: raise it as converters are added, never lower it
        assert!(names.len() >= 150, "only {} operators", names.len());
    }
}
