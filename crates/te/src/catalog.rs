//! The operator catalog: every operator of [`ops`](mod@crate::ops) that makes sense as one
//! kernel, by name, with its sizes as one list of numbers (`--shape`) and a few
//! attributes ([`OpAttrs`]). `tessera op`, `tessera bench`, `tessera tune --op` and the
//! tests build single operators from here, so a name means the same tensors, layouts and
//! workload key everywhere and the help text and errors are made from one table.
//!
//! The catalog is a table ([`entries`]): one row per operator (name, aliases, what its
//! shape lists, a line of documentation, and its family); one function per family
//! builds the tensors. Conventions:
//!
//! - Sizes are listed in one order whatever the layout — batch, spatial, channels, then
//!   the kernel or window (`N,H,W,C_IN,C_OUT,KH,KW` for every conv2d) — and the name
//!   says the layout (`conv2d` is NHWC, `conv2d_nchw` NCHW).
//! - Weights follow each layout's convention: HWIO for NHWC conv2d, OIHW for NCHW,
//!   `[KH,KW,C,1]` / `[C,1,KH,KW]` for depthwise, IOHW for conv2d transpose, DHWIO /
//!   OIDHW for conv3d.
//! - 2-D pooling is NHWC (`max_pool2d`; `max_pool2d_nchw` for NCHW), the layout the
//!   graph executor runs after `passes::optimize`; 3-D pooling and `conv3d` are NCDHW,
//!   the zoo's layout (the passes convert no 3-D operator).
//! - Attributes: `stride`, `pad` and `dilation` apply to both (all three) spatial axes;
//!   `pad: None` is "same" padding, `kernel / 2` on each side (what `tessera tune --op`
//!   uses). Operators without a window ignore them.
//! - Every tensor is float32.

use crate::dag::ComputeDag;
use crate::error::{LowerError, ScheduleError, TeError};
use crate::lower::lower;
use crate::ops::{self, Conv2dAttrs, Conv3dAttrs, Pool2dAttrs, Pool3dAttrs, PoolType};
use crate::schedule::Schedule;
use crate::schedules::{default_schedule, pick_vector, CpuParams};
use crate::tensor::{placeholder, Tensor};
use serde::{Deserialize, Serialize};
use tessera_ir::{DataType, PrimFunc};

use Family as F;

const F32: DataType = DataType::float32();

/// The largest size, and the largest product of a shape's sizes: beyond them the
/// operators' index arithmetic could overflow.
const MAX_SIZE: i64 = i32::MAX as i64;
const MAX_PRODUCT: i64 = 1 << 62;

/// The epsilon of `layer_norm` and `batch_norm` (TVM's default).
const EPSILON: f64 = 1e-5;

fn one() -> i64 {
    1
}

/// The attributes of a catalog operator. `OpAttrs::default()`: stride 1, "same"
/// padding, dilation 1, floor mode, default NCHWc blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpAttrs {
    /// Stride of every spatial axis (convolutions, pooling).
    #[serde(default = "one")]
    pub stride: i64,
    /// Zero padding on both sides of every spatial axis; `None` is "same" padding,
    /// `kernel / 2` (the `pad` operator: 1).
    #[serde(default)]
    pub pad: Option<i64>,
    /// Dilation of every spatial axis (convolutions, pooling).
    #[serde(default = "one")]
    pub dilation: i64,
    /// Pooling: round the output size up (TVM's `ceil_mode`).
    #[serde(default)]
    pub ceil_mode: bool,
    /// `conv2d_nchwc`: the (input, output) channel blocks; `None`: the largest power
    /// of two up to 16 dividing each channel count.
    #[serde(default)]
    pub block: Option<(i64, i64)>,
    /// `conv2d`, `conv2d_nchw` and `conv2d_nhwc_packed`: the channel groups (the
    /// kernel's input channels are `C_IN / groups`; ResNeXt's 32); 1 is an ordinary
    /// convolution and is not written.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub groups: i64,
}

fn is_one(v: &i64) -> bool {
    *v == 1
}

impl Default for OpAttrs {
    fn default() -> Self {
        OpAttrs {
            stride: 1,
            pad: None,
            dilation: 1,
            ceil_mode: false,
            block: None,
            groups: 1,
        }
    }
}

/// One operator of the catalog with its sizes and attributes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpSpec {
    /// The operator's catalog name (an alias given to [`OpSpec::new`] becomes the name).
    pub name: String,
    /// The sizes, as [`OpEntry::shape`] lists them.
    pub shape: Vec<i64>,
    #[serde(default)]
    pub attrs: OpAttrs,
}

/// What can be wrong with an operator request. Every variant names the operator. The
/// wrapped errors of the operator library, the scheduler and lowering are the
/// variants' [`source`](std::error::Error::source), not part of their message: print
/// the chain (`{:#}` of an `anyhow::Error`) to see the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogError {
    #[error("unknown operator `{name}` (known: {known})")]
    UnknownOp { name: String, known: String },
    #[error("operator `{op}` takes --shape {expected} ({count}), got {got} number(s)")]
    ShapeArity {
        op: String,
        expected: &'static str,
        count: String,
        got: usize,
    },
    #[error("operator `{op}`: --shape {}: every size must be positive, got {value}", join(.shape))]
    NotPositive {
        op: String,
        shape: Vec<i64>,
        value: i64,
    },
    #[error("operator `{op}`: --shape {}: too large (a size above 2^31 - 1 or a product above 2^62)", join(.shape))]
    TooLarge { op: String, shape: Vec<i64> },
    #[error("operator `{op}`: invalid attribute `{attr}`: {reason}")]
    BadAttr {
        op: String,
        attr: &'static str,
        reason: String,
    },
    /// The operator library refused the sizes or attributes.
    #[error("cannot build operator `{op}` --shape {}", join(.shape))]
    Te {
        op: String,
        shape: Vec<i64>,
        #[source]
        source: Box<TeError>,
    },
    #[error("cannot schedule operator `{op}`")]
    Schedule {
        op: String,
        #[source]
        source: Box<ScheduleError>,
    },
    #[error("cannot lower operator `{op}`")]
    Lower {
        op: String,
        #[source]
        source: Box<LowerError>,
    },
}

