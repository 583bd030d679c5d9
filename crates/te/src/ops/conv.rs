//! Convolutions: conv2d in NHWC and NCHW (stride, asymmetric padding, dilation, groups),
//! depthwise conv2d, conv2d transpose, and the packed (blocked) int8 conv2d (Winograd is
//! [`super::winograd`]). Stage and axis names follow TVM's TOPI.

use super::attr_err;
use super::injective::{pad, pad_with};
use crate::error::TeError;
use crate::tensor::{compute, compute_tagged, reduce_axis, sum, Tensor};

use tessera_ir::arith::simplify;
use tessera_ir::{DataType, Expr};

pub(super) fn shape_err(op: &str, shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: shape.to_vec(),
        reason,
    }
}

/// The attributes of a 2-D convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dAttrs {
    /// (height, width) strides.
    pub stride: (i64, i64),
    /// Zero padding: top, left, bottom, right.
    pub padding: [i64; 4],
    /// (height, width) dilations.
    pub dilation: (i64, i64),
    /// Channel groups (1 for a dense convolution).
    pub groups: i64,
}

impl Default for Conv2dAttrs {
    fn default() -> Self {
        Conv2dAttrs {
            stride: (1, 1),
            padding: [0; 4],
            dilation: (1, 1),
            groups: 1,
        }
    }
}

impl Conv2dAttrs {
    /// Stride, symmetric padding and dilation, one group.
    pub fn new(stride: (i64, i64), padding: (i64, i64), dilation: (i64, i64)) -> Self {
        Conv2dAttrs {
            stride,
            padding: [padding.0, padding.1, padding.0, padding.1],
            dilation,
            groups: 1,
        }
    }
    pub fn with_padding(mut self, top: i64, left: i64, bottom: i64, right: i64) -> Self {
        self.padding = [top, left, bottom, right];
        self
    }
    pub fn with_groups(mut self, groups: i64) -> Self {
        self.groups = groups;
        self
    }

    /// Checks the attributes and returns the output (height, width) for an input of
    /// `h`×`w` and a kernel of `kh`×`kw`.
    pub(super) fn output_hw(
        &self,
        op: &str,
        h: i64,
        w: i64,
        kh: i64,
        kw: i64,
    ) -> Result<(i64, i64), TeError> {
        let p = self.padding;
        let out = conv_output_size(
            op,
            ConvGeometry {
                dims: &[h, w],
                kernel: &[kh, kw],
                strides: &[self.stride.0, self.stride.1],
                dilations: &[self.dilation.0, self.dilation.1],
                pad_before: &[p[0], p[1]],
                pad_after: &[p[2], p[3]],
            },
            (
                &format!("{:?}", self.stride),
                &format!("{:?}", self.dilation),
                &format!("{:?}", self.padding),
            ),
        )?;
        Ok((out[0], out[1]))
    }
}

/// The spatial sizes of a convolution: input, kernel, strides, dilations and padding,
/// one entry per spatial axis.
pub(crate) struct ConvGeometry<'a> {
    pub dims: &'a [i64],
    pub kernel: &'a [i64],
    pub strides: &'a [i64],
    pub dilations: &'a [i64],
    pub pad_before: &'a [i64],
    pub pad_after: &'a [i64],
}

/// Checks a convolution's (or pooling's) geometry in any number of spatial axes and
/// returns the output sizes; `shown` is how the operator's strides, dilations and padding
/// appear in its messages.
pub(crate) fn conv_output_size(
    op: &str,
    g: ConvGeometry,
    shown: (&str, &str, &str),
) -> Result<Vec<i64>, TeError> {
    let (strides, dilations, padding) = shown;
    if g.strides.iter().any(|s| *s <= 0) {
        return Err(attr_err(
            op,
            "strides",
            format!("{strides} must be positive"),
        ));
    }
    if g.dilations.iter().any(|d| *d <= 0) {
        return Err(attr_err(
            op,
            "dilation",
            format!("{dilations} must be positive"),
        ));
    }
    if g.pad_before.iter().chain(g.pad_after).any(|p| *p < 0) {
        return Err(attr_err(
            op,
            "padding",
            format!("{padding} must not be negative"),
        ));
    }
    let by_x = |v: &[i64]| {
        v.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x")
    };
    if g.kernel.iter().any(|k| *k <= 0) {
        return Err(attr_err(
            op,
            "kernel_size",
            format!("{} must be positive", by_x(g.kernel)),
        ));
    }
    let n = g.dims.len();
    let dk: Vec<i64> = (0..n)
        .map(|i| (g.kernel[i] - 1) * g.dilations[i] + 1)
        .collect();
    let padded: Vec<i64> = (0..n)
        .map(|i| g.dims[i] + g.pad_before[i] + g.pad_after[i])
        .collect();
    if (0..n).any(|i| dk[i] > padded[i]) {
        return Err(attr_err(
            op,
            "kernel_size",
            format!(
                "the dilated kernel {} is larger than the padded input {}",
                by_x(&dk),
                by_x(&padded)
            ),
        ));
    }
    Ok((0..n)
        .map(|i| (padded[i] - dk[i]) / g.strides[i] + 1)
        .collect())
}

