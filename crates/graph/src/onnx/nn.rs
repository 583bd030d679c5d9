//! Network layers: convolutions (1-D as 2-D between reshapes, 2-D, 3-D, grouped,
//! transposed), pooling (1-D, 2-D, 3-D, global), batch, instance, layer, group and local
//! response normalization, `Gemm`, `MatMul` (dense on constant weights, batched with NumPy
//! broadcasting otherwise), `Softmax` and `LogSoftmax` (the 2-D coercion of opsets
//! before 13).

use super::attrs::NodeCtx;
use super::shape::{norm_axis, slice_axis};
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Layout, Layout3d, Op, Unary};
use crate::reference::permute;
use petgraph::stable_graph::NodeIndex;
use tessera_runtime::NDArray;
use tessera_te::ops::{
    BinaryFn, Conv2dAttrs, Conv3dAttrs, LrnAttrs, MathFn, Pool2dAttrs, Pool3dAttrs, PoolType,
    ReduceKind,
};

/// The spatial geometry of a convolution or pooling window: per spatial axis, the
/// kernel, stride, dilation and the padding before and after.
struct Window {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    before: Vec<i64>,
    after: Vec<i64>,
}

impl Window {
    /// The window of `c` over `spatial` input dimensions, `kernel` when the node does
    /// not say it (`pads` / `auto_pad`, ONNX's SAME rules).
    fn of(c: &NodeCtx, spatial: &[i64], kernel: Vec<i64>) -> Result<Window, GraphError> {
        let n = spatial.len();
        let kernel = c.ints("kernel_shape").unwrap_or(kernel);
        let strides = c.ints("strides").unwrap_or_else(|| vec![1; n]);
        let dilations = c.ints("dilations").unwrap_or_else(|| vec![1; n]);
        if kernel.len() != n || strides.len() != n || dilations.len() != n {
            return Err(c.bad(format!(
                "kernel_shape, strides and dilations need {n} values for {n} spatial axes"
            )));
        }
        if strides
            .iter()
            .chain(&dilations)
            .chain(&kernel)
            .any(|&v| v < 1)
        {
            return Err(c.bad("kernel_shape, strides and dilations must be positive"));
        }
        let auto = c.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
        let (mut before, mut after) = (vec![0; n], vec![0; n]);
        match auto.as_str() {
            "NOTSET" => {
                let p = c.ints("pads").unwrap_or_else(|| vec![0; 2 * n]);
                if p.len() != 2 * n || p.iter().any(|&v| v < 0) {
                    return Err(c.bad(format!("pads {p:?} need {} values, none negative", 2 * n)));
                }
                before.copy_from_slice(&p[..n]);
                after.copy_from_slice(&p[n..]);
            }
            "VALID" => {}
            "SAME_UPPER" | "SAME_LOWER" => {
                for d in 0..n {
                    let out = spatial[d].saturating_add(strides[d] - 1) / strides[d];
                    let total = (out - 1)
                        .saturating_mul(strides[d])
                        .saturating_add((kernel[d] - 1).saturating_mul(dilations[d]))
                        .saturating_add(1 - spatial[d])
                        .max(0);
                    let (lo, hi) = (total / 2, total - total / 2);
                    (before[d], after[d]) = if auto == "SAME_UPPER" {
                        (lo, hi)
                    } else {
                        (hi, lo)
                    };
                }
            }
            other => return Err(c.bad(format!("auto_pad `{other}` is not supported"))),
        }
        Ok(Window {
            kernel,
            strides,
            dilations,
            before,
            after,
        })
    }

    /// The 1-D window as a 2-D one over a height of 1.
    fn as_2d(&self) -> Window {
        let lift = |v: &[i64], one: i64| vec![one, v[0]];
        Window {
            kernel: lift(&self.kernel, 1),
            strides: lift(&self.strides, 1),
            dilations: lift(&self.dilations, 1),
            before: lift(&self.before, 0),
            after: lift(&self.after, 0),
        }
    }
}

/// `x` of shape `[N, C, L]` as `[N, C, 1, L]`.
fn lift_1d(imp: &mut Importer, name: &str, x: NodeIndex) -> Result<NodeIndex, GraphError> {
    let mut s = imp.shape(x);
    s.insert(2, 1);
    imp.reshape(name, x, s)
}

/// `y` of shape `[N, C, 1, L]` back as `[N, C, L]`.
fn drop_1d(imp: &mut Importer, name: &str, y: NodeIndex) -> Result<NodeIndex, GraphError> {
    let mut s = imp.shape(y);
    s.remove(2);
    imp.reshape(name, y, s)
}

fn bias_add(
    imp: &mut Importer,
    c: &NodeCtx,
    y: NodeIndex,
    k: usize,
) -> Result<NodeIndex, GraphError> {
    match c.opt(k) {
        Some(b) => imp.op(&c.sub("bias"), Op::BiasAdd { axis: 1 }, &[y, b]),
        None => Ok(y),
    }
}