fn join(shape: &[i64]) -> String {
    let v: Vec<String> = shape.iter().map(i64::to_string).collect();
    v.join(",")
}

/// One row of the catalog.
#[derive(Clone, Copy, Debug)]
pub struct OpEntry {
    /// The operator's name.
    pub name: &'static str,
    /// Other names accepted for it.
    pub aliases: &'static [&'static str],
    /// What `--shape` lists, e.g. `N,H,W,C_IN,C_OUT,KH,KW`; a trailing `…` takes any
    /// number of further sizes.
    pub shape: &'static str,
    /// One line: what it computes, its layouts and weights.
    pub doc: &'static str,
    family: Family,
    /// Inputs drawn from [0, 1) rather than [-1, 1) in checks (the operator is
    /// undefined for negative values).
    nonneg_inputs: &'static [usize],
}

impl OpEntry {
    /// Whether `name` is this operator's name or one of its aliases.
    pub fn is_called(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }

    /// The number of sizes `--shape` takes, and whether more may follow.
    pub fn arity(&self) -> (usize, bool) {
        let fields: Vec<&str> = self.shape.split(',').collect();
        match fields.last() {
            Some(&"…") => (fields.len() - 1, true),
            _ => (fields.len(), false),
        }
    }
}

type Unary = fn(&Tensor) -> Result<Tensor, TeError>;
type Binary = fn(&Tensor, &Tensor) -> Result<Tensor, TeError>;