/// `v * s` folded the way TVM's expression builder folds it (no `*1`).
pub(crate) fn scaled(e: &Expr, s: i64) -> Expr {
    if s == 1 {
        e.clone()
    } else {
        e * s
    }
}

fn rank4(op: &str, data: &Tensor, kernel: &Tensor) -> Result<(), TeError> {
    check_conv_inputs(op, data, kernel, 4)
}

/// A convolution's data of rank `data_rank` and kernel of rank `kernel_rank`, of one
/// dtype.
fn check_conv_inputs_ranks(
    op: &str,
    data: &Tensor,
    kernel: &Tensor,
    data_rank: usize,
    kernel_rank: usize,
) -> Result<(), TeError> {
    if data.ndim() != data_rank || kernel.ndim() != kernel_rank {
        let (d, k) = (data.shape(), kernel.shape());
        let reason = if data_rank == kernel_rank {
            format!("data {d:?} and kernel {k:?} must both be {data_rank}-D")
        } else {
            format!("data {d:?} must be {data_rank}-D and kernel {k:?} {kernel_rank}-D")
        };
        return Err(shape_err(op, d, reason));
    }
    same_dtype(op, data, kernel)
}

/// A convolution's data and kernel: both of rank `rank`, of one dtype.
pub(crate) fn check_conv_inputs(
    op: &str,
    data: &Tensor,
    kernel: &Tensor,
    rank: usize,
) -> Result<(), TeError> {
    check_conv_inputs_ranks(op, data, kernel, rank, rank)
}

/// A convolution's data and kernel are of one dtype.
fn same_dtype(op: &str, data: &Tensor, kernel: &Tensor) -> Result<(), TeError> {
    if data.dtype() != kernel.dtype() {
        return Err(attr_err(
            op,
            "dtype",
            format!(
                "data is {} but the kernel is {}",
                data.dtype(),
                kernel.dtype()
            ),
        ));
    }
    Ok(())
}

fn check_groups(
    op: &str,
    groups: i64,
    cin: i64,
    cout: i64,
    kernel_cin: i64,
) -> Result<(), TeError> {
    if groups <= 0 {
        return Err(attr_err(op, "groups", format!("{groups} must be positive")));
    }
    if cin % groups != 0 || cout % groups != 0 {
        return Err(attr_err(op, "groups", format!("input channels {cin} and output channels {cout} must both be divisible by groups {groups}")));
    }
    if kernel_cin != cin / groups {
        return Err(shape_err(op, &[cin, cout], format!("the kernel has {kernel_cin} input channels, expected {} (= {cin} / groups {groups})", cin / groups)));
    }
    Ok(())
}

/// 2-D convolution, data NHWC, kernel HWIO (TVM's `conv2d_nhwc`), symmetric padding.
pub fn conv2d_nhwc(
    data: &Tensor,
    kernel: &Tensor,
    stride: (i64, i64),
    padding: (i64, i64),
    dilation: (i64, i64),
) -> Result<Tensor, TeError> {
    conv2d_nhwc_with(data, kernel, &Conv2dAttrs::new(stride, padding, dilation))
}

