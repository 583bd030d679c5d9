//! The network IR: a petgraph graph of typed operator nodes, constants (weights) and
//! named inputs and outputs.
//!
//! Every node has one output of a known [`TensorType`]; an edge `producer -> consumer`
//! carries the consumer's input slot. Types are inferred when a node is added, by
//! building the operator's tensor expression on placeholders of its input types, so the
//! graph and the kernels that are later compiled from it agree on every shape and every
//! attribute check (errors name the node and the operator).

use crate::error::GraphError;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::fmt;
use std::sync::Arc;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{self, Conv2dAttrs, Conv3dAttrs, Pool2dAttrs, Pool3dAttrs, PoolType};
use tessera_te::{placeholder, TeError, Tensor};

/// The shape and element type of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Vec<i64>,
    pub dtype: DataType,
}

impl TensorType {
    pub fn new(shape: &[i64], dtype: DataType) -> Self {
        TensorType {
            shape: shape.to_vec(),
            dtype,
        }
    }
    pub fn f32(shape: &[i64]) -> Self {
        TensorType::new(shape, DataType::float32())
    }
    /// The number of elements.
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
    /// The size in bytes.
    pub fn nbytes(&self) -> usize {
        self.numel() as usize * self.dtype.bytes()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{}[{}]", self.dtype, dims.join(", "))
    }
}

/// The data layout of a 4-D activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    Nchw,
    Nhwc,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Nchw => "NCHW",
            Layout::Nhwc => "NHWC",
        }
    }
    /// Parses `NCHW` / `NHWC` (any case).
    pub fn parse(s: &str) -> Option<Layout> {
        match s.to_ascii_uppercase().as_str() {
            "NCHW" => Some(Layout::Nchw),
            "NHWC" => Some(Layout::Nhwc),
            _ => None,
        }
    }
    /// The axis of the channels.
    pub fn channel_axis(self) -> i64 {
        match self {
            Layout::Nchw => 1,
            Layout::Nhwc => 3,
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The data layout of a 5-D (volumetric) activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout3d {
    Ncdhw,
    Ndhwc,
}

impl Layout3d {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout3d::Ncdhw => "NCDHW",
            Layout3d::Ndhwc => "NDHWC",
        }
    }
    /// The axis of the channels.
    pub fn channel_axis(self) -> i64 {
        match self {
            Layout3d::Ncdhw => 1,
            Layout3d::Ndhwc => 4,
        }
    }
}

/// Elementwise functions of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unary {
    Relu,
    Sigmoid,
    Tanh,
    Exp,
    Sqrt,
    Erf,
    Gelu,
}

/// Elementwise functions of two arguments, with numpy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

