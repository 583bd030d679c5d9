//! Quantized matrix products and convolutions on int8 kernels: `MatMulInteger`,
//! `QLinearMatMul`, and a static-QDQ `MatMul` / `Gemm` (both operands
//! `DequantizeLinear`s, the weight's of a constant) become [`Op::DenseU8I8`] — the bytes
//! multiplied and summed in int32 on the CPU's dot-product instructions — instead of
//! float32 products between dequantized copies; a static-QDQ `Conv` of one group (and
//! `ConvInteger` / `QLinearConv`, from `quant.rs`) with a symmetric int8 weight becomes
//! [`Op::Conv2dU8I8`], NHWC, padded with the data's zero point.
//!
//! With the data `x` (uint8; int8 is read offset by 128, its zero point moved with it)
//! and a constant int8 weight `w` (uint8 weights are moved to int8 by −128 at import),
//! `Σ_k (x − z_x)(w − z_w[j]) = D − z_x·Σ_k w[k, j] − z_w[j]·Σ_k x + K·z_x·z_w[j]`,
//! `D = Σ_k x·w` the int8 kernel; the column sums are constants, so with the usual
//! symmetric weights (`z_w = 0`) the correction is one constant vector times the data's
//! zero point, fused into the kernel's epilogue with the float scale `s_x·s_w[j]` that
//! follows. The integer sums are exact, so a QDQ product equals the float32 product
//! of the dequantized operands up to float32's rounding of the sums (which onnxruntime's
//! own QDQ fusion shares).

use super::Importer;
use crate::error::GraphError;
use crate::ir::{Binary, Op};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{Int8Sums, ReduceKind};

/// What a `DequantizeLinear` output was made from: kept per output so that a product
/// consuming it can take the integers instead.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dequantized {
    /// The quantized tensor.
    pub q: NodeIndex,
    /// The scale as the model gives it (a scalar or 1-D along `axis`).
    pub scale: NodeIndex,
    pub zero_point: Option<NodeIndex>,
    pub axis: i64,
}

/// A constant weight in [`Op::DenseU8I8`]'s form.
struct Weight {
    /// int32 words `[N, ⌈K/4⌉]` of the int8 weight `[N, K]`.
    words: NDArray,
    /// `Σ_k w[j, k]` per output column (int8 values).
    colsum: Vec<i64>,
    /// The zero point per column (one value: for every column), int8 range.
    zero: Vec<i64>,
    k: i64,
    /// Whether its byte pairs fit int16 against any data ([`tessera_te::ops::pairs_fit`]).
    pairs_fit: bool,
}

impl Weight {
    /// `w` (uint8 or int8; `[K, N]`, or `[N, K]` when `nk`) and its zero point (a scalar
    /// or one per column), or `None` for another type or shape.
    fn new(w: &NDArray, zero: Option<&NDArray>, nk: bool) -> Option<Weight> {
        let shift = match w.dtype() {
            t if t == DataType::int(8) => 0,
            t if t == DataType::uint(8) => 128,
            _ => return None,
        };
        let &[a, b] = w.shape() else { return None };
        let (n, k) = if nk { (a, b) } else { (b, a) };
        let v = w.to_f64_vec();
        let mut rows = vec![0i8; n * k];
        for j in 0..n {
            for q in 0..k {
                let x = if nk { v[j * k + q] } else { v[q * n + j] };
                rows[j * k + q] = (x as i64 - shift) as i8;
            }
        }
        let colsum = (0..n)
            .map(|j| rows[j * k..(j + 1) * k].iter().map(|&x| x as i64).sum())
            .collect();
        let zero: Vec<i64> = match zero {
            None => vec![-shift],
            Some(z) if z.len() == 1 || z.len() == n => {
                z.to_f64_vec().iter().map(|&x| x as i64 - shift).collect()
            }
            Some(_) => return None,
        };
        let kw = k.div_ceil(4);
        let words = tessera_te::ops::int8_words(&rows, n, k);
        let pairs_fit = tessera_te::ops::pairs_fit(&words);
        let words = NDArray::from_slice::<i32>(&[n, kw], &words).ok()?;
        Some(Weight {
            words,
            colsum,
            zero,
            k: k as i64,
            pairs_fit,
        })
    }