/// How an operator's tensors are built: one builder function per family.
#[derive(Clone, Copy, Debug)]
enum Family {
    Matmul,
    Dense,
    DensePacked,
    BatchMatmul,
    Attention,
    Conv2d(Conv2dKind),
    Conv3d(Layout3d),
    Pool2d(PoolType, Window, Layout2d),
    Pool3d(PoolType, Window),
    Softmax { log: bool },
    LayerNorm,
    BatchNorm,
    BiasAdd,
    Unary(Unary),
    Binary(Binary),
    Pad,
    Transpose,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv2dKind {
    Nhwc,
    NhwcPacked,
    Nchw,
    Nchwc,
    DepthwiseNhwc,
    DepthwiseNchw,
    Winograd,
    WinogradBlocked,
    TransposeNchw,
    PackedInt8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout2d {
    Nhwc,
    Nchw,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout3d {
    Ncdhw,
    Ndhwc,
}

/// The windows of a pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Window {
    /// A sliding KH×KW (KD×KH×KW) window with stride and padding.
    Sliding,
    /// The whole spatial extent (to 1×1).
    Global,
    /// To an output size (2-D only).
    Adaptive,
}

const fn row(
    name: &'static str,
    aliases: &'static [&'static str],
    shape: &'static str,
    doc: &'static str,
    family: Family,
) -> OpEntry {
    OpEntry {
        name,
        aliases,
        shape,
        doc,
        family,
        nonneg_inputs: &[],
    }
}

const fn row_nonneg(entry: OpEntry, inputs: &'static [usize]) -> OpEntry {
    OpEntry {
        nonneg_inputs: inputs,
        ..entry
    }
}

const CONV2D_SHAPE: &str = "N,H,W,C_IN,C_OUT,KH,KW";
const DEPTHWISE_SHAPE: &str = "N,H,W,C,KH,KW";
const POOL2D_SHAPE: &str = "N,H,W,C,KH,KW";
const POOL3D_SHAPE: &str = "N,D,H,W,C,KD,KH,KW";
const ANY: &str = "D0,…";

static ENTRIES: &[OpEntry] = &[
    row("matmul", &[], "M,N,K", "C[M,N] = A[M,K] · B[K,N]", F::Matmul),
    row("dense", &[], "M,N,K", "TVM's dense: data[M,K] · weight[N,K]ᵀ", F::Dense),
    row("dense_packed", &[], "M,N,K", "dense on a weight packed by blocks of B output features [N/B,K,B], as CPU network builds lay out constant weights (B: --block _,B, else the largest power of two up to 16 dividing N, as tuned up to the target's float32 lanes)", F::DensePacked),
    row("batch_matmul", &[], "B,M,N,K", "TVM's batch_matmul: A[B,M,K] · B[B,N,K]ᵀ per batch", F::BatchMatmul),
    row("attention", &[], "B,M,K,N,D", "scaled dot-product attention as one operator: softmax(Q[B,M,K] · KT[B,K,N] / √K + mask[N]) · V[B,N,D] (a transformer's heads: B; queries M, keys N)", F::Attention),
    row("conv2d", &["conv2d_nhwc"], CONV2D_SHAPE, "conv2d, data NHWC, kernel HWIO; stride, pad, dilation", F::Conv2d(Conv2dKind::Nhwc)),
    row("conv2d_nhwc_packed", &[], CONV2D_SHAPE, "conv2d, data NHWC, kernel packed by blocks of B output channels [C_OUT/B,KH,KW,C_IN/groups,B], as CPU network builds lay out constant weights (B: --block _,B, else the largest power of two up to 16 dividing C_OUT, as tuned up to the target's float32 lanes); stride, pad, dilation, groups", F::Conv2d(Conv2dKind::NhwcPacked)),
    row("conv2d_nchw", &[], CONV2D_SHAPE, "conv2d, data NCHW, kernel OIHW; stride, pad, dilation", F::Conv2d(Conv2dKind::Nchw)),
    row("conv2d_nchwc", &[], CONV2D_SHAPE, "conv2d in TVM's blocked NCHW{ib}c layout, kernel OIHW{ib}i{ob}o (block: --block IB,OB, else powers of two up to 16)", F::Conv2d(Conv2dKind::Nchwc)),
    row("depthwise_conv2d", &["depthwise_conv2d_nhwc"], DEPTHWISE_SHAPE, "depthwise conv2d, data NHWC, kernel [KH,KW,C,1]; stride, pad, dilation", F::Conv2d(Conv2dKind::DepthwiseNhwc)),
    row("depthwise_conv2d_nchw", &[], DEPTHWISE_SHAPE, "depthwise conv2d, data NCHW, kernel [C,1,KH,KW]; stride, pad, dilation", F::Conv2d(Conv2dKind::DepthwiseNchw)),
    row("conv2d_winograd", &["conv2d_winograd_nhwc"], CONV2D_SHAPE, "Winograd conv2d F(2×2,3×3), data NHWC, the weight transformed ahead of time (kernel_pack [4,4,C_OUT,C_IN]); KH = KW = 3, stride 1", F::Conv2d(Conv2dKind::Winograd)),
    row("conv2d_winograd_blocked", &[], CONV2D_SHAPE, "Winograd conv2d F(m×m,3×3) as CPU network builds compute 3×3 stride-1 layers, data NHWC, the weight transformed and blocked ahead of time (kernel_pack [α,α,C_OUT/B,C_IN,B], α = m + 2); m: --block M,_ (2 or 4; 1 or none: 4 when 4 divides the output's height and width, else 2); B as conv2d_nhwc_packed's", F::Conv2d(Conv2dKind::WinogradBlocked)),
    row("conv2d_packed", &[], CONV2D_SHAPE, "int8 conv2d in 16-channel blocks (the layout of int8 GEMM cores: VTA's, TVM's VTA tutorial): data NCHW1n16c int8, kernel OIHW16o16i int8, int32 sums >> 8, clipped to [0, 127], int8 (C_IN, C_OUT multiples of 16); stride, pad", F::Conv2d(Conv2dKind::PackedInt8)),
    row("conv2d_transpose", &["conv2d_transpose_nchw"], CONV2D_SHAPE, "conv2d transpose, data NCHW, kernel IOHW; stride, pad", F::Conv2d(Conv2dKind::TransposeNchw)),
    row("conv3d", &["conv3d_ncdhw"], "N,D,H,W,C_IN,C_OUT,KD,KH,KW", "conv3d, data NCDHW, kernel OIDHW; stride, pad, dilation", F::Conv3d(Layout3d::Ncdhw)),
    row("conv3d_ndhwc", &[], "N,D,H,W,C_IN,C_OUT,KD,KH,KW", "conv3d, data NDHWC, kernel DHWIO; stride, pad, dilation", F::Conv3d(Layout3d::Ndhwc)),
    row("max_pool2d", &["max_pool2d_nhwc"], POOL2D_SHAPE, "max pooling over a KH×KW window, NHWC; stride, pad, dilation, ceil_mode", F::Pool2d(PoolType::Max, Window::Sliding, Layout2d::Nhwc)),
    row("max_pool2d_nchw", &[], POOL2D_SHAPE, "max pooling over a KH×KW window, NCHW; stride, pad, dilation, ceil_mode", F::Pool2d(PoolType::Max, Window::Sliding, Layout2d::Nchw)),
    row("avg_pool2d", &["avg_pool2d_nhwc"], POOL2D_SHAPE, "average pooling over a KH×KW window (padding not counted), NHWC; stride, pad, dilation, ceil_mode", F::Pool2d(PoolType::Avg, Window::Sliding, Layout2d::Nhwc)),
    row("avg_pool2d_nchw", &[], POOL2D_SHAPE, "average pooling over a KH×KW window (padding not counted), NCHW; stride, pad, dilation, ceil_mode", F::Pool2d(PoolType::Avg, Window::Sliding, Layout2d::Nchw)),
    row("global_avg_pool2d", &[], "N,H,W,C", "average over H and W (to 1×1), NHWC", F::Pool2d(PoolType::Avg, Window::Global, Layout2d::Nhwc)),
    row("global_max_pool2d", &[], "N,H,W,C", "maximum over H and W (to 1×1), NHWC", F::Pool2d(PoolType::Max, Window::Global, Layout2d::Nhwc)),
    row("adaptive_avg_pool2d", &[], "N,H,W,C,OH,OW", "adaptive average pooling to OH×OW, NHWC", F::Pool2d(PoolType::Avg, Window::Adaptive, Layout2d::Nhwc)),
    row("adaptive_max_pool2d", &[], "N,H,W,C,OH,OW", "adaptive max pooling to OH×OW, NHWC", F::Pool2d(PoolType::Max, Window::Adaptive, Layout2d::Nhwc)),
    row("max_pool3d", &[], POOL3D_SHAPE, "max pooling over a KD×KH×KW window, NCDHW; stride, pad, dilation, ceil_mode", F::Pool3d(PoolType::Max, Window::Sliding)),
    row("avg_pool3d", &[], POOL3D_SHAPE, "average pooling over a KD×KH×KW window (padding not counted), NCDHW; stride, pad, dilation, ceil_mode", F::Pool3d(PoolType::Avg, Window::Sliding)),
    row("global_avg_pool3d", &[], "N,D,H,W,C", "average over D, H and W (to 1×1×1), NCDHW", F::Pool3d(PoolType::Avg, Window::Global)),
    row("softmax", &[], ANY, "softmax over the last axis", F::Softmax { log: false }),
    row("log_softmax", &[], ANY, "log-softmax over the last axis", F::Softmax { log: true }),
    row("layer_norm", &[], ANY, "layer normalization over the last axis, gamma and beta of its size, epsilon 1e-5", F::LayerNorm),
    row_nonneg(row("batch_norm", &["batch_norm_inference"], ANY, "batch normalization at inference over the last axis (channels last), epsilon 1e-5; moving_var checked on [0, 1)", F::BatchNorm), &[4]),
    row("bias_add", &[], ANY, "x + bias along the last axis (channels last)", F::BiasAdd),
    row("relu", &[], ANY, "max(x, 0)", F::Unary(ops::relu)),
    row("sigmoid", &[], ANY, "1 / (1 + e^-x)", F::Unary(ops::sigmoid)),
    row("tanh", &[], ANY, "tanh(x)", F::Unary(ops::tanh)),
    row("exp", &[], ANY, "e^x", F::Unary(ops::exp)),
    row_nonneg(row("sqrt", &[], ANY, "√x (checked on inputs in [0, 1))", F::Unary(ops::sqrt)), &[0]),
    row("erf", &[], ANY, "the error function", F::Unary(ops::erf)),
    row("gelu", &[], ANY, "GELU, exact: x/2 · (1 + erf(x/√2))", F::Unary(ops::gelu)),
    row("add", &[], ANY, "a + b, two tensors of the shape", F::Binary(ops::add)),
    row("subtract", &[], ANY, "a - b, two tensors of the shape", F::Binary(ops::subtract)),
    row("multiply", &[], ANY, "a · b, two tensors of the shape", F::Binary(ops::multiply)),
    row("maximum", &[], ANY, "max(a, b), two tensors of the shape", F::Binary(ops::maximum)),
    row("minimum", &[], ANY, "min(a, b), two tensors of the shape", F::Binary(ops::minimum)),
    row("pad", &[], ANY, "zero padding of every axis by pad on both sides (pad unset: 1)", F::Pad),
    row("transpose", &[], ANY, "the axes reversed", F::Transpose),
];

/// The catalog: one row per operator, in the order of the help text.
pub fn entries() -> &'static [OpEntry] {
    ENTRIES
}