/// A network operator and its attributes.
#[derive(Clone, Debug)]
pub enum Op {
    /// A named input of the network.
    Input,
    /// A constant (a weight).
    Constant(Arc<NDArray>),
    /// 2-D convolution: `data`, `weight` (OIHW for NCHW data, HWIO for NHWC data, I =
    /// input channels / groups). Depthwise when groups = input channels and I = 1.
    Conv2d {
        attrs: Conv2dAttrs,
        layout: Layout,
    },
    /// 3-D convolution: `data`, `weight` (OIDHW for NCDHW data, DHWIO for NDHWC data,
    /// I = input channels / groups).
    Conv3d {
        attrs: Conv3dAttrs,
        layout: Layout3d,
    },
    /// `data[.., K] · weight[N, K]ᵀ` (TVM's dense).
    Dense,
    /// `a[.., M, K] · b[.., K, N]`: 2-D or batched (3-D) matrix product.
    MatMul,
    /// `data + bias` with the 1-D bias along `axis`.
    BiasAdd {
        axis: i64,
    },
    /// Batch normalization at inference: `x, gamma, beta, mean, var`.
    BatchNorm {
        epsilon: f64,
        axis: i64,
    },
    Unary(Unary),
    /// Clamps to `[min, max]` (ReLU6 is `Clip { 0, 6 }`).
    Clip {
        min: f64,
        max: f64,
    },
    Binary(Binary),
    /// Max or average 2-D pooling; the layout is in the attributes.
    Pool2d {
        kind: PoolType,
        attrs: Pool2dAttrs,
    },
    /// Global max or average pooling to 1×1.
    GlobalPool2d {
        kind: PoolType,
        layout: Layout,
    },
    /// Max or average 3-D pooling; the layout is in the attributes.
    Pool3d {
        kind: PoolType,
        attrs: Pool3dAttrs,
    },
    /// Global max or average 3-D pooling to 1×1×1.
    GlobalPool3d {
        kind: PoolType,
        layout: Layout3d,
    },
    Softmax {
        axis: i64,
    },
    Concat {
        axis: i64,
    },
    /// Flattens all axes after the first (TVM's batch_flatten).
    Flatten,
    /// To a fully known shape (no `-1` or `0` left).
    Reshape {
        shape: Vec<i64>,
    },
    Transpose {
        axes: Vec<i64>,
    },
    /// Constant padding of every axis.
    Pad {
        before: Vec<i64>,
        after: Vec<i64>,
        value: f64,
    },
    /// Between two data layouts (e.g. `NCHW` and `NHWC`, or VTA's `NCHW1n16c`).
    LayoutTransform {
        src: String,
        dst: String,
    },
    /// Conversion to another element type (TVM's `cast`).
    Cast {
        dtype: DataType,
    },
    /// Arithmetic right shift of an integer tensor by `bits`; with `round`, half of the
    /// last step is added first (round half up), as VTA's requantization does.
    RightShift {
        bits: i64,
        round: bool,
    },
    /// Float to int8 at `scale` (TVM's realized `simulated_quantize`):
    /// `clip(round(x / scale), -127, 127)`.
    Quantize {
        scale: f64,
    },
    /// Integer to float32 at `scale`: `x · scale`.
    Dequantize {
        scale: f64,
    },
    /// The identity, where fusion must stop (TVM's `annotation.stop_fusion`): the
    /// requantized output of a convolution ends its group, so that an accelerator's
    /// kernel computes exactly the convolution and its epilogue.
    StopFusion,
    /// An int8 convolution accumulated in int32 (one group, no dilation): data NCHW and
    /// weight OIHW, or VTA's packed data `[N, CI, H, W, bn, bc]` and weight
    /// `[CO, CI, KH, KW, bo, bc]` (te's `conv2d_packed_int8`; the 4-D form is that with
    /// 1×1 blocks).
    Conv2dInt8 {
        stride: (i64, i64),
        padding: (i64, i64),
    },
    /// A 3×3, stride-1 conv2d computed with Winograd F(m×m, 3×3) (te's
    /// `conv2d_winograd_nhwc_blocked`): data NHWC, weight transformed and blocked at
    /// build time, `[α, α, CO/b, CI, b]` with α = `tile` + 2
    /// ([`crate::winograd::winograd_convolutions`]).
    Conv2dWinograd {
        padding: [i64; 4],
        tile: i64,
    },
}

/// How an operator fuses with its neighbours (TVM's `OpPatternKind`, coarsened).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pattern {
    /// One output element from the same-index input elements (and broadcast ones).
    ElemWise,
    /// Each output element from one input element (reshape, transpose, pad, concat).
    Injective,
    /// A reduction (pooling): fusable after elementwise producers, ends its group.
    Reduce,
    /// conv2d / dense / matmul: elementwise and injective consumers fuse into its output.
    OutFusable,
    /// Fuses with nothing (softmax).
    Opaque,
}

