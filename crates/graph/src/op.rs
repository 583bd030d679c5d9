//! The operators of the network IR: [`Op`] with its attributes, the elementwise
//! function families ([`Unary`], [`Binary`]), each operator's fusion [`Pattern`], and its
//! tensor expression ([`Op::compute`]), the one definition that type inference, the
//! reference evaluation and every kernel share.

use crate::ir::{Layout, Layout3d};
use std::sync::Arc;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{
    self, Activation, BinaryFn, Conv2dAttrs, Conv3dAttrs, Cumulative, LrnAttrs, MathFn, PadMode,
    Pool2dAttrs, Pool3dAttrs, PoolType, ReduceKind, ResizeAttrs, ScatterReduction,
};
use tessera_te::{TeError, Tensor};

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
    /// The int32 product `data[M, K] · weightᵀ` of uint8 data (int8 data offset by 128)
    /// and an int8 weight held as int32 words of four bytes along `K`, `[N, ⌈K/4⌉]` or
    /// packed `[N/b, ⌈K/4⌉, b]` (te's `dense_u8i8`): the integer core of the quantized
    /// matrix products, on the CPU's `vpdpbusd`. `sums`: exact, exact on the shorter
    /// form where the weight's byte pairs fit int16 (7-bit weights do), or saturating
    /// as onnxruntime's where the import was asked to.
    DenseU8I8 {
        sums: tessera_te::ops::Int8Sums,
    },
    /// The int32 convolution of one group of NHWC uint8 data (int8 offset by 128) and an
    /// int8 weight in words along its input channels, `[O, KH, KW, ⌈C/4⌉]` or packed
    /// `[O/b, KH, KW, ⌈C/4⌉, b]` (te's `conv2d_nhwc_u8i8`), padded with bytes `pad` (a
    /// quantized convolution's data zero point); `sums` as [`Op::DenseU8I8`]'s.
    Conv2dU8I8 {
        attrs: Conv2dAttrs,
        pad: i64,
        sums: tessera_te::ops::Int8Sums,
    },
    /// The int32 depthwise convolution (one output channel per channel) of NHWC uint8 or
    /// int8 data padded with `pad` (the data's zero point) and an int32 kernel `[KH, KW,
    /// C, 1]` of int8 values (te's `depthwise_conv2d_nhwc_u8i8`): a QDQ depthwise
    /// convolution's integer core, exact, reading the bytes.
    DepthwiseU8I8 {
        attrs: Conv2dAttrs,
        pad: i64,
    },
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
    /// 2-D transposed convolution: data NCHW, weight IOHW (one group).
    Conv2dTranspose {
        stride: (i64, i64),
        padding: [i64; 4],
        output_padding: (i64, i64),
    },
    /// A function of one argument without parameters (abs, sign, rounding, softplus…).
    Math(MathFn),
    /// An activation with parameters (leaky ReLU, ELU, SELU, hard sigmoid…).
    Activation(Activation),
    /// Power, PReLU, comparisons and logic, with NumPy broadcasting.
    BinaryFn(BinaryFn),
    /// `cond ? a : b`: `cond`, `a`, `b`, broadcast together.
    Where,
    /// A reduction over `axes` (empty: all).
    Reduce {
        kind: ReduceKind,
        axes: Vec<i64>,
        keepdims: bool,
    },
    /// NumPy slicing per axis (negative steps walk backwards).
    StridedSlice {
        begin: Vec<i64>,
        end: Vec<i64>,
        strides: Vec<i64>,
    },
    /// Broadcast to `shape` (with the input's own shape, NumPy rules).
    BroadcastTo {
        shape: Vec<i64>,
    },
    /// Repeated `reps[d]` times along each dimension.
    Tile {
        reps: Vec<i64>,
    },
    /// `data`, `indices`: the elements of `data` along `axis` at `indices`.
    Take {
        axis: i64,
    },
    /// Padding by reflection or by the edge element.
    PadBorder {
        before: Vec<i64>,
        after: Vec<i64>,
        mode: PadMode,
    },
    /// Local response normalization across the channels (axis 1).
    Lrn(LrnAttrs),
    /// Instance normalization: `x`, `scale`, `bias` (per channel, axis 1).
    InstanceNorm {
        epsilon: f64,
        /// The data is `[N, …, C]` (an NHWC value), not `[N, C, …]`.
        channels_last: bool,
    },
    /// Layer normalization over `axes` (ONNX's `LayerNormalization`: the axes from
    /// `axis` on): `x`, `gamma`, `beta`, the last two shaped as those axes.
    LayerNorm {
        axes: Vec<i64>,
        epsilon: f64,
    },
    /// Log-softmax over `axis`.
    LogSoftmax {
        axis: i64,
    },
    /// Resize of the last two axes.
    Resize(ResizeAttrs),
    /// `data` sampled at the coordinates of `grid` (ONNX's `GridSample`).
    GridSample(ops::GridSampleAttrs),
    /// `softmax(q · kt · scale + bias) · v` over the last axis of the scores: `q [B, M,
    /// K]`, `kt [B, K, N]`, `v [B, N, D]`, `bias` broadcasting to `[B, M, N]` (te's
    /// `attention`; made by [`crate::attention::fuse_attention`]).
    Attention {
        scale: f64,
    },
    /// `data`, `indices` of `data`'s rank: `data` at `indices` along `axis` (ONNX's
    /// `GatherElements`).
    GatherElements {
        axis: i64,
    },
    /// `data`, `indices`: slices of `data` at the index tuples of `indices`' last axis,
    /// after `batch_dims` batch axes (ONNX's `GatherND`).
    GatherNd {
        batch_dims: usize,
    },
    /// `data`, `indices`, `updates`: `data` with `updates` written at `indices` along
    /// `axis`, combined by `reduction` (ONNX's `ScatterElements`).
    ScatterElements {
        axis: i64,
        reduction: ScatterReduction,
    },
    /// `data` with slices of `updates` written at `indices` (ONNX's `ScatterND`), the
    /// indices as `[n, k]` and the updates as `[n, data[k..]]`.
    ScatterNd {
        reduction: ScatterReduction,
    },
    /// The upper or lower triangle of the last two axes from diagonal `k` (ONNX's
    /// `Trilu`).
    Trilu {
        k: i64,
        upper: bool,
    },
    /// A running sum or product along `axis` (ONNX's `CumSum`, `CumProd`).
    Cumulative {
        axis: i64,
        how: Cumulative,
    },
    /// The one-hot encoding of integer indices, a new axis of `depth` at `axis`.
    OneHot {
        depth: i64,
        axis: i64,
        on: f64,
        off: f64,
        dtype: DataType,
    },
    /// The position of the largest (`largest`) or smallest element along `axis`, the
    /// last of equal ones with `last` (ONNX's `ArgMax`, `ArgMin`).
    ArgExtreme {
        axis: i64,
        keepdims: bool,
        largest: bool,
        last: bool,
    },
    /// The `k` largest (`largest`) or smallest elements along `axis`, sorted, or their
    /// positions (ONNX's `TopK`, one node per output used).
    TopK {
        axis: i64,
        k: i64,
        largest: bool,
        output: ops::TopKOutput,
        /// Run as a host step on every target, not only the CPU (its k follows a count:
        /// [`crate::counted::with_top_k_counts`]).
        on_host: bool,
    },
    /// An operator whose output size depends on the data ([`crate::selection`]), built
    /// with its count dimension at `count`: a host step on every target, which tells
    /// the module's runtime size `size` (set by [`crate::dynamic::compile_dynamic`]).
    Select {
        how: crate::selection::Selection,
        count: i64,
        size: Option<usize>,
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
            Op::DenseU8I8 { .. } => "dense_u8i8",
            Op::Conv2dU8I8 { .. } => "conv2d_u8i8",
            Op::DepthwiseU8I8 { .. } => "depthwise_u8i8",
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
            Op::Conv2dTranspose { .. } => "conv2d_transpose",
            Op::Math(f) => f.name(),
            Op::Activation(a) => a.name(),
            Op::BinaryFn(f) => f.name(),
            Op::Where => "where",
            Op::Reduce { kind, .. } => kind.name(),
            Op::StridedSlice { .. } => "strided_slice",
            Op::BroadcastTo { .. } => "broadcast_to",
            Op::Tile { .. } => "tile",
            Op::Take { .. } => "take",
            Op::PadBorder { .. } => "pad",
            Op::Lrn(_) => "lrn",
            Op::InstanceNorm { .. } => "instance_norm",
            Op::LayerNorm { .. } => "layer_norm",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::Resize(_) => "resize2d",
            Op::GridSample(_) => "grid_sample",
            Op::Attention { .. } => "attention",
            Op::GatherElements { .. } => "gather_elements",
            Op::GatherNd { .. } => "gather_nd",
            Op::ScatterElements { .. } => "scatter_elements",
            Op::ScatterNd { .. } => "scatter_nd",
            Op::Trilu { .. } => "trilu",
            Op::Cumulative { how, .. } => {
                if how.product {
                    "cumprod"
                } else {
                    "cumsum"
                }
            }
            Op::OneHot { .. } => "one_hot",
            Op::ArgExtreme { largest, .. } => {
                if *largest {
                    "argmax"
                } else {
                    "argmin"
                }
            }
            Op::TopK { .. } => "topk",
            Op::Select { how, .. } => how.name(),
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
            | Op::DenseU8I8 { .. }
            | Op::Conv2dU8I8 { .. }
            | Op::DepthwiseU8I8 { .. }
            | Op::MatMul
            | Op::BiasAdd { .. }
            | Op::Binary(_)
            | Op::Conv2dTranspose { .. }
            | Op::BinaryFn(_)
            | Op::Take { .. }
            | Op::GatherElements { .. }
            | Op::GatherNd { .. }
            | Op::GridSample(_) => 2,
            Op::Where
            | Op::InstanceNorm { .. }
            | Op::LayerNorm { .. }
            | Op::ScatterElements { .. }
            | Op::ScatterNd { .. } => 3,
            Op::BatchNorm { .. } => 5,
            Op::Attention { .. } => 4,
            Op::Concat { .. } => return None,
            Op::Select { how, .. } => how.arity(),
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
            | Op::Conv2dTranspose { .. }
            | Op::Dense
            | Op::DenseU8I8 { .. }
            | Op::Conv2dU8I8 { .. }
            | Op::DepthwiseU8I8 { .. }
            | Op::MatMul
            | Op::Attention { .. } => Pattern::OutFusable,
            Op::BiasAdd { .. }
            | Op::BatchNorm { .. }
            | Op::Unary(_)
            | Op::Clip { .. }
            | Op::Binary(_)
            | Op::Cast { .. }
            | Op::RightShift { .. }
            | Op::Quantize { .. }
            | Op::Dequantize { .. }
            | Op::Math(_)
            | Op::Activation(_)
            | Op::BinaryFn(_)
            | Op::Where
            | Op::Trilu { .. } => Pattern::ElemWise,
            Op::Pool2d { .. }
            | Op::GlobalPool2d { .. }
            | Op::Pool3d { .. }
            | Op::GlobalPool3d { .. }
            | Op::Reduce { .. }
            | Op::Cumulative { .. }
            | Op::ArgExtreme { .. } => Pattern::Reduce,
            Op::Softmax { .. }
            | Op::StopFusion
            | Op::Lrn(_)
            | Op::InstanceNorm { .. }
            | Op::LayerNorm { .. }
            | Op::LogSoftmax { .. }
            | Op::ScatterElements { .. }
            | Op::ScatterNd { .. }
            | Op::TopK { .. }
            | Op::Select { .. } => Pattern::Opaque,
            Op::Concat { .. }
            | Op::Flatten
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Pad { .. }
            | Op::LayoutTransform { .. }
            | Op::StridedSlice { .. }
            | Op::BroadcastTo { .. }
            | Op::Tile { .. }
            | Op::Take { .. }
            | Op::PadBorder { .. }
            | Op::Resize(_)
            | Op::GridSample(_)
            | Op::GatherElements { .. }
            | Op::GatherNd { .. }
            | Op::OneHot { .. } => Pattern::Injective,
        })
    }

    /// Whether a conv2d with these input types is depthwise (groups = input channels,
    /// one input channel per group).
    pub fn is_depthwise(&self, data: &[i64], weight: &[i64]) -> bool {
        match self {
            Op::Conv2d { attrs, layout } => {
                // (a weight packed by output-channel blocks, 5-D, is never depthwise)
                let (cin, kin) = match (layout, data, weight) {
                    (Layout::Nchw, &[_, c, ..], &[_, i, _, _]) => (c, i),
                    (Layout::Nhwc, &[_, _, _, c], &[_, _, i, _]) => (c, i),
                    _ => return false,
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
            Op::Conv2d { attrs, layout } => conv2d(inputs, attrs, *layout),
            Op::Conv3d { attrs, layout } => conv3d(inputs, attrs, *layout),
            Op::Dense => ops::dense(&inputs[0], &inputs[1], None),
            Op::DenseU8I8 { sums } => ops::dense_u8i8(&inputs[0], &inputs[1], *sums),
            Op::DepthwiseU8I8 { attrs, pad } => {
                ops::depthwise_conv2d_nhwc_u8i8(&inputs[0], &inputs[1], attrs, *pad)
            }
            Op::Conv2dU8I8 { attrs, pad, sums } => {
                ops::conv2d_nhwc_u8i8(&inputs[0], &inputs[1], attrs, *pad, *sums)
            }
            Op::MatMul => match (inputs[0].ndim(), inputs[1].ndim()) {
                (2, 2) => ops::matmul(&inputs[0], &inputs[1]),
                _ => ops::batch_matmul_with(&inputs[0], &inputs[1], false, false),
            },
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
            Op::RightShift { bits, round } => right_shift(x(), *bits, *round),
            Op::Quantize { scale } => ops::quantize_int8(x(), *scale),
            Op::Dequantize { scale } => ops::dequantize(x(), *scale),
            Op::Conv2dInt8 { stride, padding } => conv2d_int8(inputs, *stride, *padding),
            Op::Conv2dWinograd { padding, tile } => {
                ops::conv2d_winograd_nhwc_blocked(&inputs[0], &inputs[1], *padding, *tile)
            }
            Op::StopFusion => ops::cast(x(), x().dtype()),
            Op::Conv2dTranspose {
                stride,
                padding,
                output_padding,
            } => ops::conv2d_transpose_nchw(
                &inputs[0],
                &inputs[1],
                *stride,
                *padding,
                *output_padding,
            ),
            Op::Math(f) => ops::math(x(), *f),
            Op::Activation(a) => ops::activation(x(), *a),
            Op::BinaryFn(f) => ops::binary_fn(&inputs[0], &inputs[1], *f),
            Op::Where => ops::where_(&inputs[0], &inputs[1], &inputs[2]),
            Op::Reduce {
                kind,
                axes,
                keepdims,
            } => ops::reduce(x(), *kind, axes, *keepdims),
            Op::StridedSlice {
                begin,
                end,
                strides,
            } => ops::strided_slice(x(), begin, end, strides),
            Op::BroadcastTo { shape } => ops::broadcast_to(x(), shape),
            Op::Tile { reps } => ops::tile(x(), reps),
            Op::Take { axis } => ops::take(&inputs[0], &inputs[1], *axis),
            Op::PadBorder {
                before,
                after,
                mode,
            } => ops::pad_mode(x(), before, after, *mode),
            Op::Lrn(a) => ops::lrn(x(), a),
            Op::InstanceNorm {
                epsilon,
                channels_last,
            } => {
                ops::instance_norm_in(&inputs[0], &inputs[1], &inputs[2], *epsilon, *channels_last)
            }
            Op::LayerNorm { axes, epsilon } => {
                ops::layer_norm(&inputs[0], &inputs[1], Some(&inputs[2]), axes, *epsilon)
            }
            Op::LogSoftmax { axis } => ops::log_softmax(x(), *axis),
            Op::Resize(a) => ops::resize2d(x(), a),
            Op::GridSample(a) => ops::grid_sample(&inputs[0], &inputs[1], a),
            Op::Attention { scale } => {
                ops::attention(&inputs[0], &inputs[1], &inputs[2], Some(&inputs[3]), *scale)
            }
            Op::GatherElements { axis } => ops::gather_elements(&inputs[0], &inputs[1], *axis),
            Op::GatherNd { batch_dims } => ops::gather_nd(&inputs[0], &inputs[1], *batch_dims),
            Op::ScatterElements { axis, reduction } => {
                ops::scatter_elements(&inputs[0], &inputs[1], &inputs[2], *axis, *reduction)
            }
            Op::ScatterNd { reduction } => {
                ops::scatter_nd(&inputs[0], &inputs[1], &inputs[2], *reduction)
            }
            Op::Trilu { k, upper } => ops::trilu(x(), *k, *upper),
            Op::Cumulative { axis, how } => ops::cumulative(x(), *axis, *how),
            Op::OneHot {
                depth,
                axis,
                on,
                off,
                dtype,
            } => ops::one_hot(x(), *depth, *axis, *on, *off, *dtype),
            Op::ArgExtreme {
                axis,
                keepdims,
                largest,
                last,
            } => ops::arg_extreme(x(), *axis, *keepdims, *largest, *last),
            Op::TopK {
                axis,
                k,
                largest,
                output,
                ..
            } => ops::topk(x(), *axis, *k, *largest, *output),
            Op::Select { how, count, .. } => selection_placeholder(how, *count, inputs),
        }
    }
}

/// [`Op::Conv3d`] in its layout.
fn conv3d(inputs: &[Tensor], attrs: &Conv3dAttrs, layout: Layout3d) -> Result<Tensor, TeError> {
    match layout {
        Layout3d::Ncdhw => ops::conv3d_ncdhw(&inputs[0], &inputs[1], attrs),
        Layout3d::Ndhwc => ops::conv3d_ndhwc(&inputs[0], &inputs[1], attrs),
    }
}

/// [`Op::Select`]: no expression computes a selection, so a placeholder of its output's
/// type stands for it, for type inference (a kernel reading it would name an unbound
/// buffer; a selection always runs as a host step).
fn selection_placeholder(
    how: &crate::selection::Selection,
    count: i64,
    inputs: &[Tensor],
) -> Result<Tensor, TeError> {
    let types: Vec<crate::ir::TensorType> = inputs
        .iter()
        .map(|t| crate::ir::TensorType::new(t.shape(), t.dtype()))
        .collect();
    let refs: Vec<&crate::ir::TensorType> = types.iter().collect();
    let ty = how
        .output_type(&refs, count)
        .map_err(|reason| TeError::BadShape {
            op: how.name().into(),
            shape: types.first().map(|t| t.shape.clone()).unwrap_or_default(),
            reason,
        })?;
    tessera_te::placeholder(&ty.shape, ty.dtype, how.name())
}

/// [`Op::Conv2d`]: a grouped convolution whose weight is in its depthwise view
/// (`[C, M, KH, KW]` / `[KH, KW, C, M]`, the channel count where the grouped form has 1;
/// with M = 1 in NCHW the two forms coincide) is computed as a depthwise one; a
/// grouped-form weight computes the same as a grouped conv.
fn conv2d(inputs: &[Tensor], attrs: &Conv2dAttrs, layout: Layout) -> Result<Tensor, TeError> {
    let (d, w) = (&inputs[0], &inputs[1]);
    let c = d.shape()[layout.channel_axis() as usize];
    let wc = match layout {
        Layout::Nchw => w.shape()[0],
        Layout::Nhwc => w.shape()[2],
    };
    let depthwise = attrs.groups > 1 && attrs.groups == c && wc == c && w.ndim() == 4;
    match (layout, depthwise) {
        (Layout::Nchw, true) => ops::depthwise_conv2d_nchw(d, w, attrs),
        (Layout::Nhwc, true) => ops::depthwise_conv2d_nhwc(d, w, attrs),
        (Layout::Nchw, false) => ops::conv2d_nchw(d, w, attrs),
        (Layout::Nhwc, false) => ops::conv2d_nhwc_with(d, w, attrs),
    }
}

/// [`Op::RightShift`]: with `round`, half of the last bit shifted out added first.
fn right_shift(x: &Tensor, bits: i64, round: bool) -> Result<Tensor, TeError> {
    if round && bits > 0 {
        let half = tessera_ir::Expr::int_of(x.dtype(), 1i64 << (bits - 1));
        ops::right_shift(&ops::add_scalar(x, half)?, bits)
    } else {
        ops::right_shift(x, bits)
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