/// 2-D convolution in either layout, kernel HWIO (NHWC) or OIHW (NCHW), `I` = input
/// channels / groups: TVM's `conv2d_nhwc` / `conv2d_nchw` (`group_conv2d_*` with groups),
/// with its stage (`pad_temp`), axis and reduce-axis names and order.
fn conv2d(
    layout: Layout,
    data: &Tensor,
    kernel: &Tensor,
    a: &Conv2dAttrs,
) -> Result<Tensor, TeError> {
    let op = match (layout, a.groups == 1) {
        (Layout::Nhwc, true) => "conv2d_nhwc",
        (Layout::Nhwc, false) => "group_conv2d_nhwc",
        (Layout::Nchw, true) => "conv2d_nchw",
        (Layout::Nchw, false) => "group_conv2d_nchw",
    };
    // NHWC also takes a kernel packed by output-channel blocks
    let block = match (layout, kernel.shape()) {
        (Layout::Nhwc, &[_, _, _, _, b]) if b > 0 => Some(b),
        _ => None,
    };
    match block {
        Some(_) => check_conv_inputs_ranks(op, data, kernel, 4, 5)?,
        None => rank4(op, data, kernel)?,
    }
    let (d, k) = (data.shape().to_vec(), kernel.shape().to_vec());
    let (n, cin, h, w) = layout.dims(&d);
    // (output channels, input channels per group, kh, kw)
    let (cout, kcin, kh, kw) = match (layout, block) {
        (Layout::Nhwc, Some(b)) => (k[0] * b, k[3], k[1], k[2]),
        (Layout::Nhwc, None) => (k[3], k[2], k[0], k[1]),
        (Layout::Nchw, _) => (k[0], k[1], k[2], k[3]),
    };
    check_groups(op, a.groups, cin, cout, kcin)?;
    let (oh, ow) = a.output_hw(op, h, w, kh, kw)?;
    let (before, after) = layout.pad(a.padding);
    let padded = pad(data, &before, &after, "pad_temp")?;
    let (ry, rx, rc) = (
        reduce_axis(kh, "ry"),
        reduce_axis(kw, "rx"),
        reduce_axis(kcin, "rc"),
    );
    let (cin_g, cout_g) = (cin / a.groups, cout / a.groups);
    let names = layout.order("nn", "ff", "yy", "xx");
    let raxes = match layout {
        Layout::Nhwc => [ry.clone(), rx.clone(), rc.clone()],
        Layout::Nchw => [rc.clone(), ry.clone(), rx.clone()],
    };
    compute_tagged(&layout.order(n, cout, oh, ow), op, op, &names, |ix| {
        let (nn, ff, yy, xx) = match layout {
            Layout::Nhwc => (&ix[0], &ix[3], &ix[1], &ix[2]),
            Layout::Nchw => (&ix[0], &ix[1], &ix[2], &ix[3]),
        };
        let y = scaled(yy, a.stride.0) + scaled(&ry.expr(), a.dilation.0);
        let x = scaled(xx, a.stride.1) + scaled(&rx.expr(), a.dilation.1);
        let c = if a.groups == 1 {
            rc.expr()
        } else {
            Expr::floordiv(ff.clone(), Expr::int(cout_g)) * cin_g + rc.expr()
        };
        let kidx = match (layout, block) {
            (Layout::Nhwc, Some(b)) => {
                super::dense::blocked_index(ff, &[ry.expr(), rx.expr(), rc.expr()], b)
            }
            (Layout::Nhwc, None) => vec![ry.expr(), rx.expr(), rc.expr(), ff.clone()],
            (Layout::Nchw, _) => vec![ff.clone(), rc.expr(), ry.expr(), rx.expr()],
        };
        sum(
            padded.at(&layout.order(nn.clone(), c, y, x)) * kernel.at(&kidx),
            &raxes,
        )
    })
}

/// 2-D convolution, data NHWC, kernel HWIO (`I` = input channels / groups), or the
/// kernel packed by blocks of `b` output channels, `[O/b, KH, KW, I, b]` (OHWI{b}o,
/// made at build time by the graph's weight packing; a block may span groups): each
/// block's weights are contiguous, so a register tile of `b` output channels reads them
/// from L1 (in HWIO their rows are `O` floats apart, and with `O` ≥ 256 they crowd a few
/// cache sets) and a cold one streams them from memory in order.
pub fn conv2d_nhwc_with(
    data: &Tensor,
    kernel: &Tensor,
    a: &Conv2dAttrs,
) -> Result<Tensor, TeError> {
    conv2d(Layout::Nhwc, data, kernel, a)
}

