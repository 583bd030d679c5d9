//! Quantization as onnxruntime's tools write it: `QuantizeLinear` and `DequantizeLinear`
//! (per tensor or per axis), `DynamicQuantizeLinear`, and the integer products
//! `MatMulInteger` and `QLinearMatMul`.
//!
//! The arithmetic is ONNX's exactly: quantizing is `saturate(round_half_to_even(x / s) +
//! z)` into the zero point's type, dequantizing `(x - z) · s`; the integer products
//! subtract the zero points in int32 and multiply and accumulate in int32 (exact, as
//! onnxruntime's), and `QLinearMatMul` requantizes the int32 sums in float32 with
//! `s_a · s_b / s_y`. Where the second operand is a constant (a layer's weight), the
//! products run on the int8 kernel ([`super::qproduct`]); each `DequantizeLinear`
//! output remembers its integers so that a QDQ `MatMul`, `Gemm` or `Conv` takes them
//! too. A `MaxPool` of a dequantized value pools the integers ([`max_pool_of_integers`]),
//! and a `QuantizeLinear` of a value dequantized with the same scale and zero point is
//! those integers ([`requantized`]): `q(dq(x)) = x` exactly, so the pair between two
//! int8 layers costs nothing. Block quantization (`block_size`) is refused.

use super::attrs::NodeCtx;
use super::qproduct::{int8_conv, integer_product, Dequantized};
use super::{tensor, Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_te::ops::{MathFn, ReduceKind};

/// `s` (a scale or zero point: a scalar, or 1-D along `axis` of `x`) shaped to
/// broadcast against `x`.
fn along_axis(
    imp: &mut Importer,
    c: &NodeCtx,
    s: NodeIndex,
    x: NodeIndex,
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    let (ss, xs) = (imp.shape(s), imp.shape(x));
    let n: i64 = ss.iter().product();
    if ss.len() <= 1 && n == 1 {
        return imp.reshape(&c.sub(tag), s, vec![]);
    }
    if c.int("block_size", 0) != 0 {
        return Err(c.bad("block quantization (block_size) is not supported"));
    }
    let rank = xs.len() as i64;
    let axis = c.int("axis", 1);
    let axis = if axis < 0 { axis + rank } else { axis };
    if ss.len() != 1 || !(0..rank).contains(&axis) || xs[axis as usize] != n {
        return Err(c.bad(format!(
            "a {tag} of shape {ss:?} does not fit axis {axis} of {xs:?}"
        )));
    }
    let mut shape = vec![1; xs.len()];
    shape[axis as usize] = n;
    imp.reshape(&c.sub(tag), s, shape)
}

fn cast(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    dtype: DataType,
) -> Result<NodeIndex, GraphError> {
    if imp.ty(x).dtype == dtype {
        return Ok(x);
    }
    imp.op(name, Op::Cast { dtype }, &[x])
}

/// `saturate(round_half_to_even(v) + zp)` in `to` (`v` and `zp` float32).
fn round_saturate(
    imp: &mut Importer,
    c: &NodeCtx,
    v: NodeIndex,
    zp: Option<NodeIndex>,
    to: DataType,
) -> Result<NodeIndex, GraphError> {
    if !to.is_integer() {
        return Err(c.bad(format!(
            "quantizing to {to} is not supported (integer types are)"
        )));
    }
    let r = imp.op(&c.sub("round"), Op::Math(MathFn::RoundEven), &[v])?;
    let r = match zp {
        Some(z) => imp.binary(&c.sub("shift"), Binary::Add, r, z)?,
        None => r,
    };
    let (lo, hi) = to.int_range();
    let clipped = imp.op(
        &c.sub("saturate"),
        Op::Clip {
            min: lo as f64,
            max: hi as f64,
        },
        &[r],
    )?;
    imp.op(&c.name, Op::Cast { dtype: to }, &[clipped])
}

/// The zero point (input `k`) as float32 broadcasting against `x`, and its type.
fn zero_point(
    imp: &mut Importer,
    c: &NodeCtx,
    k: usize,
    x: NodeIndex,
) -> Result<(Option<NodeIndex>, Option<DataType>), GraphError> {
    match c.opt(k) {
        Some(z) => {
            let dt = imp.ty(z).dtype;
            let z = along_axis(imp, c, z, x, "zero_point")?;
            let f = cast(imp, &c.sub("zero_point_f32"), z, DataType::float32())?;
            Ok((Some(f), Some(dt)))
        }
        None => Ok((None, None)),
    }
}

/// `QuantizeLinear`: into the zero point's type (uint8 without one, or `output_dtype`).
pub(super) fn quantize_linear(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let to = match c.int("output_dtype", 0) {
        0 => match c.opt(2) {
            Some(z) => imp.ty(z).dtype,
            None => DataType::uint(8),
        },
        code => tensor::dtype_of(code as i32)
            .ok_or_else(|| c.bad(format!("unsupported output_dtype {code}")))?,
    };
    if let Some(q) = requantized(imp, c, x, to)? {
        return Ok(vec![q]);
    }
    let scale = along_axis(imp, c, c.input(1)?, x, "scale")?;
    let (zp, _) = zero_point(imp, c, 2, x)?;
    let f32t = DataType::float32();
    let xf = cast(imp, &c.sub("x_f32"), x, f32t)?;
    let sf = cast(imp, &c.sub("scale_f32"), scale, f32t)?;
    let v = imp.binary(&c.sub("scaled"), Binary::Div, xf, sf)?;
    Ok(vec![round_saturate(imp, c, v, zp, to)?])
}

/// `DequantizeLinear`: `(x - zp) · scale`, in the scale's type (or `output_dtype`).
pub(super) fn dequantize_linear(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let scale = along_axis(imp, c, c.input(1)?, x, "scale")?;
    let (zp, _) = zero_point(imp, c, 2, x)?;
    let f32t = DataType::float32();
    let xf = cast(imp, &c.sub("x_f32"), x, f32t)?;
    let centred = match zp {
        Some(z) => imp.binary(&c.sub("centred"), Binary::Sub, xf, z)?,
        None => xf,
    };
    let sdt = imp.ty(scale).dtype;
    let sf = cast(imp, &c.sub("scale_f32"), scale, f32t)?;
    let y = imp.binary(&c.sub("dequantized"), Binary::Mul, centred, sf)?;
    let to = match c.int("output_dtype", 0) {
        0 => sdt,
        code => tensor::dtype_of(code as i32)
            .ok_or_else(|| c.bad(format!("unsupported output_dtype {code}")))?,
    };
    let y = cast(imp, &c.name, y, to)?;
    let qt = imp.ty(x).dtype;
    if qt.bits == 8 && qt.is_integer() && c.int("block_size", 0) == 0 {
        let d = Dequantized {
            q: x,
            scale: c.input(1)?,
            zero_point: c.opt(2),
            axis: c.int("axis", 1),
        };
        imp.dequantized.insert(y, d);
    }
    Ok(vec![y])
}

/// Whether nodes `a` and `b` hold the same value: one node, or equal constants (type,
/// shape and elements), or both absent.
fn same_constant(imp: &Importer, a: Option<NodeIndex>, b: Option<NodeIndex>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) if a == b => true,
        (Some(a), Some(b)) => match (imp.constant(a), imp.constant(b)) {
            (Some(x), Some(y)) => {
                x.dtype() == y.dtype()
                    && x.shape().iter().product::<usize>() == y.shape().iter().product::<usize>()
                    && x.to_f64_vec() == y.to_f64_vec()
            }
            _ => false,
        },
        _ => false,
    }
}