    fn n(&self) -> usize {
        self.colsum.len()
    }
}

/// The int32 `Σ_k (x − z_x)(w − z_w)` of `x` (uint8 or int8, `[.., K]`) and the constant
/// `w` (`[K, N]`, or `[N, K]` when `nk`): `[.., N]`, or `None` where the int8 kernel does
/// not apply (other types, a zero point of `x` that is not a scalar).
pub(super) fn integer_product(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    x_zero: Option<NodeIndex>,
    w: &NDArray,
    w_zero: Option<&NDArray>,
    nk: bool,
) -> Result<Option<NodeIndex>, GraphError> {
    let xt = imp.ty(x).dtype;
    let offset = match xt {
        t if t == DataType::uint(8) => 0,
        t if t == DataType::int(8) => 128,
        _ => return Ok(None),
    };
    let xs = imp.shape(x);
    if xs.len() < 2 || x_zero.is_some_and(|z| imp.ty(z).numel() != 1) {
        return Ok(None);
    }
    let Some(wt) = Weight::new(w, w_zero, nk) else {
        return Ok(None);
    };
    let k = xs[xs.len() - 1];
    if k != wt.k {
        return Ok(None);
    }
    let i32t = DataType::int32();
    let n = wt.n() as i64;
    let rows: i64 = xs[..xs.len() - 1].iter().product();
    let x2 = imp.reshape(&sub(name, "rows"), x, vec![rows, k])?;
    let words = imp.g.constant(&sub(name, "weight_words"), wt.words.clone());
    let sums = imp.int8_sums(wt.pairs_fit);
    let mut acc = imp.op(
        &sub(name, "int8_product"),
        Op::DenseU8I8 { sums },
        &[x2, words],
    )?;
    // the data's zero point as the kernel reads the data (int8 + 128)
    let zx = match x_zero {
        Some(z) => {
            let zi = imp.op(&sub(name, "x_zero_i32"), Op::Cast { dtype: i32t }, &[z])?;
            let zi = imp.reshape(&sub(name, "x_zero_scalar"), zi, vec![])?;
            if offset == 0 {
                Some(zi)
            } else {
                let off = imp.scalar(&sub(name, "x_offset"), i32t, offset as f64)?;
                Some(imp.binary(&sub(name, "x_zero_read"), Binary::Add, zi, off)?)
            }
        }
        None if offset != 0 => Some(imp.scalar(&sub(name, "x_zero_read"), i32t, offset as f64)?),
        None => None,
    };
    let zw = |j: usize| wt.zero[if wt.zero.len() == 1 { 0 } else { j }];
    if let Some(z) = zx {
        // z_x · (K·z_w[j] − Σ_k w[k, j])
        let coef: Vec<i32> = (0..wt.n())
            .map(|j| (wt.k * zw(j) - wt.colsum[j]) as i32)
            .collect();
        let coef = imp.g.constant(
            &sub(name, "column_terms"),
            NDArray::from_slice::<i32>(&[wt.n()], &coef)?,
        );
        let t = imp.binary(&sub(name, "zero_terms"), Binary::Mul, z, coef)?;
        acc = imp.binary(&sub(name, "corrected"), Binary::Add, acc, t)?;
    }
    if wt.zero.iter().any(|&z| z != 0) {
        // − z_w[j] · Σ_k x[i, k] (the data as the kernel reads it)
        let xi = imp.op(&sub(name, "x_i32"), Op::Cast { dtype: i32t }, &[x2])?;
        let xi = if offset == 0 {
            xi
        } else {
            let off = imp.scalar(&sub(name, "row_offset"), i32t, offset as f64)?;
            imp.binary(&sub(name, "x_read"), Binary::Add, xi, off)?
        };
        let reduce = Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![1],
            keepdims: true,
        };
        let rs = imp.op(&sub(name, "row_sums"), reduce, &[xi])?;
        let z: Vec<i32> = (0..wt.n()).map(|j| zw(j) as i32).collect();
        let z = imp.g.constant(
            &sub(name, "weight_zero"),
            NDArray::from_slice::<i32>(&[wt.n()], &z)?,
        );
        let t = imp.binary(&sub(name, "row_terms"), Binary::Mul, rs, z)?;
        acc = imp.binary(&sub(name, "row_corrected"), Binary::Sub, acc, t)?;
    }
    let mut out = xs.clone();
    *out.last_mut().expect("rank >= 2") = n;
    Ok(Some(imp.reshape(&sub(name, "int32"), acc, out)?))
}