/// The row of `name` (an operator's name or alias).
pub fn entry(name: &str) -> Option<&'static OpEntry> {
    ENTRIES.iter().find(|e| e.is_called(name))
}

/// The catalog as a text table (name and aliases, shape, what it computes): what
/// `tessera op --list` prints.
pub fn table() -> String {
    let names: Vec<String> = ENTRIES
        .iter()
        .map(|e| match e.aliases {
            [] => e.name.to_string(),
            a => format!("{} ({})", e.name, a.join(", ")),
        })
        .collect();
    let width = |it: &mut dyn Iterator<Item = usize>| it.max().unwrap_or(0);
    let wn = width(&mut names.iter().map(|n| n.chars().count())).max(4);
    let ws = width(&mut ENTRIES.iter().map(|e| e.shape.chars().count())).max(7);
    let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w - s.chars().count()));
    let mut out = format!("{}  {}  what\n", pad("name", wn), pad("--shape", ws));
    for (e, n) in ENTRIES.iter().zip(&names) {
        out.push_str(&format!(
            "{}  {}  {}\n",
            pad(n, wn),
            pad(e.shape, ws),
            e.doc
        ));
    }
    out
}

impl OpSpec {
    /// The spec as it is tuned on a device with vectors of `lanes` float32:
    /// `conv2d_nchwc` without `block` blocks its channels by the largest power of two up
    /// to `lanes` dividing each count (TVM's choice for x86), so that a task's default
    /// program and its template's programs take the same tensors; `conv2d_nhwc_packed`
    /// without `block` packs its kernel by the block the CPU's network builds use (one
    /// register of output channels); any other spec is returned unchanged.
    pub fn for_vector_lanes(&self, lanes: i64) -> OpSpec {
        let mut out = self.clone();
        let name = self.entry().map_or("", |e| e.name);
        if let (None, [_, _, _, ci, co, ..]) = (self.attrs.block, &self.shape[..]) {
            match name {
                "conv2d_nchwc" => {
                    out.attrs.block = Some((
                        largest_pow2_divisor(*ci, lanes),
                        largest_pow2_divisor(*co, lanes),
                    ))
                }
                "conv2d_nhwc_packed" | "conv2d_winograd_blocked" => {
                    out.attrs.block = Some((1, largest_pow2_divisor(*co, lanes)))
                }
                _ => {}
            }
        }
        if let (None, "dense_packed", [_, n, _]) = (self.attrs.block, name, &self.shape[..]) {
            out.attrs.block = Some((1, largest_pow2_divisor(*n, lanes)));
        }
        out
    }

    /// Checks the name (aliases allowed; the spec gets the catalog name), the number of
    /// sizes and that each is positive, and the attributes' ranges.
    pub fn new(name: &str, shape: &[i64], attrs: OpAttrs) -> Result<OpSpec, CatalogError> {
        let e = validate(name, shape, &attrs)?;
        Ok(OpSpec {
            name: e.name.to_string(),
            shape: shape.to_vec(),
            attrs,
        })
    }

    /// The row of the spec's operator, after checking the spec again (its fields are
    /// public: it may have been written by hand or read from a file).
    pub fn entry(&self) -> Result<&'static OpEntry, CatalogError> {
        validate(&self.name, &self.shape, &self.attrs)
    }

    /// The operator's tensors: its inputs (placeholders, in argument order) and its
    /// outputs.
    pub fn tensors(&self) -> Result<(Vec<Tensor>, Vec<Tensor>), CatalogError> {
        let e = self.entry()?;
        let (ins, out) = build(e.family, self).map_err(|source| CatalogError::Te {
            op: self.name.clone(),
            shape: self.shape.clone(),
            source: Box::new(source),
        })?;
        Ok((ins, vec![out]))
    }

    /// The compute DAG of the outputs.
    pub fn dag(&self) -> Result<ComputeDag, CatalogError> {
        let (_, outs) = self.tensors()?;
        ComputeDag::new(&outs).map_err(|source| self.te_err(source))
    }

    /// The default CPU schedule ([`default_schedule`]) lowered to a function `name`
    /// whose arguments are the inputs, then the outputs.
    pub fn default_func(&self, p: CpuParams, name: &str) -> Result<PrimFunc, CatalogError> {
        let (ins, outs) = self.tensors()?;
        let s = default_schedule(&outs, p).map_err(|source| CatalogError::Schedule {
            op: self.name.clone(),
            source: Box::new(source),
        })?;
        self.lower(&s, ins, outs, name)
    }

    /// The unscheduled program (the loop nest of the definition), arguments as
    /// [`OpSpec::default_func`]'s.
    pub fn naive_func(&self, name: &str) -> Result<PrimFunc, CatalogError> {
        let (ins, outs) = self.tensors()?;
        let s = Schedule::create(&outs).map_err(|source| CatalogError::Schedule {
            op: self.name.clone(),
            source: Box::new(source),
        })?;
        self.lower(&s, ins, outs, name)
    }

    /// The interval that random values of input `input` are drawn from in checks:
    /// [-1, 1), or [0, 1) where the operator is undefined for negative values (`sqrt`,
    /// `batch_norm`'s variance).
    pub fn input_range(&self, input: usize) -> (f64, f64) {
        match entry(&self.name) {
            Some(e) if e.nonneg_inputs.contains(&input) => (0.0, 1.0),
            _ => (-1.0, 1.0),
        }
    }

    fn lower(
        &self,
        s: &Schedule,
        mut args: Vec<Tensor>,
        outs: Vec<Tensor>,
        name: &str,
    ) -> Result<PrimFunc, CatalogError> {
        args.extend(outs);
        lower(s, &args, name).map_err(|source| CatalogError::Lower {
            op: self.name.clone(),
            source: Box::new(source),
        })
    }

    fn te_err(&self, source: TeError) -> CatalogError {
        CatalogError::Te {
            op: self.name.clone(),
            shape: self.shape.clone(),
            source: Box::new(source),
        }
    }

    /// `pad`, or "same" padding for a kernel of `k`.
    fn pad_for(&self, k: i64) -> i64 {
        self.attrs.pad.unwrap_or(k / 2)
    }
}