impl Op {
    /// A short name in TVM's style (`conv2d`, `add`, `max_pool2d`…), used in messages
    /// and in the names of fused functions.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input => "input",
            Op::Constant(_) => "constant",
            Op::Conv2d { .. } => "conv2d",
            Op::Conv3d { .. } => "conv3d",
            Op::Dense => "dense",
            Op::MatMul => "matmul",
            Op::BiasAdd { .. } => "bias_add",
            Op::BatchNorm { .. } => "batch_norm",
            Op::Unary(u) => match u {
                Unary::Relu => "relu",
                Unary::Sigmoid => "sigmoid",
                Unary::Tanh => "tanh",
                Unary::Exp => "exp",
                Unary::Sqrt => "sqrt",
                Unary::Erf => "erf",
                Unary::Gelu => "gelu",
            },
            Op::Clip { .. } => "clip",
            Op::Binary(b) => match b {
                Binary::Add => "add",
                Binary::Sub => "subtract",
                Binary::Mul => "multiply",
                Binary::Div => "divide",
                Binary::Max => "maximum",
                Binary::Min => "minimum",
            },
            Op::Pool2d { kind, .. } => match kind {
                PoolType::Max => "max_pool2d",
                PoolType::Avg => "avg_pool2d",
            },
            Op::GlobalPool2d { kind, .. } => match kind {
                PoolType::Max => "global_max_pool2d",
                PoolType::Avg => "global_avg_pool2d",
            },
            Op::Pool3d { kind, .. } => match kind {
                PoolType::Max => "max_pool3d",
                PoolType::Avg => "avg_pool3d",
            },
            Op::GlobalPool3d { kind, .. } => match kind {
                PoolType::Max => "global_max_pool3d",
                PoolType::Avg => "global_avg_pool3d",
            },
            Op::Softmax { .. } => "softmax",
            Op::Concat { .. } => "concatenate",
            Op::Flatten => "batch_flatten",
            Op::Reshape { .. } => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Pad { .. } => "pad",
            Op::LayoutTransform { .. } => "layout_transform",
            Op::Cast { .. } => "cast",
            Op::RightShift { .. } => "right_shift",
            Op::Quantize { .. } => "quantize",
            Op::Dequantize { .. } => "dequantize",
            Op::Conv2dInt8 { .. } => "conv2d_int8",
            Op::Conv2dWinograd { .. } => "conv2d_winograd",
            Op::StopFusion => "stop_fusion",
        }
    }

    /// The number of inputs the operator takes (`None`: one or more).
    pub fn arity(&self) -> Option<usize> {
        Some(match self {
            Op::Input | Op::Constant(_) => 0,
            Op::Conv2d { .. }
            | Op::Conv3d { .. }
            | Op::Conv2dInt8 { .. }
            | Op::Conv2dWinograd { .. }
            | Op::Dense
            | Op::MatMul
            | Op::BiasAdd { .. }
            | Op::Binary(_) => 2,
            Op::BatchNorm { .. } => 5,
            Op::Concat { .. } => return None,
            _ => 1,
        })
    }

    /// The operator's fusion pattern (`None` for inputs and constants).
    pub fn pattern(&self) -> Option<Pattern> {
        Some(match self {
            Op::Input | Op::Constant(_) => return None,
            Op::Conv2d { .. }
            | Op::Conv3d { .. }
            | Op::Conv2dInt8 { .. }
            | Op::Conv2dWinograd { .. }
            | Op::Dense
            | Op::MatMul => Pattern::OutFusable,
            Op::BiasAdd { .. }
            | Op::BatchNorm { .. }
            | Op::Unary(_)
            | Op::Clip { .. }
            | Op::Binary(_)
            | Op::Cast { .. }
            | Op::RightShift { .. }
            | Op::Quantize { .. }
            | Op::Dequantize { .. } => Pattern::ElemWise,
            Op::Pool2d { .. }
            | Op::GlobalPool2d { .. }
            | Op::Pool3d { .. }
            | Op::GlobalPool3d { .. } => Pattern::Reduce,
            Op::Softmax { .. } | Op::StopFusion => Pattern::Opaque,
            Op::Concat { .. }
            | Op::Flatten
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Pad { .. }
            | Op::LayoutTransform { .. } => Pattern::Injective,
        })
    }

    /// Whether a conv2d with these input types is depthwise (groups = input channels,
    /// one input channel per group).
    pub fn is_depthwise(&self, data: &[i64], weight: &[i64]) -> bool {
        match self {
            Op::Conv2d { attrs, layout } => {
                let (cin, kin) = match layout {
                    Layout::Nchw => (data[1], weight[1]),
                    Layout::Nhwc => (data[3], weight[2]),
                };
                attrs.groups > 1 && attrs.groups == cin && kin == 1
            }
            _ => false,
        }
    }

    /// The shape under which input `slot` (of shape `shape`) is read by [`Op::compute`]
    /// when it differs from its own: a depthwise weight is read as `[C, M, KH, KW]`
    /// (NCHW) or `[KH, KW, C, M]` (NHWC), the same memory as its OIHW / HWIO form.
    pub fn input_view(&self, slot: usize, inputs: &[&[i64]]) -> Option<Vec<i64>> {
        if slot != 1 || inputs.len() != 2 || !self.is_depthwise(inputs[0], inputs[1]) {
            return None;
        }
        let w = inputs[1];
        Some(match self {
            Op::Conv2d {
                layout: Layout::Nchw,
                attrs,
            } => vec![attrs.groups, w[0] / attrs.groups, w[2], w[3]],
            Op::Conv2d { attrs, .. } => vec![w[0], w[1], attrs.groups, w[3] / attrs.groups],
            _ => return None,
        })
    }

    /// The operator's tensor expression on `inputs` (already in their
    /// [`input_view`](Self::input_view) shapes).
    pub fn compute(&self, inputs: &[Tensor]) -> Result<Tensor, TeError> {
        let x = || &inputs[0];
        match self {
            Op::Input | Op::Constant(_) => Ok(inputs[0].clone()),
            Op::Conv2d { attrs, layout } => {
                let (d, w) = (&inputs[0], &inputs[1]);
                // A weight in its depthwise view ([C, M, KH, KW] / [KH, KW, C, M]) has the
                // channel count where the grouped form has 1; with M = 1 (NCHW) the two
                // forms coincide. A grouped-form weight computes the same as a grouped conv.
                let c = d.shape()[layout.channel_axis() as usize];
                let wc = match layout {
                    Layout::Nchw => w.shape()[0],
                    Layout::Nhwc => w.shape()[2],
                };
                let depthwise = attrs.groups > 1 && attrs.groups == c && wc == c;
                match (layout, depthwise) {
                    (Layout::Nchw, true) => ops::depthwise_conv2d_nchw(d, w, attrs),
                    (Layout::Nhwc, true) => ops::depthwise_conv2d_nhwc(d, w, attrs),
                    (Layout::Nchw, false) => ops::conv2d_nchw(d, w, attrs),
                    (Layout::Nhwc, false) => ops::conv2d_nhwc_with(d, w, attrs),
                }
            }
            Op::Conv3d { attrs, layout } => match layout {
                Layout3d::Ncdhw => ops::conv3d_ncdhw(&inputs[0], &inputs[1], attrs),
                Layout3d::Ndhwc => ops::conv3d_ndhwc(&inputs[0], &inputs[1], attrs),
            },
            Op::Dense => ops::dense(&inputs[0], &inputs[1], None),
            Op::MatMul => {
                if inputs[0].ndim() == 2 && inputs[1].ndim() == 2 {
                    ops::matmul(&inputs[0], &inputs[1])
                } else {
                    ops::batch_matmul_with(&inputs[0], &inputs[1], false, false)
                }
            }
            Op::BiasAdd { axis } => ops::bias_add(&inputs[0], &inputs[1], *axis),
            Op::BatchNorm { epsilon, axis } => ops::batch_norm_inference(
                &inputs[0], &inputs[1], &inputs[2], &inputs[3], &inputs[4], *axis, *epsilon,
            ),
            Op::Unary(u) => match u {
                Unary::Relu => ops::relu(x()),
                Unary::Sigmoid => ops::sigmoid(x()),
                Unary::Tanh => ops::tanh(x()),
                Unary::Exp => ops::exp(x()),
                Unary::Sqrt => ops::sqrt(x()),
                Unary::Erf => ops::erf(x()),
                Unary::Gelu => ops::gelu(x()),
            },
            Op::Clip { min, max } => ops::clip(x(), *min, *max),
            Op::Binary(b) => {
                let (a, c) = (&inputs[0], &inputs[1]);
                match b {
                    Binary::Add => ops::add(a, c),
                    Binary::Sub => ops::subtract(a, c),
                    Binary::Mul => ops::multiply(a, c),
                    Binary::Div => ops::divide(a, c),
                    Binary::Max => ops::maximum(a, c),
                    Binary::Min => ops::minimum(a, c),
                }
            }
            Op::Pool2d { kind, attrs } => ops::pool2d(x(), *kind, attrs),
            Op::GlobalPool2d { kind, layout } => ops::global_pool(x(), *kind, layout.as_str()),
            Op::Pool3d { kind, attrs } => ops::pool3d(x(), *kind, attrs),
            Op::GlobalPool3d { kind, layout } => ops::global_pool3d(x(), *kind, layout.as_str()),
            Op::Softmax { axis } => ops::softmax_axis(x(), *axis),
            Op::Concat { axis } => ops::concatenate(inputs, *axis),
            Op::Flatten => ops::flatten(x()),
            Op::Reshape { shape } => ops::reshape(x(), shape),
            Op::Transpose { axes } => ops::transpose(x(), axes),
            Op::Pad {
                before,
                after,
                value,
            } => ops::pad_with(x(), before, after, *value, "T_pad"),
            Op::LayoutTransform { src, dst } => ops::layout_transform(x(), src, dst),
            Op::Cast { dtype } => ops::cast(x(), *dtype),
            Op::RightShift { bits, round } => {
                if *round && *bits > 0 {
                    let half = tessera_ir::Expr::int_of(x().dtype(), 1i64 << (bits - 1));
                    ops::right_shift(&ops::add_scalar(x(), half)?, *bits)
                } else {
                    ops::right_shift(x(), *bits)
                }
            }
            Op::Quantize { scale } => ops::quantize_int8(x(), *scale),
            Op::Dequantize { scale } => ops::dequantize(x(), *scale),
            Op::Conv2dInt8 { stride, padding } => conv2d_int8(inputs, *stride, *padding),
            Op::Conv2dWinograd { padding, tile } => {
                ops::conv2d_winograd_nhwc_blocked(&inputs[0], &inputs[1], *padding, *tile)
            }
            Op::StopFusion => ops::cast(x(), x().dtype()),
        }
    }
}