/// 2-D convolution, data NCHW, kernel OIHW (`I` = input channels / groups) — TVM's
/// `conv2d_nchw` / `group_conv2d_nchw`.
pub fn conv2d_nchw(data: &Tensor, kernel: &Tensor, a: &Conv2dAttrs) -> Result<Tensor, TeError> {
    conv2d(Layout::Nchw, data, kernel, a)
}

/// The two data layouts of 2-D convolutions and where their axes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Nhwc,
    Nchw,
}

impl Layout {
    /// `(n, c, h, w)` of a data shape.
    fn dims(self, d: &[i64]) -> (i64, i64, i64, i64) {
        match self {
            Layout::Nhwc => (d[0], d[3], d[1], d[2]),
            Layout::Nchw => (d[0], d[1], d[2], d[3]),
        }
    }
    /// A data shape or index from its `(n, c, h, w)` parts.
    fn order<T>(self, n: T, c: T, h: T, w: T) -> Vec<T> {
        match self {
            Layout::Nhwc => vec![n, h, w, c],
            Layout::Nchw => vec![n, c, h, w],
        }
    }
    /// The pad widths (before, after) of the data for `[top, left, bottom, right]`.
    fn pad(self, p: [i64; 4]) -> (Vec<i64>, Vec<i64>) {
        (self.order(0, 0, p[0], p[1]), self.order(0, 0, p[2], p[3]))
    }
}

/// 2-D convolution in the blocked layout TVM's x86 schedules use (`conv2d_NCHWc`): data
/// `[N, C/ib, H, W, ib]`, kernel `[CO/ob, C/ib, KH, KW, ib, ob]` (OIHW{ib}i{ob}o), output
/// `[N, CO/ob, OH, OW, ob]`; one group. The blocks keep `ob` output channels contiguous,
/// so a register tile of output pixels × `ob` channels is read and written as vectors.
/// Stages `data_pad` and `conv2d_NCHWc`, reduce axes `ic`, `kh`, `kw`, `ii`.
pub fn conv2d_nchwc(data: &Tensor, kernel: &Tensor, a: &Conv2dAttrs) -> Result<Tensor, TeError> {
    let op = "conv2d_NCHWc";
    if data.ndim() != 5 || kernel.ndim() != 6 {
        return Err(shape_err(
            op,
            data.shape(),
            format!(
                "data {:?} must be 5-D [N, C/ib, H, W, ib] and kernel {:?} 6-D [CO/ob, C/ib, KH, KW, ib, ob]",
                data.shape(),
                kernel.shape()
            ),
        ));
    }
    same_dtype(op, data, kernel)?;
    if a.groups != 1 {
        return Err(attr_err(op, "groups", format!("{} (only 1)", a.groups)));
    }
    let (d, k) = (data.shape().to_vec(), kernel.shape().to_vec());
    let (n, cb, h, w, ib) = (d[0], d[1], d[2], d[3], d[4]);
    let (ocb, kcb, kh, kw, kib, ob) = (k[0], k[1], k[2], k[3], k[4], k[5]);
    if kcb != cb || kib != ib {
        return Err(shape_err(
            op,
            &k,
            format!("the kernel's input blocks {kcb}x{kib} differ from the data's {cb}x{ib}"),
        ));
    }
    let (oh, ow) = a.output_hw(op, h, w, kh, kw)?;
    let p = a.padding;
    let padded = pad(
        data,
        &[0, 0, p[0], p[1], 0],
        &[0, 0, p[2], p[3], 0],
        "data_pad",
    )?;
    let (ic, ry, rx, ii) = (
        reduce_axis(cb, "ic"),
        reduce_axis(kh, "kh"),
        reduce_axis(kw, "kw"),
        reduce_axis(ib, "ii"),
    );
    compute_tagged(
        &[n, ocb, oh, ow, ob],
        "conv2d_NCHWc",
        op,
        &["n", "oc_chunk", "oh", "ow", "oc_block"],
        |ix| {
            let y = scaled(&ix[2], a.stride.0) + scaled(&ry.expr(), a.dilation.0);
            let x = scaled(&ix[3], a.stride.1) + scaled(&rx.expr(), a.dilation.1);
            let v = padded.at(&[ix[0].clone(), ic.expr(), y, x, ii.expr()])
                * kernel.at(&[
                    ix[1].clone(),
                    ic.expr(),
                    ry.expr(),
                    rx.expr(),
                    ii.expr(),
                    ix[4].clone(),
                ]);
            sum(v, &[ic.clone(), ry.clone(), rx.clone(), ii.clone()])
        },
    )
}