/// A static-QDQ product `x · w` (`w` `[K, N]`, or `[N, K]` when `nk`) whose operands are
/// both `DequantizeLinear` outputs — `x` per tensor, `w` of a constant, per tensor or
/// per output column — as the int8 kernel and the float scale `s_x·s_w[j]`: float32
/// `[.., N]`, or `None` where the pattern does not hold.
pub(super) fn dequantized_product(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    w: NodeIndex,
    nk: bool,
) -> Result<Option<NodeIndex>, GraphError> {
    let Some((dx, dw, wq)) = dequantized_pair(imp, x, w) else {
        return Ok(None);
    };
    let wzero = match dw.zero_point {
        Some(z) => match imp.constant(z) {
            Some(v) => Some(v.clone()),
            None => return Ok(None),
        },
        None => None,
    };
    let n = wq.shape().get(if nk { 0 } else { 1 }).copied().unwrap_or(0) as i64;
    // the weight's scale: one, or one per output column (its axis the column axis)
    let sw_len = imp.ty(dw.scale).numel();
    let column_axis = if nk { 0 } else { 1 };
    if imp.ty(dx.scale).numel() != 1
        || !(sw_len == 1 || (sw_len == n && dw.axis.rem_euclid(2) == column_axis))
    {
        return Ok(None);
    }
    let Some(acc) = integer_product(imp, name, dx.q, dx.zero_point, &wq, wzero.as_ref(), nk)?
    else {
        return Ok(None);
    };
    let channels = if sw_len == 1 { vec![] } else { vec![n] };
    Ok(Some(rescale(imp, name, acc, dx.scale, dw.scale, channels)?))
}

/// The int32 `acc` as float32 times `s_x · s_w` (`s_w` reshaped to `channels`, the shape
/// that broadcasts it along the output channels; empty for one scale): node `name`.
fn rescale(
    imp: &mut Importer,
    name: &str,
    acc: NodeIndex,
    x_scale: NodeIndex,
    w_scale: NodeIndex,
    channels: Vec<i64>,
) -> Result<NodeIndex, GraphError> {
    let sx = cast_f32(imp, name, "x_scale_f32", x_scale)?;
    let sx = imp.reshape(&sub(name, "x_scale_scalar"), sx, vec![])?;
    let sw = cast_f32(imp, name, "w_scale_f32", w_scale)?;
    let sw = imp.reshape(&sub(name, "w_scale_channels"), sw, channels)?;
    let scale = imp.binary(&sub(name, "product_scale"), Binary::Mul, sx, sw)?;
    let f32t = DataType::float32();
    let accf = imp.op(&sub(name, "int32_f32"), Op::Cast { dtype: f32t }, &[acc])?;
    imp.binary(name, Binary::Mul, accf, scale)
}

/// A static-QDQ 2-D convolution of one group whose data and weight are
/// `DequantizeLinear` outputs (the data's per tensor with a constant zero point, the
/// weight's of a constant, symmetric int8 tensor, per tensor or per output channel) as
/// the int8 convolution ([`int8_conv`]) and the float scale: float32 NCHW, or `None`
/// where the pattern does not hold.
pub(super) fn dequantized_conv(
    imp: &mut Importer,
    name: &str,
    x: NodeIndex,
    w: NodeIndex,
    attrs: &tessera_te::ops::Conv2dAttrs,
) -> Result<Option<NodeIndex>, GraphError> {
    let Some((dx, dw, wq)) = dequantized_pair(imp, x, w) else {
        return Ok(None);
    };
    if imp.ty(dx.scale).numel() != 1 {
        return Ok(None);
    }
    let o = wq.shape().first().copied().unwrap_or(0) as i64;
    let sw_len = imp.ty(dw.scale).numel();
    if !(sw_len == 1 || (sw_len == o && dw.axis.rem_euclid(4) == 0)) {
        return Ok(None);
    }
    let Some(acc) = int8_conv(imp, name, dx.q, dx.zero_point, &wq, dw.zero_point, attrs)? else {
        return Ok(None);
    };
    let channels = if sw_len == 1 { vec![] } else { vec![o, 1, 1] };
    Ok(Some(rescale(imp, name, acc, dx.scale, dw.scale, channels)?))
}