/// The row of `name` if `shape` and `attrs` fit it.
fn validate(name: &str, shape: &[i64], attrs: &OpAttrs) -> Result<&'static OpEntry, CatalogError> {
    let e = entry(name).ok_or_else(|| CatalogError::UnknownOp {
        name: name.to_string(),
        known: ENTRIES
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    check_shape(e, shape)?;
    check_attrs(e.name, attrs)?;
    Ok(e)
}

fn check_shape(e: &OpEntry, shape: &[i64]) -> Result<(), CatalogError> {
    let (n, more) = e.arity();
    if shape.len() < n || (!more && shape.len() != n) {
        let plural = if n == 1 { "" } else { "s" };
        return Err(CatalogError::ShapeArity {
            op: e.name.to_string(),
            expected: e.shape,
            count: if more {
                format!("at least {n} number{plural}")
            } else {
                format!("{n} number{plural}")
            },
            got: shape.len(),
        });
    }
    if let Some(&value) = shape.iter().find(|d| **d <= 0) {
        return Err(CatalogError::NotPositive {
            op: e.name.to_string(),
            shape: shape.to_vec(),
            value,
        });
    }
    let product = shape.iter().try_fold(1i64, |acc, d| acc.checked_mul(*d));
    if shape.iter().any(|d| *d > MAX_SIZE) || product.is_none_or(|p| p > MAX_PRODUCT) {
        return Err(CatalogError::TooLarge {
            op: e.name.to_string(),
            shape: shape.to_vec(),
        });
    }
    Ok(())
}

fn check_attrs(op: &str, a: &OpAttrs) -> Result<(), CatalogError> {
    let bad = |attr, reason: String| {
        Err(CatalogError::BadAttr {
            op: op.to_string(),
            attr,
            reason,
        })
    };
    let limit = 1 << 20;
    if !(1..=limit).contains(&a.stride) {
        return bad("stride", format!("{} must be in [1, {limit}]", a.stride));
    }
    if !(1..=limit).contains(&a.dilation) {
        return bad(
            "dilation",
            format!("{} must be in [1, {limit}]", a.dilation),
        );
    }
    if let Some(p) = a.pad.filter(|p| !(0..=limit).contains(p)) {
        return bad("pad", format!("{p} must be in [0, {limit}]"));
    }
    if let Some((ib, ob)) = a.block.filter(|(i, o)| *i <= 0 || *o <= 0) {
        return bad("block", format!("({ib}, {ob}) must be positive"));
    }
    if !(1..=limit).contains(&a.groups) {
        return bad("groups", format!("{} must be in [1, {limit}]", a.groups));
    }
    if a.groups != 1 && !matches!(op, "conv2d" | "conv2d_nchw" | "conv2d_nhwc_packed") {
        return bad(
            "groups",
            format!(
                "{} (only conv2d, conv2d_nchw and conv2d_nhwc_packed take groups)",
                a.groups
            ),
        );
    }
    Ok(())
}

/// The built tensors: inputs, then the one output.
type Built = (Vec<Tensor>, Tensor);

fn build(family: Family, s: &OpSpec) -> Result<Built, TeError> {
    match family {
        F::Matmul | F::Dense | F::BatchMatmul => gemm(family, &s.shape),
        F::DensePacked => dense_packed(s),
        F::Attention => attention(&s.shape),
        F::Conv2d(kind) => conv2d(kind, s),
        F::Conv3d(layout) => conv3d(layout, s),
        F::Pool2d(ty, window, layout) => pool2d(ty, window, layout, s),
        F::Pool3d(ty, window) => pool3d(ty, window, s),
        F::Softmax { .. } | F::LayerNorm | F::BatchNorm | F::BiasAdd => norm(family, &s.shape),
        F::Unary(_) | F::Binary(_) | F::Pad | F::Transpose => elementwise(family, s),
    }
}

/// matmul, dense, batch_matmul.
fn gemm(family: Family, d: &[i64]) -> Result<Built, TeError> {
    let (a, b) = match (family, d) {
        (F::Matmul, &[m, n, k]) => (
            placeholder(&[m, k], F32, "A")?,
            placeholder(&[k, n], F32, "B")?,
        ),
        (F::Dense, &[m, n, k]) => (
            placeholder(&[m, k], F32, "data")?,
            placeholder(&[n, k], F32, "weight")?,
        ),
        (_, &[b, m, n, k]) => (
            placeholder(&[b, m, k], F32, "A")?,
            placeholder(&[b, n, k], F32, "B")?,
        ),
        _ => return Err(arity_bug("gemm", d)),
    };
    let out = match family {
        F::Matmul => ops::matmul(&a, &b)?,
        F::Dense => ops::dense(&a, &b, None)?,
        _ => ops::batch_matmul(&a, &b)?,
    };
    Ok((vec![a, b], out))
}

/// dense on a weight packed `[N/b, K, b]` (`b`: the output block of `block`, else the
/// largest power of two up to 16 dividing `N`).
fn dense_packed(s: &OpSpec) -> Result<Built, TeError> {
    let &[m, n, k] = &s.shape[..] else {
        return Err(arity_bug("dense_packed", &s.shape));
    };
    let b = s.attrs.block.map_or(pick_vector(n, 16), |(_, ob)| ob);
    if n % b != 0 {
        let why = format!("output block {b} must divide the output features {n}");
        return Err(bad_attr(&s.name, "block", why));
    }
    let data = placeholder(&[m, k], F32, "data")?;
    let weight = placeholder(&[n / b, k, b], F32, "weight")?;
    let out = ops::dense(&data, &weight, None)?;
    Ok((vec![data, weight], out))
}

/// attention: `Q [B, M, K]`, `KT [B, K, N]`, `V [B, N, D]`, an additive mask `[N]`,
/// the scale `1/√K`.
fn attention(d: &[i64]) -> Result<Built, TeError> {
    let &[b, m, k, n, dv] = d else {
        return Err(arity_bug("attention", d));
    };
    let q = placeholder(&[b, m, k], F32, "Q")?;
    let kt = placeholder(&[b, k, n], F32, "KT")?;
    let v = placeholder(&[b, n, dv], F32, "V")?;
    let mask = placeholder(&[n], F32, "mask")?;
    let out = ops::attention(&q, &kt, &v, Some(&mask), 1.0 / (k as f64).sqrt())?;
    Ok((vec![q, kt, v, mask], out))
}

/// A shape that does not match its row's arity: unreachable after [`check_shape`],
/// an error rather than a panic all the same.
fn arity_bug(op: &str, d: &[i64]) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: d.to_vec(),
        reason: "wrong number of sizes".into(),
    }
}