/// [`Op::Conv2dInt8`]: the packed form directly; NCHW / OIHW as the packed form with
/// 1×1 blocks (reshapes around it, which the schedule inlines).
fn conv2d_int8(
    inputs: &[Tensor],
    stride: (i64, i64),
    padding: (i64, i64),
) -> Result<Tensor, TeError> {
    let (d, w) = (&inputs[0], &inputs[1]);
    if d.ndim() != 4 || w.ndim() != 4 {
        // the packed form (its own checks name a wrong rank)
        return ops::conv2d_packed_int8(d, w, stride, padding);
    }
    let blocked = |t: &Tensor| {
        let mut s = t.shape().to_vec();
        s.extend([1, 1]);
        ops::reshape(t, &s)
    };
    let out = ops::conv2d_packed_int8(&blocked(d)?, &blocked(w)?, stride, padding)?;
    ops::reshape(&out, &out.shape()[..4])
}

/// A node: its name, operator and output type.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub ty: TensorType,
}

/// A network: operator nodes with typed outputs, in a petgraph graph whose edges carry
/// the consumer's input slot, plus the ordered inputs and outputs.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub name: String,
    g: StableDiGraph<Node, usize>,
    inputs: Vec<NodeIndex>,
    outputs: Vec<NodeIndex>,
}