/// `Conv`: 1-D, 2-D or 3-D, grouped, with an optional bias.
pub(super) fn conv(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, w) = (c.input(0)?, c.input(1)?);
    let (xs, ws) = (imp.shape(x), imp.shape(w));
    if xs.len() != ws.len() || !(3..=5).contains(&xs.len()) {
        return Err(c.bad(format!(
            "only 1-D, 2-D and 3-D convolutions are supported (data {}, weight {})",
            imp.ty(x),
            imp.ty(w)
        )));
    }
    let win = Window::of(c, &xs[2..], ws[2..].to_vec())?;
    let groups = c.int("group", 1);
    let y = match xs.len() {
        3 => {
            let x2 = lift_1d(imp, &c.sub("data_2d"), x)?;
            let w2 = lift_1d(imp, &c.sub("weight_2d"), w)?;
            let y = conv2d(imp, &c.sub("2d"), x2, w2, &win.as_2d(), groups)?;
            drop_1d(imp, &c.name, y)?
        }
        4 => conv2d(imp, &c.name, x, w, &win, groups)?,
        _ => {
            let t = |v: &[i64]| (v[0], v[1], v[2]);
            let (b, a) = (&win.before, &win.after);
            let attrs = Conv3dAttrs::new(t(&win.strides), (0, 0, 0), t(&win.dilations))
                .with_padding([b[0], b[1], b[2], a[0], a[1], a[2]])
                .with_groups(groups);
            let op = Op::Conv3d {
                attrs,
                layout: Layout3d::Ncdhw,
            };
            imp.op(&c.name, op, &[x, w])?
        }
    };
    Ok(vec![bias_add(imp, c, y, 2)?])
}

/// The attributes of a 2-D convolution node `c` on data `[N, C, H, W]` and weight
/// `[O, I, KH, KW]` (the integer convolutions' converters).
pub(super) fn conv2d_attrs(c: &NodeCtx, xs: &[i64], ws: &[i64]) -> Result<Conv2dAttrs, GraphError> {
    if xs.len() != 4 || ws.len() != 4 {
        return Err(c.bad(format!(
            "only 2-D integer convolutions are supported (data {xs:?}, weight {ws:?})"
        )));
    }
    let win = Window::of(c, &xs[2..], ws[2..].to_vec())?;
    let (s, d, b, a) = (&win.strides, &win.dilations, &win.before, &win.after);
    Ok(Conv2dAttrs::new((s[0], s[1]), (0, 0), (d[0], d[1]))
        .with_padding(b[0], b[1], a[0], a[1])
        .with_groups(c.int("group", 1)))
}

fn conv2d(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    w: NodeIndex,
    win: &Window,
    groups: i64,
) -> Result<NodeIndex, GraphError> {
    let (s, d, b, a) = (&win.strides, &win.dilations, &win.before, &win.after);
    let attrs = Conv2dAttrs::new((s[0], s[1]), (0, 0), (d[0], d[1]))
        .with_padding(b[0], b[1], a[0], a[1])
        .with_groups(groups);
    if let Some(y) = super::qproduct::dequantized_conv(imp, name, x, w, &attrs)? {
        return Ok(y);
    }
    let op = Op::Conv2d {
        attrs,
        layout: Layout::Nchw,
    };
    imp.op(name, op, &[x, w])
}