/// The integers that `QuantizeLinear` node `c` gives back, when `x` was dequantized from
/// integers of type `to` with the same scale, zero point and axis: `round((q − z)·s / s)
/// + z = q` for every 8-bit `q` (the float32 quotient is within an ulp of the integer
/// `q − z`, whose magnitude is below 256), so the pair is the identity.
fn requantized(
    imp: &Importer,
    c: &NodeCtx,
    x: NodeIndex,
    to: DataType,
) -> Result<Option<NodeIndex>, GraphError> {
    let Some(d) = imp.dequantized.get(&x) else {
        return Ok(None);
    };
    let same = imp.ty(d.q).dtype == to
        && c.int("block_size", 0) == 0
        && same_constant(imp, Some(d.scale), Some(c.input(1)?))
        && same_constant(imp, d.zero_point, c.opt(2))
        && (imp.shape(d.scale).iter().product::<i64>() == 1 || d.axis == c.int("axis", 1));
    Ok(same.then_some(d.q))
}

/// A `MaxPool` of `x` when `x` was dequantized per tensor with a positive constant
/// scale and a constant (or no) zero point: `pool` applied to the integers, dequantized
/// after — the maximum commutes with an increasing affine map, and the integer pool pads
/// with its type's lowest value as the float one pads with −∞ — so the pool reads bytes,
/// as onnxruntime's QDQ MaxPool does, and a QuantizeLinear after it folds away
/// ([`requantized`]). `None` for any other `x`.
pub(super) fn max_pool_of_integers(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    pool: impl FnOnce(&mut Importer, NodeIndex) -> Result<NodeIndex, GraphError>,
) -> Result<Option<NodeIndex>, GraphError> {
    let Some(d) = imp.dequantized.get(&x).cloned() else {
        return Ok(None);
    };
    let scalar = |n: NodeIndex| {
        imp.constant(n)
            .filter(|v| v.shape().iter().product::<usize>() == 1)
    };
    let positive = scalar(d.scale).is_some_and(|v| v.to_f64_vec()[0] > 0.0);
    let zero = match d.zero_point {
        None => Some(None),
        Some(z) => scalar(z).map(|v| Some(v.to_f64_vec()[0])),
    };
    let (true, Some(zero)) = (positive, zero) else {
        return Ok(None);
    };
    let pooled = pool(imp, d.q)?;
    let f32t = DataType::float32();
    let mut y = cast(imp, &format!("{name}_integers_f32"), pooled, f32t)?;
    if let Some(z) = zero.filter(|&z| z != 0.0) {
        let z = imp.scalar(&format!("{name}_zero_point"), f32t, z)?;
        y = imp.binary(&format!("{name}_centred"), Binary::Sub, y, z)?;
    }
    let sdt = imp.ty(d.scale).dtype;
    let s = imp.reshape(&format!("{name}_scale"), d.scale, vec![])?;
    let s = cast(imp, &format!("{name}_scale_f32"), s, f32t)?;
    let y = imp.binary(&format!("{name}_dequantized"), Binary::Mul, y, s)?;
    let y = cast(imp, name, y, sdt)?;
    imp.dequantized.insert(y, Dequantized { q: pooled, ..d });
    Ok(Some(y))
}

