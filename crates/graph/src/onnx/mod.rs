//! The ONNX frontend: a `ModelProto` (decoded by prost from the bindings generated from
//! `onnx.proto`) becomes a [`Graph`].
//!
//! Supported: the operators of [`supported_ops`] — those of convolutional, MLP-style and
//! transformer models, from torchvision's exports to the classic model-zoo architectures
//! — opsets 1 to 21 (older attribute forms are converted: BatchNormalization's `spatial`, Pad,
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
//! [`reduce`], [`resize`] and [`einsum`]; [`CONVERTERS`] maps each operator type to its
//! converter.

#[rustfmt::skip]
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod proto;

mod attrs;
mod einsum;
mod elementwise;
mod nn;
mod reduce;
mod resize;
mod shape;
mod tensor;

use crate::error::GraphError;
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

/// Every supported ONNX operator type and its converter.
const CONVERTERS: &[(&str, Convert)] = &[
    ("Abs", elementwise::math),
    ("Add", elementwise::arithmetic),
    ("And", elementwise::predicate),
    ("AveragePool", nn::pool),
    ("BatchNormalization", nn::batch_norm),
    ("Cast", elementwise::cast),
    ("Ceil", elementwise::math),
    ("Clip", elementwise::clip),
    ("Concat", shape::concat),
    ("Constant", shape::constant),
    ("ConstantOfShape", shape::constant_of_shape),
    ("Conv", nn::conv),
    ("ConvTranspose", nn::conv_transpose),
    ("Div", elementwise::arithmetic),
    ("Dropout", shape::identity),
    ("Einsum", einsum::einsum),
    ("Elu", elementwise::activation),
    ("Equal", elementwise::predicate),
    ("Erf", elementwise::unary),
    ("Exp", elementwise::unary),
    ("Expand", shape::expand),
    ("Flatten", shape::flatten),
    ("Floor", elementwise::math),
    ("Gather", shape::gather),
    ("Gelu", elementwise::gelu),
    ("Gemm", nn::gemm),
    ("GlobalAveragePool", nn::global_pool),
    ("GlobalMaxPool", nn::global_pool),
    ("Greater", elementwise::predicate),
    ("GreaterOrEqual", elementwise::predicate),
    ("GroupNormalization", nn::group_norm),
    ("HardSigmoid", elementwise::activation),
    ("HardSwish", elementwise::math),
    ("Identity", shape::identity),
    ("InstanceNormalization", nn::instance_norm),
    ("LRN", nn::lrn),
    ("LayerNormalization", nn::layer_norm),
    ("LeakyRelu", elementwise::activation),
    ("Less", elementwise::predicate),
    ("LessOrEqual", elementwise::predicate),
    ("Log", elementwise::math),
    ("LogSoftmax", nn::softmax),
    ("MatMul", nn::matmul),
    ("Max", elementwise::variadic),
    ("MaxPool", nn::pool),
    ("Mean", elementwise::variadic),
    ("Min", elementwise::variadic),
    ("Mod", elementwise::modulo),
    ("Mul", elementwise::arithmetic),
    ("Neg", elementwise::math),
    ("Not", elementwise::math),
    ("Or", elementwise::predicate),
    ("PRelu", elementwise::prelu),
    ("Pad", shape::pad),
    ("Pow", elementwise::pow),
    ("Range", shape::range),
    ("ScatterND", shape::scatter_nd),
    ("Reciprocal", elementwise::math),
    ("ReduceL1", reduce::reduce),
    ("ReduceL2", reduce::reduce),
    ("ReduceLogSumExp", reduce::reduce),
    ("ReduceMax", reduce::reduce),
    ("ReduceMean", reduce::reduce),
    ("ReduceMin", reduce::reduce),
    ("ReduceProd", reduce::reduce),
    ("ReduceSum", reduce::reduce),
    ("ReduceSumSquare", reduce::reduce),
    ("Relu", elementwise::unary),
    ("Reshape", shape::reshape),
    ("Resize", resize::resize),
    ("Round", elementwise::math),
    ("Selu", elementwise::activation),
    ("Shape", shape::shape),
    ("Sigmoid", elementwise::unary),
    ("Sign", elementwise::math),
    ("Size", shape::size),
    ("Slice", shape::slice),
    ("Softmax", nn::softmax),
    ("Softplus", elementwise::math),
    ("Softsign", elementwise::math),
    ("Split", shape::split),
    ("Sqrt", elementwise::unary),
    ("Squeeze", shape::squeeze),
    ("Sub", elementwise::arithmetic),
    ("Sum", elementwise::variadic),
    ("Tanh", elementwise::unary),
    ("ThresholdedRelu", elementwise::activation),
    ("Tile", shape::tile),
    ("Transpose", shape::transpose),
    ("Unsqueeze", shape::unsqueeze),
    ("Upsample", resize::upsample),
    ("Where", elementwise::where_),
    ("Xor", elementwise::predicate),
];

/// The operator types the importer knows, in alphabetical order.
pub fn supported_ops() -> impl Iterator<Item = &'static str> {
    CONVERTERS.iter().map(|(name, _)| *name)
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
    if !(1..=21).contains(&opset) {
        return Err(err(format!("opset {opset} is not supported (1 to 21 are)")));
    }
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
    };
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

    /// Input `k` of `c` as integers: it must be a constant when present.
    fn const_ints(
        &self,
        c: &NodeCtx,
        k: usize,
        what: &str,
    ) -> Result<Option<Vec<i64>>, GraphError> {
        c.opt(k)
            .map(|n| {
                self.ints_of(n).ok_or_else(|| {
                    c.bad(format!("{what} (input {k}) must be known at import time"))
                })
            })
            .transpose()
    }

    /// Input `k` of `c` as floats: it must be a constant when present.
    fn const_floats(
        &self,
        c: &NodeCtx,
        k: usize,
        what: &str,
    ) -> Result<Option<Vec<f64>>, GraphError> {
        c.opt(k)
            .map(|n| {
                self.constant(n).map(NDArray::to_f64_vec).ok_or_else(|| {
                    c.bad(format!("{what} (input {k}) must be known at import time"))
                })
            })
            .transpose()
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
        let Some(convert) = CONVERTERS
            .iter()
            .find(|(name, _)| *name == op_type)
            .map(|(_, f)| *f)
        else {
            return Err(err(format!(
                "unsupported operator `{op_type}` (node `{label}`); supported: {}",
                supported_ops().collect::<Vec<_>>().join(", ")
            )));
        };
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
        if node.output.first().is_none_or(String::is_empty) {
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