/// `ConvTranspose`: 1-D or 2-D, grouped (one transposed convolution per group,
/// concatenated), padding from `pads`, `auto_pad` or `output_shape`.
pub(super) fn conv_transpose(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, w) = (c.input(0)?, c.input(1)?);
    let (xs, ws) = (imp.shape(x), imp.shape(w));
    if xs.len() != ws.len() || !(3..=4).contains(&xs.len()) {
        return Err(c.bad(format!(
            "only 1-D and 2-D transposed convolutions are supported (data {}, weight {})",
            imp.ty(x),
            imp.ty(w)
        )));
    }
    let n = xs.len() - 2;
    let kernel = c.ints("kernel_shape").unwrap_or_else(|| ws[2..].to_vec());
    let strides = c.ints("strides").unwrap_or_else(|| vec![1; n]);
    let dil = c.ints("dilations").unwrap_or_else(|| vec![1; n]);
    let mut out_pad = c.ints("output_padding").unwrap_or_else(|| vec![0; n]);
    if kernel.len() != n || strides.len() != n || dil.len() != n || out_pad.len() != n {
        return Err(c.bad(format!(
            "kernel_shape, strides, dilations and output_padding need {n} values"
        )));
    }
    if strides.iter().chain(&dil).chain(&kernel).any(|&v| v < 1) || out_pad.iter().any(|&v| v < 0) {
        return Err(c.bad(
            "kernel_shape, strides and dilations must be positive, output_padding not negative",
        ));
    }
    // a dilated kernel is the kernel with zeros between its taps
    let (w, ws, kernel) = if dil.iter().any(|&v| v != 1) {
        let v = imp
            .constant(w)
            .cloned()
            .ok_or_else(|| c.bad("a dilated transposed convolution needs constant weights"))?;
        let dilated = dilate_kernel(&v, &dil)?;
        let shape: Vec<i64> = dilated.shape().iter().map(|&d| d as i64).collect();
        let kernel = shape[2..].to_vec();
        (
            imp.g.constant(&c.sub("weight_dilated"), dilated),
            shape,
            kernel,
        )
    } else {
        (w, ws, kernel)
    };
    let auto = c.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let output_shape = c.ints("output_shape");
    let (mut before, mut after) = (vec![0; n], vec![0; n]);
    if output_shape.is_some() || auto.starts_with("SAME") {
        let target: Vec<i64> = match &output_shape {
            Some(o) if o.len() >= n => o[o.len() - n..].to_vec(),
            Some(o) => return Err(c.bad(format!("output_shape {o:?} needs {n} values"))),
            None => (0..n).map(|d| xs[2 + d] * strides[d]).collect(),
        };
        for d in 0..n {
            let full = strides[d]
                .saturating_mul(xs[2 + d] - 1)
                .saturating_add(out_pad[d])
                .saturating_add(kernel[d]);
            let total = full.saturating_sub(target[d]);
            if total < 0 {
                // the output grows past the full result: the extra is output padding
                out_pad[d] = out_pad[d].saturating_sub(total);
                continue;
            }
            let (lo, hi) = (total / 2, total - total / 2);
            (before[d], after[d]) = if auto == "SAME_LOWER" {
                (hi, lo)
            } else {
                (lo, hi)
            };
        }
    } else {
        let p = c.ints("pads").unwrap_or_else(|| vec![0; 2 * n]);
        if p.len() != 2 * n || p.iter().any(|&v| v < 0) {
            return Err(c.bad(format!("pads {p:?} need {} values, none negative", 2 * n)));
        }
        before.copy_from_slice(&p[..n]);
        after.copy_from_slice(&p[n..]);
    }
    let lift = |v: &[i64], one: i64| if n == 1 { vec![one, v[0]] } else { v.to_vec() };
    let (st, b, a, op) = (
        lift(&strides, 1),
        lift(&before, 0),
        lift(&after, 0),
        lift(&out_pad, 0),
    );
    let (x2, w2) = if n == 1 {
        (
            lift_1d(imp, &c.sub("data_2d"), x)?,
            lift_1d(imp, &c.sub("weight_2d"), w)?,
        )
    } else {
        (x, w)
    };
    let groups = c.int("group", 1);
    let cin = xs[1];
    if groups < 1 || cin % groups != 0 || ws[0] != cin {
        return Err(c.bad(format!(
            "{groups} groups do not divide {cin} input channels"
        )));
    }
    let ct = Op::Conv2dTranspose {
        stride: (st[0], st[1]),
        padding: [b[0], b[1], a[0], a[1]],
        output_padding: (op[0], op[1]),
    };
    let y = if groups == 1 {
        imp.op(&c.sub("2d"), ct, &[x2, w2])?
    } else {
        let per = cin / groups;
        let mut parts = Vec::new();
        for g in 0..groups {
            let (lo, hi) = (g * per, (g + 1) * per);
            let xg = slice_axis(imp, &c.sub(&format!("g{g}_x")), x2, 1, lo, hi)?;
            let wg = slice_axis(imp, &c.sub(&format!("g{g}_w")), w2, 0, lo, hi)?;
            parts.push(imp.op(&c.sub(&format!("g{g}")), ct.clone(), &[xg, wg])?);
        }
        imp.op(&c.sub("groups"), Op::Concat { axis: 1 }, &parts)?
    };
    let y = if n == 1 { drop_1d(imp, &c.name, y)? } else { y };
    Ok(vec![bias_add(imp, c, y, 2)?])
}

/// The float32 kernel `[I, O, k…]` dilated by `dil`: `(k - 1)·d + 1` taps per spatial
/// axis, zeros between the kernel's.
fn dilate_kernel(w: &NDArray, dil: &[i64]) -> Result<NDArray, GraphError> {
    let s = w.shape().to_vec();
    let n = s.len() - 2;
    let mut out_shape = s.clone();
    for d in 0..n {
        out_shape[2 + d] = (s[2 + d] - 1) * dil[d] as usize + 1;
    }
    let src = w.to_f64_vec();
    let mut dst = vec![0.0; out_shape.iter().product()];
    let (kin, kout): (usize, usize) = (s[2..].iter().product(), out_shape[2..].iter().product());
    for (i, v) in src.iter().enumerate() {
        let (plane, mut tap) = (i / kin, i % kin);
        let mut o = 0;
        let mut scale = 1;
        for d in (0..n).rev() {
            let k = tap % s[2 + d];
            tap /= s[2 + d];
            o += k * dil[d] as usize * scale;
            scale *= out_shape[2 + d];
        }
        dst[plane * kout + o] = *v;
    }
    Ok(NDArray::from_f64(w.dtype(), &out_shape, &dst)?)
}