/// `DynamicQuantizeLinear`: uint8 over the range of `x` widened to take 0, with the
/// scale and zero point it chose.
pub(super) fn dynamic_quantize_linear(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let f32t = DataType::float32();
    let reduce = |imp: &mut Importer, tag: &str, kind: ReduceKind| {
        let op = Op::Reduce {
            kind,
            axes: vec![],
            keepdims: false,
        };
        imp.op(&c.sub(tag), op, &[x])
    };
    let lo = reduce(imp, "min", ReduceKind::Min)?;
    let hi = reduce(imp, "max", ReduceKind::Max)?;
    let zero = imp.scalar(&c.sub("zero"), f32t, 0.0)?;
    let lo = imp.binary(&c.sub("min0"), Binary::Min, lo, zero)?;
    let hi = imp.binary(&c.sub("max0"), Binary::Max, hi, zero)?;
    let range = imp.binary(&c.sub("range"), Binary::Sub, hi, lo)?;
    let levels = imp.scalar(&c.sub("levels"), f32t, 255.0)?;
    let scale = imp.binary(&c.sub("scale"), Binary::Div, range, levels)?;
    // zp = saturate(round(0 - lo / scale)) in uint8
    let q = imp.binary(&c.sub("lo_scaled"), Binary::Div, lo, scale)?;
    let neg = imp.op(&c.sub("neg_lo"), Op::Math(MathFn::Neg), &[q])?;
    let zr = imp.op(&c.sub("zp_round"), Op::Math(MathFn::RoundEven), &[neg])?;
    let zc = imp.op(
        &c.sub("zp_sat"),
        Op::Clip {
            min: 0.0,
            max: 255.0,
        },
        &[zr],
    )?;
    let zp = imp.op(
        &c.sub("zero_point"),
        Op::Cast {
            dtype: DataType::uint(8),
        },
        &[zc],
    )?;
    let v = imp.binary(&c.sub("scaled"), Binary::Div, x, scale)?;
    let y = round_saturate(imp, c, v, Some(zc), DataType::uint(8))?;
    Ok(vec![y, scale, zp])
}

/// `(a - a_zp)` in int32 (the zero point scalar, or per row of a 2-D `a`).
fn centred_i32(
    imp: &mut Importer,
    c: &NodeCtx,
    a: NodeIndex,
    zp: Option<NodeIndex>,
    tag: &str,
    per_row: bool,
) -> Result<NodeIndex, GraphError> {
    let i32t = DataType::int32();
    let ai = cast(imp, &c.sub(&format!("{tag}_i32")), a, i32t)?;
    let Some(z) = zp else {
        return Ok(ai);
    };
    let zs = imp.shape(z);
    let n: i64 = zs.iter().product();
    let zi = cast(imp, &c.sub(&format!("{tag}_zp_i32")), z, i32t)?;
    let zi = if n == 1 {
        imp.reshape(&c.sub(&format!("{tag}_zp_scalar")), zi, vec![])?
    } else if per_row {
        // a's zero point per row (M): [M, 1]
        imp.reshape(&c.sub(&format!("{tag}_zp_rows")), zi, vec![n, 1])?
    } else {
        // b's zero point per column (N): [N] broadcasts along the last axis
        imp.reshape(&c.sub(&format!("{tag}_zp_cols")), zi, vec![n])?
    };
    imp.binary(&c.sub(&format!("{tag}_centred")), Binary::Sub, ai, zi)
}