impl Graph {
    pub fn new(name: &str) -> Graph {
        Graph {
            name: name.to_string(),
            ..Graph::default()
        }
    }

    /// Adds a named network input.
    pub fn input(&mut self, name: &str, ty: TensorType) -> NodeIndex {
        let n = self.g.add_node(Node {
            name: name.to_string(),
            op: Op::Input,
            ty,
        });
        self.inputs.push(n);
        n
    }

    /// Adds a constant.
    pub fn constant(&mut self, name: &str, value: NDArray) -> NodeIndex {
        let ty = TensorType::new(
            &value.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
            value.dtype(),
        );
        self.g.add_node(Node {
            name: name.to_string(),
            op: Op::Constant(Arc::new(value)),
            ty,
        })
    }

    /// Adds an operator node on `inputs`, inferring its output type (an error names the
    /// node and the operator).
    pub fn op(
        &mut self,
        name: &str,
        op: Op,
        inputs: &[NodeIndex],
    ) -> Result<NodeIndex, GraphError> {
        let ty = self.infer(name, &op, inputs)?;
        let n = self.g.add_node(Node {
            name: name.to_string(),
            op,
            ty,
        });
        for (slot, &i) in inputs.iter().enumerate() {
            self.g.add_edge(i, n, slot);
        }
        Ok(n)
    }