/// `MaxPool`, `AveragePool`: 1-D, 2-D or 3-D.
pub(super) fn pool(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let kind = if c.op == "MaxPool" {
        PoolType::Max
    } else {
        PoolType::Avg
    };
    let include_pad = c.int("count_include_pad", 0) != 0;
    let x = c.input(0)?;
    if kind == PoolType::Max {
        let pool = |imp: &mut Importer, q| pool_of(imp, c, q, kind, false, &c.sub("integers"));
        if let Some(y) = super::quant::max_pool_of_integers(imp, &c.name, x, pool)? {
            return Ok(vec![y]);
        }
    }
    Ok(vec![pool_of(imp, c, x, kind, include_pad, &c.name)?])
}

/// `LpPool`: `(Σ |x|^p)^(1/p)` over each window, as an average pool counting the padding
/// of `|x|^p` times the window's size.
pub(super) fn lp_pool(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let dt = imp.ty(x).dtype;
    // a float before opset 2, an integer from it
    let p = if imp.opset < 2 {
        c.float("p", 2.0) as f64
    } else {
        c.int("p", 2) as f64
    };
    let abs = imp.op(&c.sub("abs"), Op::Math(MathFn::Abs), &[x])?;
    let pe = imp.scalar(&c.sub("p"), dt, p)?;
    let powed = match p {
        1.0 => abs,
        2.0 => imp.op(&c.sub("pow"), Op::Binary(Binary::Mul), &[abs, abs])?,
        _ => imp.op(&c.sub("pow"), Op::BinaryFn(BinaryFn::Power), &[abs, pe])?,
    };
    let mean = pool_of(imp, c, powed, PoolType::Avg, true, &c.sub("mean"))?;
    let area: i64 = c.ints("kernel_shape").unwrap_or_default().iter().product();
    let area = imp.scalar(&c.sub("area"), dt, area as f64)?;
    let total = imp.op(&c.sub("sum"), Op::Binary(Binary::Mul), &[mean, area])?;
    let inv = imp.scalar(&c.sub("inverse_p"), dt, 1.0 / p)?;
    let out = match p {
        1.0 => total,
        2.0 => imp.op(&c.name, Op::Unary(Unary::Sqrt), &[total])?,
        _ => imp.op(&c.name, Op::BinaryFn(BinaryFn::Power), &[total, inv])?,
    };
    Ok(vec![out])
}

/// A 1-D, 2-D or 3-D pooling of `x` by the node's window attributes.
fn pool_of(
    imp: &mut Importer,
    c: &NodeCtx,
    x: NodeIndex,
    kind: PoolType,
    include_pad: bool,
    name: &str,
) -> Result<NodeIndex, GraphError> {
    let xs = imp.shape(x);
    if !(3..=5).contains(&xs.len()) {
        return Err(c.bad(format!(
            "only 1-D, 2-D and 3-D pooling is supported, got {}",
            imp.ty(x)
        )));
    }
    if c.outputs.len() > 1 && !c.out_name(1).is_empty() {
        return Err(c.bad("the indices output of MaxPool is not supported"));
    }
    let kernel = c
        .ints("kernel_shape")
        .ok_or_else(|| c.bad("kernel_shape is required"))?;
    let win = Window::of(c, &xs[2..], kernel)?;
    let ceil = c.int("ceil_mode", 0) != 0;
    if c.int("storage_order", 0) != 0 {
        return Err(c.bad("storage_order 1 is not supported"));
    }
    let pool2d = |imp: &mut Importer, name: &str, x: NodeIndex, win: &Window| {
        let (k, s, d, b, a) = (
            &win.kernel,
            &win.strides,
            &win.dilations,
            &win.before,
            &win.after,
        );
        let mut attrs = Pool2dAttrs::new((k[0], k[1]), (s[0], s[1]), (0, 0))
            .with_padding(b[0], b[1], a[0], a[1])
            .with_dilation((d[0], d[1]));
        attrs.ceil_mode = ceil;
        attrs.count_include_pad = include_pad;
        imp.op(name, Op::Pool2d { kind, attrs }, &[x])
    };
    let y = match xs.len() {
        3 => {
            let x2 = lift_1d(imp, &format!("{name}_2d_in"), x)?;
            let y = pool2d(imp, &format!("{name}_2d"), x2, &win.as_2d())?;
            drop_1d(imp, name, y)?
        }
        4 => pool2d(imp, name, x, &win)?,
        _ => {
            let t = |v: &[i64]| (v[0], v[1], v[2]);
            let (b, a) = (&win.before, &win.after);
            let attrs = Pool3dAttrs::new(t(&win.kernel), t(&win.strides), (0, 0, 0))
                .with_padding([b[0], b[1], b[2], a[0], a[1], a[2]])
                .with_dilation(t(&win.dilations))
                .with_ceil_mode(ceil)
                .with_count_include_pad(include_pad);
            imp.op(name, Op::Pool3d { kind, attrs }, &[x])?
        }
    };
    Ok(y)
}