/// Depthwise conv2d in either layout: kernel `[KH, KW, C, M]` (NHWC) or `[C, M, KH, KW]`
/// (NCHW), M the channel multiplier; the output has C·M channels. TVM's stage names:
/// `PaddedInput`, `DepthwiseConv2d`.
/// The depthwise convolution `op` in `layout`; `int8_pad`: the integer form — the data
/// padded with that value and each product taken in int32 (8-bit data, an int32 kernel).
fn depthwise(
    op: &str,
    layout: Layout,
    data: &Tensor,
    kernel: &Tensor,
    a: &Conv2dAttrs,
    int8_pad: Option<i64>,
) -> Result<Tensor, TeError> {
    if int8_pad.is_some() {
        // 8-bit data against an int32 kernel (their types checked by the caller)
        if data.ndim() != 4 || kernel.ndim() != 4 {
            let (d, k) = (data.shape(), kernel.shape());
            let reason = format!("data {d:?} and kernel {k:?} must both be 4-D");
            return Err(shape_err(op, d, reason));
        }
    } else {
        rank4(op, data, kernel)?;
    }
    let (d, k) = (data.shape().to_vec(), kernel.shape().to_vec());
    let (n, c, h, w) = layout.dims(&d);
    let (kc, m, kh, kw) = match layout {
        Layout::Nhwc => (k[2], k[3], k[0], k[1]),
        Layout::Nchw => (k[0], k[1], k[2], k[3]),
    };
    if kc != c {
        return Err(shape_err(
            op,
            &d,
            format!("the kernel has {kc} channels, the data {c}"),
        ));
    }
    let (oh, ow) = a.output_hw(op, h, w, kh, kw)?;
    let (before, after) = layout.pad(a.padding);
    let padded = match int8_pad {
        Some(v) => pad_with(
            data,
            &before,
            &after,
            Expr::int_of(data.dtype(), v),
            "PaddedInput",
        )?,
        None => pad(data, &before, &after, "PaddedInput")?,
    };
    let i32t = DataType::int32();
    let (di, dj) = (reduce_axis(kh, "di"), reduce_axis(kw, "dj"));
    let names = layout.order("b", "c", "i", "j");
    compute_tagged(
        &layout.order(n, c * m, oh, ow),
        "DepthwiseConv2d",
        op,
        &names,
        |ix| {
            let (b, oc, y, x) = match layout {
                Layout::Nhwc => (&ix[0], &ix[3], &ix[1], &ix[2]),
                Layout::Nchw => (&ix[0], &ix[1], &ix[2], &ix[3]),
            };
            let iy = scaled(y, a.stride.0) + scaled(&di.expr(), a.dilation.0);
            let ixx = scaled(x, a.stride.1) + scaled(&dj.expr(), a.dilation.1);
            let cin = simplify(&Expr::floordiv(oc.clone(), Expr::int(m)));
            let cm = simplify(&Expr::floormod(oc.clone(), Expr::int(m)));
            let kidx = match layout {
                Layout::Nhwc => vec![di.expr(), dj.expr(), cin.clone(), cm],
                Layout::Nchw => vec![cin.clone(), cm, di.expr(), dj.expr()],
            };
            let x = padded.at(&layout.order(b.clone(), cin, iy, ixx));
            let v = match int8_pad {
                Some(_) => Expr::cast(i32t, x) * kernel.at(&kidx),
                None => x * kernel.at(&kidx),
            };
            sum(v, &[di.clone(), dj.clone()])
        },
    )
}

/// Depthwise conv2d, data NHWC, kernel [KH, KW, C, M] (M = channel multiplier); the
/// output has C·M channels (TVM's `depthwise_conv2d_nhwc`).
pub fn depthwise_conv2d_nhwc(
    data: &Tensor,
    kernel: &Tensor,
    a: &Conv2dAttrs,
) -> Result<Tensor, TeError> {
    depthwise("depthwise_conv2d_nhwc", Layout::Nhwc, data, kernel, a, None)
}