    /// The output type `op` would have on `inputs`.
    pub fn infer(
        &self,
        name: &str,
        op: &Op,
        inputs: &[NodeIndex],
    ) -> Result<TensorType, GraphError> {
        let arity_ok = match op.arity() {
            Some(k) => inputs.len() == k,
            None => !inputs.is_empty(),
        };
        if !arity_ok {
            return Err(GraphError::Arity {
                node: name.to_string(),
                op: op.name().to_string(),
                expected: op.arity().map_or("at least 1".into(), |k| k.to_string()),
                got: inputs.len(),
            });
        }
        for &i in inputs {
            if !self.g.contains_node(i) {
                return Err(GraphError::Invalid(format!(
                    "node `{name}`: input {} is not in the graph",
                    i.index()
                )));
            }
        }
        let shapes: Vec<&[i64]> = inputs.iter().map(|&i| &self.g[i].ty.shape[..]).collect();
        let infer_err = |source| GraphError::Infer {
            node: name.to_string(),
            op: op.name().to_string(),
            source: Box::new(source),
        };
        let mut ts = Vec::with_capacity(inputs.len());
        for (slot, &i) in inputs.iter().enumerate() {
            let shape = op
                .input_view(slot, &shapes)
                .unwrap_or_else(|| shapes[slot].to_vec());
            ts.push(
                placeholder(&shape, self.g[i].ty.dtype, &format!("p{slot}")).map_err(infer_err)?,
            );
        }
        let out = op.compute(&ts).map_err(infer_err)?;
        Ok(TensorType::new(out.shape(), out.dtype()))
    }

    /// Marks `n` as a network output.
    pub fn mark_output(&mut self, n: NodeIndex) {
        self.outputs.push(n);
    }

    pub fn inputs(&self) -> &[NodeIndex] {
        &self.inputs
    }
    pub fn outputs(&self) -> &[NodeIndex] {
        &self.outputs
    }
    pub fn set_outputs(&mut self, outputs: Vec<NodeIndex>) {
        self.outputs = outputs;
    }
    pub fn node(&self, n: NodeIndex) -> &Node {
        &self.g[n]
    }
    pub fn node_mut(&mut self, n: NodeIndex) -> &mut Node {
        &mut self.g[n]
    }
    pub fn contains(&self, n: NodeIndex) -> bool {
        self.g.contains_node(n)
    }
    /// The number of nodes (inputs and constants included).
    pub fn len(&self) -> usize {
        self.g.node_count()
    }
    pub fn is_empty(&self) -> bool {
        self.g.node_count() == 0
    }
    /// The underlying petgraph graph.
    pub fn petgraph(&self) -> &StableDiGraph<Node, usize> {
        &self.g
    }

    /// The input nodes of `n`, in slot order.
    pub fn args(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut es: Vec<(usize, NodeIndex)> = self
            .g
            .edges_directed(n, Direction::Incoming)
            .map(|e| (*e.weight(), e.source()))
            .collect();
        es.sort();
        es.into_iter().map(|(_, s)| s).collect()
    }

    /// The consumers of `n`, once per use, in node order.
    pub fn users(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut us: Vec<NodeIndex> = self
            .g
            .edges_directed(n, Direction::Outgoing)
            .map(|e| e.target())
            .collect();
        us.sort();
        us
    }