/// `GlobalAveragePool`, `GlobalMaxPool`: over the spatial axes of a 3-D, 4-D or 5-D
/// tensor, kept as 1.
pub(super) fn global_pool(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let kind = if c.op == "GlobalMaxPool" {
        PoolType::Max
    } else {
        PoolType::Avg
    };
    let y = match imp.rank(x) {
        3 => {
            let x2 = lift_1d(imp, &c.sub("2d_in"), x)?;
            let op = Op::GlobalPool2d {
                kind,
                layout: Layout::Nchw,
            };
            let y = imp.op(&c.sub("2d"), op, &[x2])?;
            drop_1d(imp, &c.name, y)?
        }
        4 => imp.op(
            &c.name,
            Op::GlobalPool2d {
                kind,
                layout: Layout::Nchw,
            },
            &[x],
        )?,
        5 => imp.op(
            &c.name,
            Op::GlobalPool3d {
                kind,
                layout: Layout3d::Ncdhw,
            },
            &[x],
        )?,
        _ => {
            return Err(c.bad(format!(
                "only 1-D, 2-D and 3-D global pooling is supported, got {}",
                imp.ty(x)
            )))
        }
    };
    Ok(vec![y])
}

/// `BatchNormalization` at inference (`spatial = 1` before opset 9; `is_test` and
/// `consumed_inputs` of old opsets mean nothing here).
pub(super) fn batch_norm(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    if c.int("training_mode", 0) != 0 {
        return Err(c.bad("training mode is not supported (inference only)"));
    }
    if imp.opset < 9 && c.int("spatial", 1) == 0 {
        return Err(c.bad("spatial = 0 (statistics per element) is not supported"));
    }
    let ins = [
        c.input(0)?,
        c.input(1)?,
        c.input(2)?,
        c.input(3)?,
        c.input(4)?,
    ];
    let op = Op::BatchNorm {
        epsilon: c.float("epsilon", 1e-5) as f64,
        axis: 1,
    };
    Ok(vec![imp.op(&c.name, op, &ins)?])
}

/// `InstanceNormalization`.
pub(super) fn instance_norm(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let ins = [c.input(0)?, c.input(1)?, c.input(2)?];
    let op = Op::InstanceNorm {
        epsilon: c.float("epsilon", 1e-5) as f64,
        channels_last: false,
    };
    Ok(vec![imp.op(&c.name, op, &ins)?])
}

/// `LayerNormalization` (opset 17): over the axes from `axis` (default -1) on; `Scale`
/// and `B` broadcast to those axes' shape, `B` zero when omitted. The optional `Mean`
/// and `InvStdDev` outputs (for training) are refused.
pub(super) fn layer_norm(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp.shape(x);
    let axis = norm_axis(c, c.int("axis", -1), shape.len())?;
    let norm_shape = shape[axis..].to_vec();
    let dtype = imp.ty(x).dtype;
    let scale = fit_to(imp, c, c.input(1)?, &norm_shape, "scale")?;
    let bias = match c.opt(2) {
        Some(b) => fit_to(imp, c, b, &norm_shape, "bias")?,
        None => imp.filled(&c.sub("bias"), dtype, &norm_shape, 0.0)?,
    };
    let axes: Vec<i64> = (axis as i64..shape.len() as i64).collect();
    let epsilon = c.float("epsilon", 1e-5) as f64;
    let op = Op::LayerNorm {
        axes: axes.clone(),
        epsilon,
    };
    let y = imp.op(&c.name, op, &[x, scale, bias])?;
    if (1..3).all(|k| c.out_name(k).is_empty()) {
        return Ok(vec![y]);
    }
    // the Mean and InvStdDev outputs, over the normalized axes kept as 1
    let mean_of = |imp: &mut Importer, name: &str, v: NodeIndex| {
        let op = Op::Reduce {
            kind: ReduceKind::Mean,
            axes: axes.clone(),
            keepdims: true,
        };
        imp.op(name, op, &[v])
    };
    let mean = mean_of(imp, &c.sub("mean"), x)?;
    let centred = imp.op(&c.sub("centred"), Op::Binary(Binary::Sub), &[x, mean])?;
    let sq = imp.op(
        &c.sub("square"),
        Op::Binary(Binary::Mul),
        &[centred, centred],
    )?;
    let var = mean_of(imp, &c.sub("variance"), sq)?;
    let eps = imp.scalar(&c.sub("epsilon"), dtype, epsilon)?;
    let var = imp.op(&c.sub("variance_eps"), Op::Binary(Binary::Add), &[var, eps])?;
    let std = imp.op(&c.sub("std"), Op::Unary(Unary::Sqrt), &[var])?;
    let inv = imp.op(&c.sub("inv_std"), Op::Math(MathFn::Reciprocal), &[std])?;
    Ok(vec![y, mean, inv])
}