fn bad_attr(op: &str, attr: &str, reason: String) -> TeError {
    TeError::BadAttr {
        op: op.to_string(),
        attr: attr.to_string(),
        reason,
    }
}

/// Every 2-D convolution: `N,H,W,C_IN,C_OUT,KH,KW` (depthwise: `N,H,W,C,KH,KW`).
fn conv2d(kind: Conv2dKind, s: &OpSpec) -> Result<Built, TeError> {
    use Conv2dKind as K;
    let dims = match (kind, &s.shape[..]) {
        (K::DepthwiseNhwc | K::DepthwiseNchw, &[n, h, w, c, kh, kw]) => [n, h, w, c, c, kh, kw],
        (_, &[n, h, w, ci, co, kh, kw]) => [n, h, w, ci, co, kh, kw],
        _ => return Err(arity_bug(&s.name, &s.shape)),
    };
    let [n, h, w, ci, co, kh, kw] = dims;
    let a = &s.attrs;
    let attrs = Conv2dAttrs::new(
        (a.stride, a.stride),
        (s.pad_for(kh), s.pad_for(kw)),
        (a.dilation, a.dilation),
    )
    .with_groups(a.groups);
    // the kernel's input channels (per group); the op checks that `groups` divides both
    let kci = ci / a.groups.max(1);
    let (data, kernel) = match kind {
        K::Nchwc => return conv2d_nchwc(s, dims, &attrs),
        K::NhwcPacked => return conv2d_nhwc_packed(s, dims, &attrs),
        K::PackedInt8 => return conv2d_packed(s, dims, &attrs),
        K::Winograd => return conv2d_winograd(s, dims),
        K::WinogradBlocked => return conv2d_winograd_blocked(s, dims),
        K::Nhwc => ([n, h, w, ci], [kh, kw, kci, co]),
        K::Nchw => ([n, ci, h, w], [co, kci, kh, kw]),
        K::DepthwiseNhwc => ([n, h, w, ci], [kh, kw, ci, 1]),
        K::DepthwiseNchw => ([n, ci, h, w], [ci, 1, kh, kw]),
        K::TransposeNchw => ([n, ci, h, w], [ci, co, kh, kw]),
    };
    let d = placeholder(&data, F32, "data")?;
    let k = placeholder(&kernel, F32, "kernel")?;
    let out = match kind {
        K::Nhwc => ops::conv2d_nhwc_with(&d, &k, &attrs)?,
        K::Nchw => ops::conv2d_nchw(&d, &k, &attrs)?,
        K::DepthwiseNhwc => ops::depthwise_conv2d_nhwc(&d, &k, &attrs)?,
        K::DepthwiseNchw => ops::depthwise_conv2d_nchw(&d, &k, &attrs)?,
        _ => {
            if a.dilation != 1 {
                let why = format!("{} (conv2d transpose takes only 1)", a.dilation);
                return Err(bad_attr(&s.name, "dilation", why));
            }
            ops::conv2d_transpose_nchw(&d, &k, attrs.stride, attrs.padding, (0, 0))?
        }
    };
    Ok((vec![d, k], out))
}

/// conv2d in the NCHW{ib}c layout: data `[N, C_IN/ib, H, W, ib]`, kernel
/// `[C_OUT/ob, C_IN/ib, KH, KW, ib, ob]`.
fn conv2d_nchwc(s: &OpSpec, dims: [i64; 7], attrs: &Conv2dAttrs) -> Result<Built, TeError> {
    let [n, h, w, ci, co, kh, kw] = dims;
    let (ib, ob) = s
        .attrs
        .block
        .unwrap_or((pick_vector(ci, 16), pick_vector(co, 16)));
    if ci % ib != 0 || co % ob != 0 {
        let why = format!("({ib}, {ob}) must divide the channels ({ci}, {co})");
        return Err(bad_attr(&s.name, "block", why));
    }
    let d = placeholder(&[n, ci / ib, h, w, ib], F32, "data")?;
    let k = placeholder(&[co / ob, ci / ib, kh, kw, ib, ob], F32, "kernel")?;
    let out = ops::conv2d_nchwc(&d, &k, attrs)?;
    Ok((vec![d, k], out))
}

/// conv2d NHWC with the kernel packed as the graph's weight packing lays it out:
/// `[C_OUT/b, KH, KW, C_IN, b]` (`b`: the output block of `block`, else the largest
/// power of two up to 16 dividing C_OUT; [`OpSpec::for_vector_lanes`] sets the target's).
fn conv2d_nhwc_packed(s: &OpSpec, dims: [i64; 7], attrs: &Conv2dAttrs) -> Result<Built, TeError> {
    let [n, h, w, ci, co, kh, kw] = dims;
    let b = s.attrs.block.map_or(pick_vector(co, 16), |(_, ob)| ob);
    if co % b != 0 {
        let why = format!("output block {b} must divide the output channels {co}");
        return Err(bad_attr(&s.name, "block", why));
    }
    let d = placeholder(&[n, h, w, ci], F32, "data")?;
    let k = placeholder(
        &[co / b, kh, kw, ci / attrs.groups.max(1), b],
        F32,
        "kernel",
    )?;
    let out = ops::conv2d_nhwc_with(&d, &k, attrs)?;
    Ok((vec![d, k], out))
}