/// The int32 `Σ (x − z_x)(w − z_w)` of a 2-D convolution of one group (NCHW, OIHW) on
/// the int8 kernel [`Op::Conv2dU8I8`] — NHWC, padded with the data's zero point so that
/// the padding adds nothing, plus `−z_x·Σ w[o]` — where it applies: uint8 or int8 data
/// with a constant scalar zero point (or none), a constant int8 weight whose zero points
/// are all 0. `None` otherwise. Layout transforms around the kernel keep the graph NCHW
/// as imported; the NHWC conversion removes them again.
pub(super) fn int8_conv(
    imp: &mut Importer,
    name: &str,
    xq: NodeIndex,
    x_zero: Option<NodeIndex>,
    wq: &NDArray,
    w_zero: Option<NodeIndex>,
    attrs: &tessera_te::ops::Conv2dAttrs,
) -> Result<Option<NodeIndex>, GraphError> {
    let offset = match imp.ty(xq).dtype {
        t if t == DataType::uint(8) => 0,
        t if t == DataType::int(8) => 128,
        _ => return Ok(None),
    };
    let xs = imp.shape(xq);
    let (&[_, ch, _, _], &[o, wc, kh, kw]) = (xs.as_slice(), wq.shape()) else {
        return Ok(None);
    };
    let depthwise = attrs.groups == ch && o as i64 == ch && wc == 1;
    if wq.dtype() != DataType::int(8) || !(depthwise || (attrs.groups == 1 && wc as i64 == ch)) {
        return Ok(None);
    }
    let zx = match x_zero {
        None => 0,
        Some(z) => match imp.ints_of(z).as_deref() {
            Some(&[v]) => v,
            _ => return Ok(None),
        },
    };
    let symmetric = match w_zero {
        None => true,
        Some(z) => imp.ints_of(z).is_some_and(|v| v.iter().all(|&x| x == 0)),
    };
    if !symmetric {
        return Ok(None);
    }
    if depthwise {
        return int8_depthwise(imp, name, xq, zx, wq, (o, kh, kw), attrs).map(Some);
    }
    // OIHW bytes as [O·KH·KW, C] rows (OHWI), in words along the input channels
    let rows: Vec<i8> = crate::reference::permute(wq, &[0, 2, 3, 1])?
        .to_f64_vec()
        .into_iter()
        .map(|b| b as i8)
        .collect();
    let k = wc * kh * kw;
    let colsum: Vec<i64> = (0..o)
        .map(|oo| rows[oo * k..(oo + 1) * k].iter().map(|&b| b as i64).sum())
        .collect();
    let words = tessera_te::ops::int8_words(&rows, o * kh * kw, wc);
    let sums = imp.int8_sums(tessera_te::ops::pairs_fit(&words));
    let words = NDArray::from_slice::<i32>(&[o, kh, kw, wc.div_ceil(4)], &words)?;
    let words = imp.g.constant(&sub(name, "weight_words"), words);
    let conv = Op::Conv2dU8I8 {
        attrs: *attrs,
        pad: zx,
        sums,
    };
    // the data as the kernel reads it: int8 + 128
    let acc = nhwc_int32(
        imp,
        name,
        ("int8_conv", conv),
        xq,
        words,
        (zx + offset, &colsum),
    )?;
    Ok(Some(acc))
}