/// The int8 depthwise conv2d, data NHWC uint8 or int8 padded with `pad` (a quantized
/// convolution's data zero point, which its correction term cancels), kernel an int32
/// `[KH, KW, C, M]` of int8 values: each product and the sum exact in int32, the float
/// depthwise convolution's stages and tag so that its schedule applies.
pub fn depthwise_conv2d_nhwc_u8i8(
    data: &Tensor,
    kernel: &Tensor,
    a: &Conv2dAttrs,
    pad: i64,
) -> Result<Tensor, TeError> {
    let op = "depthwise_conv2d_nhwc";
    let dt = data.dtype();
    if (dt != DataType::uint(8) && dt != DataType::int(8)) || kernel.dtype() != DataType::int32() {
        return Err(attr_err(
            op,
            "dtype",
            format!(
                "int8 form: uint8 or int8 data and an int32 kernel, got {dt} and {}",
                kernel.dtype()
            ),
        ));
    }
    depthwise(op, Layout::Nhwc, data, kernel, a, Some(pad))
}

/// Depthwise conv2d, data NCHW, kernel [C, M, KH, KW] (TVM's `depthwise_conv2d_nchw`).
pub fn depthwise_conv2d_nchw(
    data: &Tensor,
    kernel: &Tensor,
    a: &Conv2dAttrs,
) -> Result<Tensor, TeError> {
    depthwise("depthwise_conv2d_nchw", Layout::Nchw, data, kernel, a, None)
}

// ----- transpose -----

/// conv2d transpose, data NCHW, kernel IOHW (TVM's `conv2d_transpose_nchw`): the input
/// dilated by the stride, padded by `kernel - 1 - padding` (+ output padding at the end),
/// convolved with the flipped kernel.
pub fn conv2d_transpose_nchw(
    data: &Tensor,
    kernel: &Tensor,
    stride: (i64, i64),
    padding: [i64; 4],
    output_padding: (i64, i64),
) -> Result<Tensor, TeError> {
    let op = "conv2d_transpose_nchw";
    rank4(op, data, kernel)?;
    let (d, k) = (data.shape().to_vec(), kernel.shape().to_vec());
    if k[0] != d[1] {
        return Err(shape_err(
            op,
            &d,
            format!("the kernel has {} input channels, the data {}", k[0], d[1]),
        ));
    }
    if stride.0 <= 0 || stride.1 <= 0 {
        return Err(attr_err(
            op,
            "strides",
            format!("{stride:?} must be positive"),
        ));
    }
    if padding.iter().any(|p| *p < 0) {
        return Err(attr_err(
            op,
            "padding",
            format!("{padding:?} must not be negative"),
        ));
    }
    if output_padding.0 < 0
        || output_padding.1 < 0
        || output_padding.0 >= stride.0
        || output_padding.1 >= stride.1
    {
        return Err(attr_err(
            op,
            "output_padding",
            format!("{output_padding:?} must be in [0, stride {stride:?})"),
        ));
    }
    let (kh, kw) = (k[2], k[3]);
    if padding[0] > kh - 1 || padding[2] > kh - 1 || padding[1] > kw - 1 || padding[3] > kw - 1 {
        return Err(attr_err(
            op,
            "padding",
            format!("{padding:?} must be smaller than the kernel {kh}x{kw}"),
        ));
    }
    let dil_h = (d[2] - 1) * stride.0 + 1;
    let dil_w = (d[3] - 1) * stride.1 + 1;
    let zero = Expr::constant(data.dtype(), 0.0);
    let dilated = compute(&[d[0], d[1], dil_h, dil_w], "data_dilate", &[], |ix| {
        let mut conds = Vec::new();
        let mut idx = vec![ix[0].clone(), ix[1].clone()];
        for (i, s) in [(2usize, stride.0), (3usize, stride.1)] {
            if s > 1 {
                conds.push(Expr::floormod(ix[i].clone(), Expr::int(s)).eq(0));
                idx.push(Expr::floordiv(ix[i].clone(), Expr::int(s)));
            } else {
                idx.push(ix[i].clone());
            }
        }
        if conds.is_empty() {
            data.at(&idx)
        } else {
            Expr::if_then_else(Expr::all(conds), data.at(&idx), zero.clone())
        }
    })?;
    let before = [0, 0, kh - 1 - padding[0], kw - 1 - padding[1]];
    let after = [
        0,
        0,
        kh - 1 - padding[2] + output_padding.0,
        kw - 1 - padding[3] + output_padding.1,
    ];
    let data_pad = pad(&dilated, &before, &after, "data_pad")?;
    let kernel_transform = compute(
        &[k[1], k[0], kh, kw],
        "kernel_transform",
        &["o", "i", "h", "w"],
        |ix| {
            kernel.at(&[
                ix[1].clone(),
                ix[0].clone(),
                Expr::int(kh - 1) - ix[2].clone(),
                Expr::int(kw - 1) - ix[3].clone(),
            ])
        },
    )?;
    let (oh, ow) = (data_pad.shape()[2] - kh + 1, data_pad.shape()[3] - kw + 1);
    let (dc, dh, dw) = (
        reduce_axis(d[1], "dc"),
        reduce_axis(kh, "dh"),
        reduce_axis(kw, "dw"),
    );
    compute_tagged(
        &[d[0], k[1], oh, ow],
        "compute",
        op,
        &["b", "c", "h", "w"],
        |ix| {
            let v = data_pad.at(&[
                ix[0].clone(),
                dc.expr(),
                ix[2].clone() + dh.expr(),
                ix[3].clone() + dw.expr(),
            ]) * kernel_transform.at(&[ix[1].clone(), dc.expr(), dh.expr(), dw.expr()]);
            sum(v, &[dc.clone(), dh.clone(), dw.clone()])
        },
    )
}