/// `GroupNormalization` (opsets 18 and 21): the channels (axis 1) in `num_groups`
/// groups, each normalized over its channels and the spatial axes, then scaled and
/// shifted per group (opset 18) or per channel (opset 21). A layer normalization of
/// `[N, groups, rest]`, then the scale and bias per channel.
pub(super) fn group_norm(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let shape = imp.shape(x);
    let groups = c.int("num_groups", 0);
    if shape.len() < 2 {
        return Err(c.bad(format!(
            "the input has rank {}, needs [N, C, ...]",
            shape.len()
        )));
    }
    let channels = shape[1];
    if groups < 1 || channels % groups != 0 {
        return Err(c.bad(format!(
            "num_groups {groups} must be positive and divide the {channels} channels"
        )));
    }
    let dtype = imp.ty(x).dtype;
    let rest: i64 = shape[1..].iter().product::<i64>() / groups;
    let grouped = imp.reshape(&c.sub("grouped"), x, vec![shape[0], groups, rest])?;
    let ones = imp.filled(&c.sub("unit_scale"), dtype, &[rest], 1.0)?;
    let no_bias = imp.filled(&c.sub("unit_bias"), dtype, &[rest], 0.0)?;
    let op = Op::LayerNorm {
        axes: vec![2],
        epsilon: c.float("epsilon", 1e-5) as f64,
    };
    let normed = imp.op(&c.sub("normalized"), op, &[grouped, ones, no_bias])?;
    let normed = imp.reshape(&c.sub("ungrouped"), normed, shape.clone())?;
    // per-channel factors, shaped [C, 1, …] to broadcast over the spatial axes
    let mut per_channel = vec![channels];
    per_channel.extend(std::iter::repeat_n(1, shape.len() - 2));
    let per_group = imp.opset < 21;
    let factor = |imp: &mut Importer, k: usize, what: &str| {
        let v = c.input(k)?;
        let want = if per_group { groups } else { channels };
        if imp.shape(v) != [want] {
            return Err(c.bad(format!(
                "{what} has shape {:?}, expected [{want}] (one per {} at opset {})",
                imp.shape(v),
                if per_group { "group" } else { "channel" },
                imp.opset
            )));
        }
        let v = if per_group {
            let column = imp.reshape(&c.sub(&format!("{what}_column")), v, vec![groups, 1])?;
            let spread = Op::BroadcastTo {
                shape: vec![groups, channels / groups],
            };
            imp.op(&c.sub(&format!("{what}_spread")), spread, &[column])?
        } else {
            v
        };
        imp.reshape(&c.sub(&format!("{what}_channels")), v, per_channel.clone())
    };
    let scale = factor(imp, 1, "scale")?;
    let bias = factor(imp, 2, "bias")?;
    let scaled = imp.op(&c.sub("scaled"), Op::Binary(Binary::Mul), &[normed, scale])?;
    Ok(vec![imp.op(
        &c.name,
        Op::Binary(Binary::Add),
        &[scaled, bias],
    )?])
}

/// `v` (a normalization's scale or bias) in the shape `shape`: as it is, reshaped when
/// it has as many elements, else broadcast (NumPy's rules).
fn fit_to(
    imp: &mut Importer,
    c: &NodeCtx,
    v: NodeIndex,
    shape: &[i64],
    what: &str,
) -> Result<NodeIndex, GraphError> {
    let have = imp.shape(v);
    if have == shape {
        return Ok(v);
    }
    if have.iter().product::<i64>() == shape.iter().product::<i64>() {
        return imp.reshape(&c.sub(what), v, shape.to_vec());
    }
    let op = Op::BroadcastTo {
        shape: shape.to_vec(),
    };
    imp.op(&c.sub(what), op, &[v])
}

/// `LRN`.
pub(super) fn lrn(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let size = c.int("size", 0);
    if size < 1 {
        return Err(c.bad("size is required and must be positive"));
    }
    let attrs = LrnAttrs {
        size,
        alpha: c.float("alpha", 1e-4) as f64,
        beta: c.float("beta", 0.75) as f64,
        bias: c.float("bias", 1.0) as f64,
    };
    Ok(vec![imp.op(&c.name, Op::Lrn(attrs), &[c.input(0)?])?])
}

/// `Softmax`, `LogSoftmax`: over `axis` from opset 13; before it, over the input
/// flattened to 2-D at `axis` (default 1).
pub(super) fn softmax(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let s = imp.shape(x);
    let rank = s.len();
    let default = if imp.opset >= 13 { -1 } else { 1 };
    let axis = norm_axis(c, c.int("axis", default), rank)?;
    let op = |axis: i64| {
        if c.op == "LogSoftmax" {
            Op::LogSoftmax { axis }
        } else {
            Op::Softmax { axis }
        }
    };
    if imp.opset >= 13 || axis == rank - 1 {
        return Ok(vec![imp.op(&c.name, op(axis as i64), &[x])?]);
    }
    let (outer, inner) = (
        s[..axis].iter().product::<i64>(),
        s[axis..].iter().product::<i64>(),
    );
    let r = imp.reshape(&c.sub("2d"), x, vec![outer, inner])?;
    let y = imp.op(&c.sub("softmax_2d"), op(1), &[r])?;
    Ok(vec![imp.reshape(&c.name, y, s)?])
}