/// `a · b` of int32 operands (2-D, or batched with NumPy's rules through `MatMul`'s
/// converter's shapes: here 2-D and 3-D).
fn matmul_i32(
    imp: &mut Importer,
    c: &NodeCtx,
    a: NodeIndex,
    b: NodeIndex,
) -> Result<NodeIndex, GraphError> {
    let (sa, sb) = (imp.shape(a), imp.shape(b));
    match (sa.len(), sb.len()) {
        (2, 2) => imp.op(&c.sub("product"), Op::MatMul, &[a, b]),
        (ra, 2) if ra >= 2 => {
            let k = sa[ra - 1];
            let rows: i64 = sa[..ra - 1].iter().product();
            let a2 = imp.reshape(&c.sub("a_2d"), a, vec![rows, k])?;
            let y = imp.op(&c.sub("product_2d"), Op::MatMul, &[a2, b])?;
            let mut out = sa.clone();
            out[ra - 1] = sb[1];
            imp.reshape(&c.sub("product"), y, out)
        }
        (3, 3) if sa[0] == sb[0] => imp.op(&c.sub("product"), Op::MatMul, &[a, b]),
        _ => Err(c.bad(format!(
            "integer products of {sa:?} × {sb:?} are not supported"
        ))),
    }
}

/// The int8 kernel's `(a − a_zp) · (b − b_zp)` ([`integer_product`]) where `b` (input
/// `bi`, zero point `bz`) is a 2-D constant with a constant zero point; `None` otherwise.
fn constant_weight_product(
    imp: &mut Importer,
    c: &NodeCtx,
    ai: usize,
    az: usize,
    bi: usize,
    bz: usize,
) -> Result<Option<NodeIndex>, GraphError> {
    let Some(b) = imp.constant(c.input(bi)?).cloned() else {
        return Ok(None);
    };
    let b_zero = match c.opt(bz) {
        Some(z) => match imp.constant(z) {
            Some(v) => Some(v.clone()),
            None => return Ok(None),
        },
        None => None,
    };
    integer_product(
        imp,
        &c.name,
        c.input(ai)?,
        c.opt(az),
        &b,
        b_zero.as_ref(),
        false,
    )
}

/// `MatMulInteger`: int32 `(a - a_zp) · (b - b_zp)`.
pub(super) fn matmul_integer(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    if let Some(acc) = constant_weight_product(imp, c, 0, 2, 1, 3)? {
        return Ok(vec![acc]);
    }
    let a = centred_i32(imp, c, c.input(0)?, c.opt(2), "a", true)?;
    let b = centred_i32(imp, c, c.input(1)?, c.opt(3), "b", false)?;
    Ok(vec![matmul_i32(imp, c, a, b)?])
}

/// `QLinearMatMul`: the int32 product requantized, `saturate(round(acc · s_a s_b / s_y) +
/// z_y)`.
pub(super) fn qlinear_matmul(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let acc = match constant_weight_product(imp, c, 0, 2, 3, 5)? {
        Some(acc) => acc,
        None => {
            let a = centred_i32(imp, c, c.input(0)?, c.opt(2), "a", true)?;
            let b = centred_i32(imp, c, c.input(3)?, c.opt(5), "b", false)?;
            matmul_i32(imp, c, a, b)?
        }
    };
    let f32t = DataType::float32();
    let sa = cast(imp, &c.sub("sa"), c.input(1)?, f32t)?;
    let sb = cast(imp, &c.sub("sb"), c.input(4)?, f32t)?;
    let sa = along_last_or_rows(imp, c, sa, true, "sa_b")?;
    let sb = along_last_or_rows(imp, c, sb, false, "sb_b")?;
    let sab = imp.binary(&c.sub("sab"), Binary::Mul, sa, sb)?;
    Ok(vec![requantize(imp, c, acc, sab)?])
}