/// The int8 conv2d in 16-channel blocks with the requantizing epilogue TVM's VTA
/// tutorial tunes it with: data `[N, C_IN/16, H, W, 1, 16]` and kernel
/// `[C_OUT/16, C_IN/16, KH, KW, 16, 16]` int8, int32 sums, `>> 8`, clipped to [0, 127],
/// cast to int8.
fn conv2d_packed(s: &OpSpec, dims: [i64; 7], attrs: &Conv2dAttrs) -> Result<Built, TeError> {
    let [n, h, w, ci, co, kh, kw] = dims;
    if ci % 16 != 0 || co % 16 != 0 {
        let why = format!("({ci}, {co}) must be multiples of 16 (the blocks)");
        return Err(bad_attr(&s.name, "channels", why));
    }
    if attrs.dilation != (1, 1) {
        return Err(bad_attr(
            &s.name,
            "dilation",
            "the blocked layout takes only 1".into(),
        ));
    }
    let i8t = DataType::int(8);
    let d = placeholder(&[n, ci / 16, h, w, 1, 16], i8t, "data")?;
    let k = placeholder(&[co / 16, ci / 16, kh, kw, 16, 16], i8t, "kernel")?;
    let p = attrs.padding;
    let conv = ops::conv2d_packed_int8(&d, &k, attrs.stride, (p[0], p[1]))?;
    let shifted = ops::right_shift(&conv, 8)?;
    let clipped = ops::clip(&shifted, 0.0, 127.0)?;
    let out = ops::cast(&clipped, i8t)?;
    Ok((vec![d, k], out))
}

/// Winograd conv2d F(2×2, 3×3), NHWC, the weight transformed ahead of time (as TVM's
/// tuning tasks take it): kernel_pack `[4, 4, C_OUT, C_IN]`. Always 2×2 tiles: TVM picks
/// 4×4 when H is a multiple of 8, but F(4×4, 3×3) in float32 on random transformed
/// weights differs from the unscheduled program by up to ~1e-2 (1×16×16×256→256), which
/// the checks of `tessera op` and of the tuners (rtol 1e-3, atol 1e-4) refuse.
fn conv2d_winograd(s: &OpSpec, dims: [i64; 7]) -> Result<Built, TeError> {
    let [n, h, w, ci, co, kh, kw] = dims;
    winograd_spec(s, kh, kw)?;
    let tile = 2;
    let alpha = tile + 2;
    let d = placeholder(&[n, h, w, ci], F32, "data")?;
    let k = placeholder(&[alpha, alpha, co, ci], F32, "kernel_pack")?;
    let p = s.pad_for(3);
    let out = ops::conv2d_winograd_nhwc(&d, &k, [p; 4], tile)?;
    Ok((vec![d, k], out))
}

/// The checks every Winograd conv2d makes of its spec: a 3×3 kernel, stride and
/// dilation 1.
fn winograd_spec(s: &OpSpec, kh: i64, kw: i64) -> Result<(), TeError> {
    if (kh, kw) != (3, 3) {
        let why = format!("{kh}x{kw} (Winograd F(m×m, 3×3) takes only 3x3)");
        return Err(bad_attr(&s.name, "kernel", why));
    }
    for (attr, v) in [("stride", s.attrs.stride), ("dilation", s.attrs.dilation)] {
        if v != 1 {
            return Err(bad_attr(
                &s.name,
                attr,
                format!("{v} (Winograd takes only 1)"),
            ));
        }
    }
    Ok(())
}

/// The Winograd tile size a CPU build uses for an `h`×`w` output: 4 when 4 divides
/// both, else 2 (tiles that cover the output exactly, no tail to compute and drop).
pub fn winograd_tile_for(h: i64, w: i64) -> i64 {
    if h % 4 == 0 && w % 4 == 0 {
        4
    } else {
        2
    }
}

/// Winograd conv2d as CPU network builds compute it
/// ([`ops::conv2d_winograd_nhwc_blocked`]): kernel_pack `[α, α, C_OUT/b, C_IN, b]`, the
/// tile `m` from `block`'s first entry, else [`winograd_tile_for`] the output; `b` as
/// [`conv2d_nhwc_packed`]'s.
fn conv2d_winograd_blocked(s: &OpSpec, dims: [i64; 7]) -> Result<Built, TeError> {
    let [n, h, w, ci, co, kh, kw] = dims;
    winograd_spec(s, kh, kw)?;
    let p = s.pad_for(3);
    let (oh, ow) = (h + 2 * p - 2, w + 2 * p - 2);
    let tile = match s.attrs.block {
        Some((m, _)) if m == 2 || m == 4 => m,
        Some((m, _)) if m != 1 => {
            let why = format!("tile size {m} (Winograd takes 2 or 4)");
            return Err(bad_attr(&s.name, "block", why));
        }
        _ => winograd_tile_for(oh, ow),
    };
    let b = s.attrs.block.map_or(pick_vector(co, 16), |(_, ob)| ob);
    if co % b != 0 {
        let why = format!("output block {b} must divide the output channels {co}");
        return Err(bad_attr(&s.name, "block", why));
    }
    let alpha = tile + 2;
    let d = placeholder(&[n, h, w, ci], F32, "data")?;
    let k = placeholder(&[alpha, alpha, co / b, ci, b], F32, "kernel_pack")?;
    let out = ops::conv2d_winograd_nhwc_blocked(&d, &k, [p; 4], tile)?;
    Ok((vec![d, k], out))
}