/// `Gemm`: `alpha · A' · B' + beta · C` as dense (+ bias).
pub(super) fn gemm(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (alpha, beta) = (c.float("alpha", 1.0), c.float("beta", 1.0));
    let mut x = c.input(0)?;
    let w = c.input(1)?;
    let trans_b = c.int("transB", 0) != 0;
    let quantized = if c.int("transA", 0) == 0 {
        super::qproduct::dequantized_product(imp, &c.name, x, w, trans_b)?
    } else {
        None
    };
    if c.int("transA", 0) != 0 {
        x = imp.op(&c.sub("a_t"), Op::Transpose { axes: vec![1, 0] }, &[x])?;
    }
    // dense wants the weight as [N, K]: B when transB, else Bᵀ (unless the int8 kernel
    // took the product)
    let w = if trans_b || quantized.is_some() {
        w
    } else if let Some(v) = imp.constant(w).cloned() {
        if v.ndim() != 2 {
            return Err(c.bad(format!("B must be 2-D, got {}", imp.ty(w))));
        }
        let t = permute(&v, &[1, 0])?;
        imp.g.constant(&c.sub("weight_t"), t)
    } else {
        imp.op(&c.sub("b_t"), Op::Transpose { axes: vec![1, 0] }, &[w])?
    };
    let mut y = match quantized {
        Some(y) => y,
        None => imp.op(&c.name, Op::Dense, &[x, w])?,
    };
    let dt = imp.ty(y).dtype;
    if alpha != 1.0 {
        let s = imp.scalar(&c.sub("alpha"), dt, alpha as f64)?;
        y = imp.op(&c.sub("scaled"), Op::Binary(Binary::Mul), &[y, s])?;
    }
    if let Some(mut bias) = c.opt(2) {
        let n = imp.shape(y)[1];
        if beta != 1.0 {
            let s = imp.scalar(&c.sub("beta"), dt, beta as f64)?;
            bias = imp.op(&c.sub("c_scaled"), Op::Binary(Binary::Mul), &[bias, s])?;
        }
        let cs = imp.shape(bias);
        y = if cs == [n] {
            imp.op(&c.sub("bias"), Op::BiasAdd { axis: 1 }, &[y, bias])?
        } else if cs == [1, n] && imp.constant(bias).is_some() {
            let c1 = imp.reshape(&c.sub("bias_1d"), bias, vec![n])?;
            imp.op(&c.sub("bias"), Op::BiasAdd { axis: 1 }, &[y, c1])?
        } else {
            imp.op(&c.sub("bias"), Op::Binary(Binary::Add), &[y, bias])?
        };
    }
    Ok(vec![y])
}

/// `MatMul` with NumPy's rules: dense when B is a 2-D constant (A flattened to 2-D
/// around it); otherwise 1-D operands promoted, the batch dimensions broadcast and
/// flattened into one, a batched product, and the result reshaped back.
pub(super) fn matmul(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (x, w) = (c.input(0)?, c.input(1)?);
    let (xs, ws) = (imp.shape(x), imp.shape(w));
    if xs.is_empty() || ws.is_empty() {
        return Err(c.bad("MatMul of a 0-D tensor"));
    }
    if ws.len() == 2 && xs.len() >= 2 {
        if let Some(y) = super::qproduct::dequantized_product(imp, &c.name, x, w, false)? {
            return Ok(vec![y]);
        }
    }
    if let (Some(v), 2, true) = (imp.constant(w).cloned(), ws.len(), xs.len() >= 2) {
        let wt = imp.g.constant(&c.sub("weight_t"), permute(&v, &[1, 0])?);
        let k = xs[xs.len() - 1];
        let rows: i64 = xs[..xs.len() - 1].iter().product();
        let x2 = imp.reshape(&c.sub("2d"), x, vec![rows, k])?;
        let y = imp.op(&c.sub("dense"), Op::Dense, &[x2, wt])?;
        let mut out = xs.clone();
        *out.last_mut().expect("rank >= 2") = ws[1];
        return Ok(vec![imp.reshape(&c.name, y, out)?]);
    }
    if xs.len() == 2 && ws.len() == 2 {
        return Ok(vec![imp.op(&c.name, Op::MatMul, &[x, w])?]);
    }
    // promote 1-D operands: [K] is [1, K] on the left, [K, 1] on the right
    let a_shape = if xs.len() == 1 {
        vec![1, xs[0]]
    } else {
        xs.clone()
    };
    let b_shape = if ws.len() == 1 {
        vec![ws[0], 1]
    } else {
        ws.clone()
    };
    let (ab, bb) = (&a_shape[..a_shape.len() - 2], &b_shape[..b_shape.len() - 2]);
    let batch =
        tessera_te::ops::broadcast_shape("matmul", ab, bb).map_err(|e| c.bad(e.to_string()))?;
    let nb: i64 = batch.iter().product();
    let (m, k) = (a_shape[a_shape.len() - 2], a_shape[a_shape.len() - 1]);
    let (k2, n) = (b_shape[b_shape.len() - 2], b_shape[b_shape.len() - 1]);
    if k != k2 {
        return Err(c.bad(format!("inner dimensions differ: {xs:?} × {ws:?}")));
    }
    let to_3d =
        |imp: &mut Importer, t: NodeIndex, shape: &[i64], rows: i64, cols: i64, tag: &str| {
            let t = imp.reshape(&c.sub(&format!("{tag}_promoted")), t, shape.to_vec())?;
            let mut full = batch.clone();
            full.extend([rows, cols]);
            let t = if imp.shape(t) == full {
                t
            } else {
                imp.op(
                    &c.sub(&format!("{tag}_broadcast")),
                    Op::BroadcastTo { shape: full },
                    &[t],
                )?
            };
            imp.reshape(&c.sub(&format!("{tag}_3d")), t, vec![nb, rows, cols])
        };
    let a3 = to_3d(imp, x, &a_shape, m, k, "a")?;
    let b3 = to_3d(imp, w, &b_shape, k, n, "b")?;
    let y = imp.op(&c.sub("batched"), Op::MatMul, &[a3, b3])?;
    let mut out = batch;
    if xs.len() > 1 {
        out.push(m);
    }
    if ws.len() > 1 {
        out.push(n);
    }
    Ok(vec![imp.reshape(&c.name, y, out)?])
}