/// The QLinear operators' output: the int32 `acc` times `input_scales / y_scale` (the
/// node's inputs 6 and 7 are `y_scale` and `y_zero_point`), rounded, plus the zero
/// point, saturated to its type.
fn requantize(
    imp: &mut Importer,
    c: &NodeCtx,
    acc: NodeIndex,
    input_scales: NodeIndex,
) -> Result<NodeIndex, GraphError> {
    let f32t = DataType::float32();
    let accf = cast(imp, &c.sub("acc_f32"), acc, f32t)?;
    let sy = cast(imp, &c.sub("sy"), c.input(6)?, f32t)?;
    let m = imp.binary(&c.sub("multiplier"), Binary::Div, input_scales, sy)?;
    let v = imp.binary(&c.sub("requantized"), Binary::Mul, accf, m)?;
    let zy = c.input(7)?;
    let to = imp.ty(zy).dtype;
    let zf = cast(imp, &c.sub("zy_f32"), zy, f32t)?;
    round_saturate(imp, c, v, Some(zf), to)
}

/// A scale that is a scalar, per row of `a` (`[M, 1]`) or per column of `b` (`[N]`).
fn along_last_or_rows(
    imp: &mut Importer,
    c: &NodeCtx,
    s: NodeIndex,
    rows: bool,
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    let n: i64 = imp.shape(s).iter().product();
    let shape = match (n, rows) {
        (1, _) => vec![],
        (_, true) => vec![n, 1],
        (_, false) => vec![n],
    };
    imp.reshape(&c.sub(tag), s, shape)
}

/// `Σ (x − z_x)(w − z_w)` of a 2-D convolution in int32 (`x` input `xi` with zero point
/// `xz`, `w` input `wi` with `wz`): the int8 kernel where it applies ([`int8_conv`]),
/// else a convolution of the centred values in int32 (exact either way).
fn integer_conv(
    imp: &mut Importer,
    c: &NodeCtx,
    (xi, xz): (usize, usize),
    (wi, wz): (usize, usize),
) -> Result<NodeIndex, GraphError> {
    let (x, w) = (c.input(xi)?, c.input(wi)?);
    let attrs = super::nn::conv2d_attrs(c, &imp.shape(x), &imp.shape(w))?;
    if let Some(wv) = imp.constant(w).cloned() {
        if let Some(acc) = int8_conv(imp, &c.name, x, c.opt(xz), &wv, c.opt(wz), &attrs)? {
            return Ok(acc);
        }
    }
    let i32t = DataType::int32();
    let xc = centred_i32(imp, c, x, c.opt(xz), "x", false)?;
    let wc = cast(imp, &c.sub("w_i32"), w, i32t)?;
    let wc = match c.opt(wz) {
        Some(z) => {
            let o = imp.shape(w)[0];
            let n: i64 = imp.shape(z).iter().product();
            let zi = cast(imp, &c.sub("w_zp_i32"), z, i32t)?;
            let shape = if n == 1 { vec![] } else { vec![o, 1, 1, 1] };
            let zi = imp.reshape(&c.sub("w_zp_channels"), zi, shape)?;
            imp.binary(&c.sub("w_centred"), Binary::Sub, wc, zi)?
        }
        None => wc,
    };
    let op = Op::Conv2d {
        attrs,
        layout: crate::ir::Layout::Nchw,
    };
    imp.op(&c.sub("int32"), op, &[xc, wc])
}

/// `ConvInteger`: the int32 convolution `Σ (x − x_zp)(w − w_zp)`.
pub(super) fn conv_integer(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    Ok(vec![integer_conv(imp, c, (0, 2), (1, 3))?])
}

/// `QLinearConv`: the int32 convolution plus the int32 bias, requantized,
/// `saturate(round(acc · s_x s_w / s_y) + z_y)` (`s_w` per tensor or per output channel).
pub(super) fn qlinear_conv(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let mut acc = integer_conv(imp, c, (0, 2), (3, 5))?;
    if let Some(b) = c.opt(8) {
        let b = cast(imp, &c.sub("bias_i32"), b, DataType::int32())?;
        acc = imp.op(&c.sub("bias"), Op::BiasAdd { axis: 1 }, &[acc, b])?;
    }
    let f32t = DataType::float32();
    let o = imp.shape(c.input(3)?)[0];
    let sx = cast(imp, &c.sub("sx"), c.input(1)?, f32t)?;
    let sx = imp.reshape(&c.sub("sx_scalar"), sx, vec![])?;
    let sw = cast(imp, &c.sub("sw"), c.input(4)?, f32t)?;
    let n: i64 = imp.shape(sw).iter().product();
    let sw = imp.reshape(
        &c.sub("sw_channels"),
        sw,
        if n == 1 { vec![] } else { vec![o, 1, 1] },
    )?;
    let sxw = imp.binary(&c.sub("sxw"), Binary::Mul, sx, sw)?;
    Ok(vec![requantize(imp, c, acc, sxw)?])
}