/// conv3d: `N,D,H,W,C_IN,C_OUT,KD,KH,KW`.
fn conv3d(layout: Layout3d, s: &OpSpec) -> Result<Built, TeError> {
    let &[n, dd, h, w, ci, co, kd, kh, kw] = &s.shape[..] else {
        return Err(arity_bug(&s.name, &s.shape));
    };
    let a = &s.attrs;
    let attrs = Conv3dAttrs::new(
        (a.stride, a.stride, a.stride),
        (s.pad_for(kd), s.pad_for(kh), s.pad_for(kw)),
        (a.dilation, a.dilation, a.dilation),
    );
    let (data, kernel) = match layout {
        Layout3d::Ncdhw => ([n, ci, dd, h, w], [co, ci, kd, kh, kw]),
        Layout3d::Ndhwc => ([n, dd, h, w, ci], [kd, kh, kw, ci, co]),
    };
    let d = placeholder(&data, F32, "data")?;
    let k = placeholder(&kernel, F32, "kernel")?;
    let out = match layout {
        Layout3d::Ncdhw => ops::conv3d_ncdhw(&d, &k, &attrs)?,
        Layout3d::Ndhwc => ops::conv3d_ndhwc(&d, &k, &attrs)?,
    };
    Ok((vec![d, k], out))
}

/// 2-D pooling: `N,H,W,C` then the window `KH,KW` (sliding) or the output size `OH,OW`
/// (adaptive).
fn pool2d(ty: PoolType, window: Window, layout: Layout2d, s: &OpSpec) -> Result<Built, TeError> {
    let d = &s.shape;
    let (n, h, w, c) = match d[..] {
        [n, h, w, c, ..] => (n, h, w, c),
        _ => return Err(arity_bug(&s.name, d)),
    };
    let (shape, name) = match layout {
        Layout2d::Nhwc => ([n, h, w, c], "NHWC"),
        Layout2d::Nchw => ([n, c, h, w], "NCHW"),
    };
    let x = placeholder(&shape, F32, "data")?;
    let out = match (window, &d[4..]) {
        (Window::Global, []) => ops::global_pool(&x, ty, name)?,
        (Window::Adaptive, &[oh, ow]) => ops::adaptive_pool(&x, (oh, ow), ty, name)?,
        (Window::Sliding, &[kh, kw]) => {
            let a = &s.attrs;
            let attrs = Pool2dAttrs::new(
                (kh, kw),
                (a.stride, a.stride),
                (s.pad_for(kh), s.pad_for(kw)),
            )
            .with_dilation((a.dilation, a.dilation))
            .with_layout(name)
            .with_ceil_mode(a.ceil_mode);
            ops::pool2d(&x, ty, &attrs)?
        }
        _ => return Err(arity_bug(&s.name, d)),
    };
    Ok((vec![x], out))
}

/// 3-D pooling, NCDHW: `N,D,H,W,C` then the window `KD,KH,KW` (sliding).
fn pool3d(ty: PoolType, window: Window, s: &OpSpec) -> Result<Built, TeError> {
    let d = &s.shape;
    let &[n, dd, h, w, c, ..] = &d[..] else {
        return Err(arity_bug(&s.name, d));
    };
    let x = placeholder(&[n, c, dd, h, w], F32, "data")?;
    let out = match (window, &d[5..]) {
        (Window::Sliding, &[kd, kh, kw]) => {
            let a = &s.attrs;
            let attrs = Pool3dAttrs::new(
                (kd, kh, kw),
                (a.stride, a.stride, a.stride),
                (s.pad_for(kd), s.pad_for(kh), s.pad_for(kw)),
            )
            .with_dilation((a.dilation, a.dilation, a.dilation))
            .with_ceil_mode(a.ceil_mode);
            ops::pool3d(&x, ty, &attrs)?
        }
        (Window::Global, []) => ops::global_pool3d(&x, ty, "NCDHW")?,
        _ => return Err(arity_bug(&s.name, d)),
    };
    Ok((vec![x], out))
}

/// softmax, log_softmax, layer_norm, batch_norm, bias_add: over (along) the last axis.
fn norm(family: Family, d: &[i64]) -> Result<Built, TeError> {
    let c = *d.last().ok_or_else(|| arity_bug("norm", d))?;
    let x = placeholder(d, F32, "data")?;
    let param = |name: &str| placeholder(&[c], F32, name);
    let (params, out) = match family {
        F::Softmax { log: false } => (vec![], ops::softmax_axis(&x, -1)?),
        F::Softmax { log: true } => (vec![], ops::log_softmax(&x, -1)?),
        F::LayerNorm => {
            let (g, b) = (param("gamma")?, param("beta")?);
            let out = ops::layer_norm(&x, &g, Some(&b), &[-1], EPSILON)?;
            (vec![g, b], out)
        }
        F::BatchNorm => {
            let p = ["gamma", "beta", "moving_mean", "moving_var"]
                .map(param)
                .into_iter()
                .collect::<Result<Vec<_>, _>>()?;
            let out = ops::batch_norm_inference(&x, &p[0], &p[1], &p[2], &p[3], -1, EPSILON)?;
            (p, out)
        }
        _ => {
            let b = param("bias")?;
            let out = ops::bias_add(&x, &b, -1)?;
            (vec![b], out)
        }
    };
    let mut ins = vec![x];
    ins.extend(params);
    Ok((ins, out))
}

/// Unary and binary elementwise operators, pad, transpose: any shape.
fn elementwise(family: Family, s: &OpSpec) -> Result<Built, TeError> {
    let d = &s.shape;
    Ok(match family {
        F::Unary(f) => {
            let x = placeholder(d, F32, "X")?;
            let out = f(&x)?;
            (vec![x], out)
        }
        F::Binary(f) => {
            let (a, b) = (placeholder(d, F32, "A")?, placeholder(d, F32, "B")?);
            let out = f(&a, &b)?;
            (vec![a, b], out)
        }
        F::Pad => {
            let x = placeholder(d, F32, "data")?;
            let p = vec![s.attrs.pad.unwrap_or(1); d.len()];
            let out = ops::pad(&x, &p, &p, "T_pad")?;
            (vec![x], out)
        }
        _ => {
            let x = placeholder(d, F32, "data")?;
            let out = ops::transpose(&x, &[])?;
            (vec![x], out)
        }
    })
}

/// The largest power of two up to `limit` that divides `n`.
pub fn largest_pow2_divisor(n: i64, limit: i64) -> i64 {
    let mut v = 1;
    while v * 2 <= limit && n % (v * 2) == 0 {
        v *= 2;
    }
    v
}