    /// The nodes in a topological order: by insertion among the ready ones, so the order
    /// is deterministic and follows how the network was written.
    pub fn topo_order(&self) -> Vec<NodeIndex> {
        let mut indeg: std::collections::HashMap<NodeIndex, usize> = self
            .g
            .node_indices()
            .map(|n| (n, self.g.edges_directed(n, Direction::Incoming).count()))
            .collect();
        let mut ready: std::collections::BTreeSet<NodeIndex> = indeg
            .iter()
            .filter(|(_, &d)| d == 0)
            .map(|(&n, _)| n)
            .collect();
        let mut order = Vec::with_capacity(self.g.node_count());
        while let Some(n) = ready.pop_first() {
            order.push(n);
            for e in self.g.edges_directed(n, Direction::Outgoing) {
                let d = indeg.get_mut(&e.target()).expect("a node of the graph");
                *d -= 1;
                if *d == 0 {
                    ready.insert(e.target());
                }
            }
        }
        order
    }

    /// Replaces every use of `old` (as an input and as a network output) by `new`.
    pub fn replace_uses(&mut self, old: NodeIndex, new: NodeIndex) {
        let uses: Vec<(petgraph::stable_graph::EdgeIndex, NodeIndex, usize)> = self
            .g
            .edges_directed(old, Direction::Outgoing)
            .map(|e| (e.id(), e.target(), *e.weight()))
            .collect();
        for (e, target, slot) in uses {
            self.g.remove_edge(e);
            self.g.add_edge(new, target, slot);
        }
        for o in self.outputs.iter_mut() {
            if *o == old {
                *o = new;
            }
        }
    }

    /// Removes a node and its edges.
    pub fn remove(&mut self, n: NodeIndex) {
        self.g.remove_node(n);
        self.inputs.retain(|&i| i != n);
    }

    /// The constant value of `n`, if it is a constant.
    pub fn constant_value(&self, n: NodeIndex) -> Option<&Arc<NDArray>> {
        match &self.g[n].op {
            Op::Constant(v) => Some(v),
            _ => None,
        }
    }

    /// Checks the graph: at least one output, every output a node of the graph, no
    /// cycle, unique input names.
    pub fn validate(&self) -> Result<(), GraphError> {
        if self.outputs.is_empty() {
            return Err(GraphError::Invalid(format!(
                "network `{}` has no output",
                self.name
            )));
        }
        if let Some(o) = self.outputs.iter().find(|&&o| !self.g.contains_node(o)) {
            return Err(GraphError::Invalid(format!(
                "output node {} is not in the graph",
                o.index()
            )));
        }
        if self.topo_order().len() != self.g.node_count() {
            return Err(GraphError::Invalid(format!(
                "network `{}` has a cycle",
                self.name
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for &i in &self.inputs {
            if !seen.insert(&self.g[i].name) {
                return Err(GraphError::Invalid(format!(
                    "two inputs are named `{}`",
                    self.g[i].name
                )));
            }
        }
        Ok(())
    }

    /// Counts the operator nodes by operator name (inputs and constants excluded).
    pub fn op_counts(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut m = std::collections::BTreeMap::new();
        for n in self.g.node_indices() {
            if self.g[n].op.pattern().is_some() {
                *m.entry(self.g[n].op.name()).or_insert(0) += 1;
            }
        }
        m
    }

    /// The total number of weight elements (all constants).
    pub fn num_params(&self) -> usize {
        self.g
            .node_indices()
            .filter_map(|n| self.constant_value(n).map(|v| v.len()))
            .sum()
    }
}

impl fmt::Display for Graph {
    /// One line per operator node in topological order:
    /// `%name = op(%a, %b) : float32[1, 64, 56, 56]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "network {}", self.name)?;
        for &i in &self.inputs {
            writeln!(f, "  input %{} : {}", self.g[i].name, self.g[i].ty)?;
        }
        for n in self.topo_order() {
            let node = &self.g[n];
            if node.op.pattern().is_none() {
                continue;
            }
            let args: Vec<String> = self
                .args(n)
                .iter()
                .map(|&a| match self.g[a].op {
                    Op::Constant(_) => format!("${}", self.g[a].name),
                    _ => format!("%{}", self.g[a].name),
                })
                .collect();
            writeln!(
                f,
                "  %{} = {}({}) : {}",
                node.name,
                node.op.name(),
                args.join(", "),
                node.ty
            )?;
        }
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|&o| format!("%{}", self.g[o].name))
            .collect();
        writeln!(f, "  return {}", outs.join(", "))
    }
}