// ----- blocked int8 -----

/// The packed (blocked) int8 conv2d of int8 GEMM cores such as VTA's: data
/// NCHW{bn}n{bc}c `[N/bn, C/bc, H, W, bn, bc]` (int8), kernel OIHW{bo}o{bi}i
/// `[O/bo, I/bi, KH, KW, bo, bi]` (int8), int32 accumulation, output
/// `[N/bn, O/bo, OH, OW, bn, bo]` — TVM's `conv2d_packed` (compute only; a device's
/// template schedules it).
pub fn conv2d_packed_int8(
    data: &Tensor,
    kernel: &Tensor,
    stride: (i64, i64),
    padding: (i64, i64),
) -> Result<Tensor, TeError> {
    let op = "conv2d_packed";
    let (d, k) = (data.shape().to_vec(), kernel.shape().to_vec());
    if d.len() != 6 || k.len() != 6 {
        return Err(shape_err(
            op,
            &d,
            format!("packed data {d:?} and kernel {k:?} must both be 6-D (NCHWnc / OIHWoi)"),
        ));
    }
    if data.dtype() != DataType::int(8) || kernel.dtype() != DataType::int(8) {
        return Err(attr_err(
            op,
            "dtype",
            format!(
                "data and kernel must be int8, got {} and {}",
                data.dtype(),
                kernel.dtype()
            ),
        ));
    }
    if k[1] != d[1] || k[5] != d[5] {
        return Err(shape_err(
            op,
            &d,
            format!(
                "the kernel's input channel blocks {:?} do not match the data's {:?}",
                (k[1], k[5]),
                (d[1], d[5])
            ),
        ));
    }
    let attrs = Conv2dAttrs::new(stride, padding, (1, 1));
    let (oh, ow) = attrs.output_hw(op, d[2], d[3], k[2], k[3])?;
    let padded = pad(
        data,
        &[0, 0, padding.0, padding.1, 0, 0],
        &[0, 0, padding.0, padding.1, 0, 0],
        "pad_data",
    )?;
    let (d_i, d_j, k_o, k_i) = (
        reduce_axis(k[2], "d_i"),
        reduce_axis(k[3], "d_j"),
        reduce_axis(d[1], "k_o"),
        reduce_axis(d[5], "k_i"),
    );
    let i32t = DataType::int32();
    compute_tagged(
        &[d[0], k[0], oh, ow, d[4], k[4]],
        "res",
        "conv2d_dense",
        &["b_o", "c_o", "i", "j", "b_i", "c_i"],
        |ix| {
            let y = scaled(&ix[2], stride.0) + d_i.expr();
            let x = scaled(&ix[3], stride.1) + d_j.expr();
            let a = Expr::cast(
                i32t,
                padded.at(&[ix[0].clone(), k_o.expr(), y, x, ix[4].clone(), k_i.expr()]),
            );
            let b = Expr::cast(
                i32t,
                kernel.at(&[
                    ix[1].clone(),
                    k_o.expr(),
                    d_i.expr(),
                    d_j.expr(),
                    ix[5].clone(),
                    k_i.expr(),
                ]),
            );
            sum(a * b, &[k_o.clone(), d_i.clone(), d_j.clone(), k_i.clone()])
        },
    )
}