/// The NHWC int8 convolution `op` (node `tag`, weight node `weight`) on `xq` between
/// layout transforms from NCHW and back, plus `−z·Σ w[o]` per output channel (`(z,
/// colsum)`: the data's zero point as the kernel reads the data, each channel's weight
/// sum).
fn nhwc_int32(
    imp: &mut Importer,
    name: &str,
    (tag, op): (&str, Op),
    xq: NodeIndex,
    weight: NodeIndex,
    (z, colsum): (i64, &[i64]),
) -> Result<NodeIndex, GraphError> {
    let to_nhwc = Op::LayoutTransform {
        src: "NCHW".into(),
        dst: "NHWC".into(),
    };
    let xn = imp.op(&sub(name, "data_nhwc"), to_nhwc, &[xq])?;
    let mut acc = imp.op(&sub(name, tag), op, &[xn, weight])?;
    if z != 0 {
        let coef: Vec<i32> = colsum.iter().map(|&s| (-z * s) as i32).collect();
        let coef = imp.g.constant(
            &sub(name, "zero_terms"),
            NDArray::from_slice::<i32>(&[colsum.len()], &coef)?,
        );
        acc = imp.binary(&sub(name, "corrected"), Binary::Add, acc, coef)?;
    }
    let to_nchw = Op::LayoutTransform {
        src: "NHWC".into(),
        dst: "NCHW".into(),
    };
    imp.op(&sub(name, "int32"), to_nchw, &[acc])
}

/// [`int8_conv`]'s depthwise form (one output channel per channel, weight `[C, 1, KH,
/// KW]`): [`Op::DepthwiseU8I8`] on the bytes as they are (no words, no offset), the
/// weight `[KH, KW, C, 1]` as int32 values, then `−z_x·Σ w[c]`.
fn int8_depthwise(
    imp: &mut Importer,
    name: &str,
    xq: NodeIndex,
    zx: i64,
    wq: &NDArray,
    (c, kh, kw): (usize, usize, usize),
    attrs: &tessera_te::ops::Conv2dAttrs,
) -> Result<NodeIndex, GraphError> {
    let taps: Vec<i32> = crate::reference::permute(wq, &[2, 3, 0, 1])?
        .to_f64_vec()
        .into_iter()
        .map(|b| b as i32)
        .collect();
    let mut colsum = vec![0i64; c];
    for (k, &v) in taps.iter().enumerate() {
        colsum[k % c] += i64::from(v);
    }
    let kernel = NDArray::from_slice::<i32>(&[kh, kw, c, 1], &taps)?;
    let kernel = imp.g.constant(&sub(name, "weight_taps"), kernel);
    let conv = Op::DepthwiseU8I8 {
        attrs: *attrs,
        pad: zx,
    };
    nhwc_int32(
        imp,
        name,
        ("int8_depthwise", conv),
        xq,
        kernel,
        (zx, &colsum),
    )
}

/// What float32 `x` and `w` were dequantized from, and `w`'s integers, where both are
/// `DequantizeLinear` outputs and `w`'s integers a constant.
fn dequantized_pair(
    imp: &Importer,
    x: NodeIndex,
    w: NodeIndex,
) -> Option<(Dequantized, Dequantized, NDArray)> {
    let dx = imp.dequantized.get(&x).copied()?;
    let dw = imp.dequantized.get(&w).copied()?;
    let f32t = DataType::float32();
    if imp.ty(x).dtype != f32t || imp.ty(w).dtype != f32t {
        return None;
    }
    let wq = imp.constant(dw.q).cloned()?;
    Some((dx, dw, wq))
}

/// The name of helper node `tag` of the node `name`.
fn sub(name: &str, tag: &str) -> String {
    format!("{name}_{tag}")
}

/// `v` as float32 (nothing when it is).
fn cast_f32(
    imp: &mut Importer,
    name: &str,
    tag: &str,
    v: NodeIndex,
) -> Result<NodeIndex, GraphError> {
    if imp.ty(v).dtype == DataType::float32() {
        Ok(v)
    } else {
        imp.op(
            &sub(name, tag),
            Op::Cast {
                dtype: DataType::float32(),
            },
            &[v],
        )
    }
}

impl Importer {
    /// How an int8 product on a weight sums its bytes: on the shorter form where the
    /// weight's pairs fit int16 (exact either way), else as the import options say.
    fn int8_sums(&self, pairs_fit: bool) -> Int8Sums {
        match (pairs_fit, self.int8_products) {
            (true, _) => Int8Sums::PairsFit,
            (false, super::Int8Products::Exact) => Int8Sums::Exact,
            (false, super::Int8Products::Saturating) => Int8Sums::Saturating,
        }
    }
}