/// `Col2Im` (opset 18) of a 2-D image: the sliding blocks `[N, C·kh·kw, L]` summed back
/// into `[N, C, H, W]` — the transpose of im2col, so a transposed convolution of the
/// blocks laid out `[N, C·kh·kw, blocks_h, blocks_w]` with a one-hot kernel (channel
/// `c·kh·kw + k` feeds channel `c` at tap `k`, dilated where asked), cropped by the pads
/// and grown by output padding to the image's size. The kernel has `(C·kh·kw)·C` planes:
/// fine for the block counts this operator sees, quadratic in the channels.
pub(super) fn col2im(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let known = |imp: &mut Importer, k: usize, what: &str| -> Result<Vec<i64>, GraphError> {
        imp.const_ints(c, k, what)?
            .ok_or_else(|| c.bad(format!("{what} (input {k}) is missing")))
    };
    let image = known(imp, 1, "the image shape")?;
    let block = known(imp, 2, "the block shape")?;
    if image.len() != 2 || block.len() != 2 {
        return Err(c.bad(format!(
            "only 2-D images are supported (image shape {image:?}, block shape {block:?})"
        )));
    }
    let dil = c.ints("dilations").unwrap_or_else(|| vec![1, 1]);
    let strides = c.ints("strides").unwrap_or_else(|| vec![1, 1]);
    let pads = c.ints("pads").unwrap_or_else(|| vec![0; 4]);
    if dil.len() != 2 || strides.len() != 2 || pads.len() != 4 {
        return Err(c.bad("dilations and strides need 2 values, pads 4"));
    }
    if dil
        .iter()
        .chain(&strides)
        .chain(&block)
        .chain(&image)
        .any(|&v| v < 1)
        || pads.iter().any(|&v| v < 0)
    {
        return Err(c.bad(
            "image and block shapes, dilations and strides must be positive, pads not negative",
        ));
    }
    let xs = imp.shape(x);
    let k = block[0] * block[1];
    let taps: Vec<i64> = (0..2).map(|d| (block[d] - 1) * dil[d] + 1).collect();
    let blocks: Vec<i64> = (0..2)
        .map(|d| (image[d] + pads[d] + pads[d + 2] - taps[d]).div_euclid(strides[d]) + 1)
        .collect();
    if xs.len() != 3
        || xs[1] % k != 0
        || blocks.iter().any(|&b| b < 1)
        || xs[2] != blocks[0] * blocks[1]
    {
        return Err(c.bad(format!(
            "input {xs:?} is not [N, C·{k}, {}] for image {image:?}, block {block:?}",
            blocks.iter().product::<i64>()
        )));
    }
    let ch = xs[1] / k;
    let x4 = imp.reshape(
        &c.sub("blocks"),
        x,
        vec![xs[0], xs[1], blocks[0], blocks[1]],
    )?;
    // the one-hot kernel [C·k, C, taps_h, taps_w]
    let plane = (taps[0] * taps[1]) as usize;
    let mut w = vec![0.0; (xs[1] * ch) as usize * plane];
    for cc in 0..ch {
        for t in 0..k {
            let (th, tw) = (t / block[1] * dil[0], t % block[1] * dil[1]);
            let at = ((cc * k + t) * ch + cc) as usize * plane + (th * taps[1] + tw) as usize;
            w[at] = 1.0;
        }
    }
    let dims = [
        xs[1] as usize,
        ch as usize,
        taps[0] as usize,
        taps[1] as usize,
    ];
    let dt = imp.ty(x).dtype;
    let w = imp
        .g
        .constant(&c.sub("one_hot"), NDArray::from_f64(dt, &dims, &w)?);
    // the full result reaches (blocks - 1)·stride + taps - pads; the rest is zeros
    let grow: Vec<i64> = (0..2)
        .map(|d| image[d] - ((blocks[d] - 1) * strides[d] + taps[d] - pads[d] - pads[d + 2]))
        .collect();
    let op = Op::Conv2dTranspose {
        stride: (strides[0], strides[1]),
        padding: [pads[0], pads[1], pads[2], pads[3]],
        output_padding: (grow[0], grow[1]),
    };
    Ok(vec![imp.op(&c.name, op, &[x4, w])?])
}
