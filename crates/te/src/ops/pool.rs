//! Pooling: max/avg pool2d and pool3d, global and adaptive pooling (2-D and 3-D),
//! written as TVM's C++ TOPI (`topi::nn::pool_impl_nd`, `topi::nn::adaptive_pool_impl`)
//! writes them.
//!
//! - pool2d: an optional padded input `pad_temp` (axes `ax0, …`, tag `elemwise`, filled
//!   with the lowest value of the type for max pooling and 0 for average pooling), then
//!   `tensor` (`max=` over `rv0, rv1`, tag `pool_max`), or for average pooling a sum
//!   `tensor` (tag `pool_sum`) and a `tensor` dividing it by the window size (tag
//!   `elemwise`).
//! - adaptive and global pooling: `adaptive_pool_max` (tag `adaptive_pool_max`), or
//!   `adaptive_pool_sum` (tag `adaptive_pool_sum`) and `adaptive_pool_avg` (tag
//!   `elemwise`). Output index `o` of an input dimension of size `n` pooled to `m` reads
//!   `[floor(o·n/m), ceil((o+1)·n/m))`. TVM gives the reduce axes that variable extent;
//!   here a reduce axis has the largest window's extent and, where windows differ in
//!   size, the reduction's condition masks the tail of the shorter ones. The average
//!   divides by the window size: a constant where all windows of an axis are equal,
//!   else `end - start` cast to the data type.
//!
//! Index arithmetic is folded the way TVM's expression builders fold it (`x*1` is `x`,
//! `x + 0` is `x`, constants combine), so the DAGs print as TVM prints them.

use super::attr_err;
use crate::error::TeError;
use crate::tensor::{
    compute_tagged, max, reduce_axis, sum, ComputeBody, IterVar, Reduce, ReduceOp, Tensor,
};
use tessera_ir::{BinOp, DataType, Expr};

/// The reduction of a pooling window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolType {
    Max,
    Avg,
}

/// The attributes of a 2-D pooling (TVM's `max_pool2d` / `avg_pool2d` attributes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool2dAttrs {
    /// (height, width) of the window.
    pub pool_size: (i64, i64),
    /// (height, width) strides.
    pub strides: (i64, i64),
    /// (height, width) dilations.
    pub dilation: (i64, i64),
    /// Padding: top, left, bottom, right.
    pub padding: [i64; 4],
    /// The data layout: `NCHW`, `NHWC`, or another layout of primal axes with `H` and
    /// `W` unsplit (e.g. `NCHW16c`).
    pub layout: String,
    /// Whether the output size rounds up (TVM's formula: the bottom/right padding grows
    /// by `stride - 1`).
    pub ceil_mode: bool,
    /// Average pooling only: whether padded elements count in the divisor.
    pub count_include_pad: bool,
}

impl Pool2dAttrs {
    /// A `pool_size` window with `strides` and symmetric (height, width) `padding`;
    /// dilation 1, layout `NCHW`, floor mode, padding not counted (TVM's defaults).
    pub fn new(pool_size: (i64, i64), strides: (i64, i64), padding: (i64, i64)) -> Self {
        Pool2dAttrs {
            pool_size,
            strides,
            dilation: (1, 1),
            padding: [padding.0, padding.1, padding.0, padding.1],
            layout: "NCHW".into(),
            ceil_mode: false,
            count_include_pad: false,
        }
    }
    pub fn with_padding(mut self, top: i64, left: i64, bottom: i64, right: i64) -> Self {
        self.padding = [top, left, bottom, right];
        self
    }
    pub fn with_dilation(mut self, dilation: (i64, i64)) -> Self {
        self.dilation = dilation;
        self
    }
    pub fn with_layout(mut self, layout: &str) -> Self {
        self.layout = layout.to_string();
        self
    }
    pub fn with_ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }
    pub fn with_count_include_pad(mut self, count_include_pad: bool) -> Self {
        self.count_include_pad = count_include_pad;
        self
    }
}

// ----- folding expression builders (TVM's `arith::TryConstFold`) -----

fn fold_bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        if a.dtype() == b.dtype() {
            let v = match op {
                BinOp::Add => x.checked_add(y),
                BinOp::Sub => x.checked_sub(y),
                BinOp::Mul => x.checked_mul(y),
                BinOp::Div if y != 0 => x.checked_div(y),
                BinOp::FloorDiv => floordiv(x, y),
                BinOp::FloorMod => floordiv(x, y).and_then(|q| x.checked_sub(q.checked_mul(y)?)),
                BinOp::Min => Some(x.min(y)),
                BinOp::Max => Some(x.max(y)),
                _ => None,
            };
            if let Some(v) = v {
                return Expr::int_of(a.dtype(), v);
            }
        }
    }
    let (ca, cb) = (a.as_int(), b.as_int());
    match op {
        BinOp::Add if ca == Some(0) => return b,
        BinOp::Add | BinOp::Sub if cb == Some(0) => return a,
        BinOp::Mul if ca == Some(1) => return b,
        BinOp::Mul if cb == Some(1) => return a,
        BinOp::Div | BinOp::FloorDiv if cb == Some(1) => return a,
        BinOp::FloorMod if cb == Some(1) => return Expr::int_of(a.dtype(), 0),
        _ => {}
    }
    Expr::binary(op, a, b)
}

/// `⌊x / y⌋`, or `None` for a zero divisor or an overflow.
fn floordiv(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    Some(if x % y != 0 && ((x < 0) != (y < 0)) {
        q - 1
    } else {
        q
    })
}

fn add(a: Expr, b: impl Into<Expr>) -> Expr {
    fold_bin(BinOp::Add, a, b.into())
}
fn sub(a: Expr, b: impl Into<Expr>) -> Expr {
    fold_bin(BinOp::Sub, a, b.into())
}
fn mul(a: Expr, b: impl Into<Expr>) -> Expr {
    fold_bin(BinOp::Mul, a, b.into())
}

// ----- layouts -----

/// The positions of the `H` and `W` axes of `layout` for a tensor of shape `s` (TVM's
/// `find_height_width`): primal axes are upper-case letters, sub-axes a factor and a
/// lower-case letter; `H` and `W` must be present and unsplit.
fn find_height_width(op: &str, layout: &str, s: &[i64]) -> Result<(usize, usize), TeError> {
    let p = find_spatial(op, layout, s, &['H', 'W'])?;
    Ok((p[0], p[1]))
}

/// The positions of the `D`, `H` and `W` axes of `layout` (TVM's
/// `find_depth_height_width`), unsplit, as [`find_height_width`].
fn find_depth_height_width(op: &str, layout: &str, s: &[i64]) -> Result<[usize; 3], TeError> {
    let p = find_spatial(op, layout, s, &['D', 'H', 'W'])?;
    Ok([p[0], p[1], p[2]])
}

/// The positions of the primal axes `chars` of `layout` for a tensor of shape `s`; they
/// must be present and unsplit.
fn find_spatial(op: &str, layout: &str, s: &[i64], chars: &[char]) -> Result<Vec<usize>, TeError> {
    let bad = |why: String| attr_err(op, "layout", format!("`{layout}`: {why}"));
    let axes = super::injective::Layout::parse(op, "layout", layout)?.axes;
    if axes.iter().any(|(c, f)| f.is_some() && chars.contains(c)) {
        let names = if chars.len() == 2 {
            "the height and width axes".to_string()
        } else {
            "the depth, height and width axes".to_string()
        };
        return Err(bad(format!("{names} cannot be split")));
    }
    let pos = |c: char| axes.iter().position(|a| *a == (c, None));
    let found: Vec<Option<usize>> = chars.iter().map(|&c| pos(c)).collect();
    if found.iter().any(Option::is_none) {
        let why = if chars.len() == 2 {
            "needs an `H` and a `W` axis".to_string()
        } else {
            "needs a `D`, an `H` and a `W` axis".to_string()
        };
        return Err(bad(why));
    }
    if axes.len() != s.len() {
        return Err(bad(format!(
            "{} axes for a tensor of {} dimensions {s:?}",
            axes.len(),
            s.len()
        )));
    }
    for (i, (c, f)) in axes.iter().enumerate() {
        if let Some(f) = f {
            if s[i] != *f {
                return Err(TeError::BadShape {
                    op: op.to_string(),
                    shape: s.to_vec(),
                    reason: format!(
                        "sub-axis `{f}{}` of layout `{layout}` has size {}",
                        c.to_ascii_lowercase(),
                        s[i]
                    ),
                });
            }
        }
    }
    Ok(found.into_iter().flatten().collect())
}

fn ax_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ax{i}")).collect()
}

/// [`compute_tagged`] with the axes named `ax0, ax1, …` (TVM's C++ `te::compute`).
fn compute_ax<B: Into<ComputeBody>>(
    shape: &[i64],
    name: &str,
    tag: &str,
    f: impl FnOnce(&[Expr]) -> B,
) -> Result<Tensor, TeError> {
    let names = ax_names(shape.len());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    compute_tagged(shape, name, tag, &refs, f)
}

/// `n` as a constant of `dtype` or, for a non-constant, converted to it (TVM's binary
/// operator type matching: an int32 divisor of a float sum is cast).
fn as_dtype(dtype: DataType, e: Expr) -> Expr {
    if e.dtype() == dtype {
        e
    } else if let Some(v) = e.as_int() {
        Expr::constant(dtype, v as f64)
    } else {
        Expr::cast(dtype, e)
    }
}

fn check_dtype(op: &str, x: &Tensor) -> Result<(), TeError> {
    if x.dtype().is_bool() {
        return Err(attr_err(
            op,
            "dtype",
            format!("cannot pool the bool tensor `{}`", x.name()),
        ));
    }
    Ok(())
}

/// The pooled axes of an N-D pooling and their attributes.
struct PoolNd {
    axes: Vec<usize>,
    kernel: Vec<i64>,
    stride: Vec<i64>,
    dilation: Vec<i64>,
    pad_head: Vec<i64>,
    pad_tail: Vec<i64>,
    ceil_mode: bool,
    count_include_pad: bool,
}

/// TVM's `pool_impl_nd` over the dimensions `p.axes` of `x`.
/// The window's sizes, strides and dilations are positive and fit int32 indices, the
/// padding is not negative.
fn check_pool_attrs(op: &str, p: &PoolNd) -> Result<(), TeError> {
    for (attr, v) in [
        ("pool_size", &p.kernel),
        ("strides", &p.stride),
        ("dilation", &p.dilation),
    ] {
        if v.iter().any(|e| *e <= 0) {
            return Err(attr_err(op, attr, format!("{v:?} must be positive")));
        }
        if v.iter().any(|e| *e > i32::MAX as i64) {
            return Err(attr_err(
                op,
                attr,
                format!("{v:?} is too large for int32 indices"),
            ));
        }
    }
    if p.pad_head.iter().chain(&p.pad_tail).any(|e| *e < 0) {
        return Err(attr_err(
            op,
            "padding",
            format!(
                "{:?} (before) / {:?} (after) must not be negative",
                p.pad_head, p.pad_tail
            ),
        ));
    }
    Ok(())
}

fn pool_impl_nd(op: &str, x: &Tensor, pool_type: PoolType, p: &PoolNd) -> Result<Tensor, TeError> {
    check_dtype(op, x)?;
    check_pool_attrs(op, p)?;
    let k_size = p.axes.len();
    let dshape = x.shape();
    let mut out_shape = dshape.to_vec();
    let mut offset = vec![0i64; k_size];
    let mut pad_tail = p.pad_tail.clone();
    let mut pad_before = vec![0i64; dshape.len()];
    let mut pad_after = vec![0i64; dshape.len()];
    // Whether the last window of a dimension may start past the input and its padding
    // (ceil mode with a stride larger than the window): its divisor would be zero.
    let mut past_end = vec![false; k_size];
    for i in 0..k_size {
        let ii = p.axes[i];
        let too_large = |attr: &str| attr_err(op, attr, "too large for int32 indices");
        let dk = (p.kernel[i] - 1)
            .checked_mul(p.dilation[i])
            .and_then(|v| v.checked_add(1))
            .ok_or_else(|| too_large("pool_size"))?;
        let padded = dshape[ii]
            .checked_add(p.pad_head[i])
            .and_then(|v| v.checked_add(p.pad_tail[i]))
            .filter(|v| *v <= i32::MAX as i64 / 2)
            .ok_or_else(|| too_large("padding"))?;
        if dk > padded {
            return Err(attr_err(
                op,
                "pool_size",
                format!(
                    "the (dilated) window {dk} is larger than the padded input {padded} in \
                     dimension {ii}"
                ),
            ));
        }
        if p.ceil_mode {
            offset[i] = p.stride[i] - 1;
            pad_tail[i] = pad_tail[i]
                .checked_add(offset[i])
                .filter(|_| {
                    padded
                        .checked_add(offset[i])
                        .is_some_and(|v| v <= i32::MAX as i64)
                })
                .ok_or_else(|| too_large("strides"))?;
        }
        let mut out = (padded + offset[i] - dk) / p.stride[i] + 1;
        // In ceil mode a last window that would start in the right padding is dropped
        // (ONNX's rule, as PyTorch and onnxruntime compute it).
        if p.ceil_mode && out > 1 && (out - 1) * p.stride[i] >= dshape[ii] + p.pad_head[i] {
            out -= 1;
        }
        out_shape[ii] = out;
        pad_before[ii] = p.pad_head[i];
        pad_after[ii] = pad_tail[i];
        past_end[i] = (out - 1) * p.stride[i] - p.pad_head[i] > dshape[ii] + p.pad_tail[i] - 1;
    }
    let do_pad = pad_before.iter().chain(&pad_after).any(|v| *v != 0);
    let dt = x.dtype();
    let temp = if do_pad {
        let value = match pool_type {
            PoolType::Max => ReduceOp::Max.identity(dt),
            PoolType::Avg => Expr::constant(dt, 0.0),
        };
        super::injective::pad_cpp(x, &pad_before, &pad_after, value, "pad_temp")?
    } else {
        x.clone()
    };
    let daxis: Vec<IterVar> = (0..k_size)
        .map(|i| reduce_axis(p.kernel[i], &format!("rv{i}")))
        .collect();
    let window = |ix: &[Expr]| -> Vec<Expr> {
        let mut idx = ix.to_vec();
        for (i, rv) in daxis.iter().enumerate() {
            let ii = p.axes[i];
            idx[ii] = add(
                mul(ix[ii].clone(), p.stride[i]),
                mul(rv.expr(), p.dilation[i]),
            );
        }
        idx
    };
    match pool_type {
        PoolType::Max => compute_ax(&out_shape, "tensor", "pool_max", |ix| {
            max(temp.at(&window(ix)), &daxis)
        }),
        PoolType::Avg => {
            let pool_sum = compute_ax(&out_shape, "tensor", "pool_sum", |ix| {
                sum(temp.at(&window(ix)), &daxis)
            })?;
            compute_ax(&out_shape, "tensor", "elemwise", |ix| {
                let mut num_el = Expr::int(1);
                for i in 0..k_size {
                    let ii = p.axes[i];
                    let d = p.dilation[i];
                    let start = sub(mul(ix[ii].clone(), p.stride[i]), p.pad_head[i]);
                    let end = add(start.clone(), (p.kernel[i] - 1) * d);
                    let factor = if p.count_include_pad {
                        let end =
                            Expr::min(end, Expr::int(dshape[ii] + pad_tail[i] - 1 - offset[i]));
                        let f = add(fold_bin(BinOp::Div, sub(end, start), Expr::int(d)), 1);
                        // Only here can a window lie wholly past the input and its
                        // padding (ceil mode, stride > window): TVM's divisor is then
                        // zero or negative; the window sums padding zeros, so 1 is exact.
                        if past_end[i] {
                            Expr::max(f, Expr::int(1))
                        } else {
                            f
                        }
                    } else {
                        let jumps = fold_bin(
                            BinOp::Div,
                            sub(Expr::int(d - 1), start.clone()),
                            Expr::int(d),
                        );
                        let jumps = Expr::max(jumps, Expr::int(0));
                        let end = Expr::min(end, Expr::int(dshape[ii] - 1));
                        let first = add(start, mul(Expr::int(d), jumps));
                        add(fold_bin(BinOp::Div, sub(end, first), Expr::int(d)), 1)
                    };
                    num_el = mul(num_el, factor);
                }
                let divisor = if p.count_include_pad {
                    num_el
                } else {
                    Expr::max(num_el, Expr::int(1))
                };
                pool_sum.at(ix) / as_dtype(dt, divisor)
            })
        }
    }
}

/// 2-D max or average pooling over the `H` and `W` axes of `x` (TVM's
/// `topi::nn::pool2d`). See the module documentation for the stages.
///
/// Errors: a non-positive window, stride or dilation, negative padding, a window larger
/// than the padded input, or a layout without unsplit `H` and `W` axes (or with another
/// rank than `x`) are [`TeError::BadAttr`] errors naming the attribute.
pub fn pool2d(x: &Tensor, pool_type: PoolType, attrs: &Pool2dAttrs) -> Result<Tensor, TeError> {
    let op = "pool2d";
    let (h, w) = find_height_width(op, &attrs.layout, x.shape())?;
    let a = attrs;
    pool_impl_nd(
        op,
        x,
        pool_type,
        &PoolNd {
            axes: vec![h, w],
            kernel: vec![a.pool_size.0, a.pool_size.1],
            stride: vec![a.strides.0, a.strides.1],
            dilation: vec![a.dilation.0, a.dilation.1],
            pad_head: vec![a.padding[0], a.padding[1]],
            pad_tail: vec![a.padding[2], a.padding[3]],
            ceil_mode: a.ceil_mode,
            count_include_pad: a.count_include_pad,
        },
    )
}

/// The largest window of an adaptive pooling of `n` elements to `m` (`n = q·m + r`:
/// windows hold `q` elements when `r = 0`, else `q + 1` or `q + 2`, and `q + 2` occurs
/// exactly when `r` does not divide `m`) and whether all windows have that size.
fn adaptive_window(n: i64, m: i64) -> (i64, bool) {
    let (q, r) = (n / m, n % m);
    if r == 0 {
        (q, true)
    } else if m % r == 0 {
        (q + 1, true)
    } else {
        (q + 2, false)
    }
}

fn adaptive_impl(
    op: &str,
    x: &Tensor,
    output_size: &[i64],
    pool_type: PoolType,
    axes: &[usize],
) -> Result<Tensor, TeError> {
    check_dtype(op, x)?;
    let dshape = x.shape();
    let mut out_shape = dshape.to_vec();
    let mut windows = Vec::new();
    for (i, &m) in output_size.iter().enumerate() {
        let n = dshape[axes[i]];
        if m <= 0 {
            return Err(attr_err(
                op,
                "output_size",
                format!("{output_size:?} must be positive"),
            ));
        }
        // The index arithmetic `(o + 1)·n` is int32.
        if (m as i128 + 1) * n as i128 > i32::MAX as i128 {
            return Err(attr_err(
                op,
                "output_size",
                format!("{output_size:?} times the input size {n} overflows int32 indices"),
            ));
        }
        out_shape[axes[i]] = m;
        windows.push(adaptive_window(n, m));
    }
    let dt = x.dtype();
    let in_size: Vec<i64> = axes.iter().map(|a| dshape[*a]).collect();
    // start, end of the window of output index `o` in pooled dimension `i`.
    let bounds = |o: &Expr, i: usize| -> (Expr, Expr) {
        let (n, m) = (in_size[i], output_size[i]);
        let start = fold_bin(BinOp::FloorDiv, mul(o.clone(), n), Expr::int(m));
        let next = mul(add(o.clone(), 1), n);
        let tmp = fold_bin(BinOp::FloorDiv, next.clone(), Expr::int(m));
        let rem = fold_bin(BinOp::FloorMod, next, Expr::int(m));
        let end = match rem.as_int() {
            Some(0) => tmp,
            Some(_) => add(tmp, 1),
            None => Expr::select(rem.eq(0), tmp.clone(), add(tmp, 1)),
        };
        (start, end)
    };
    let rv: Vec<IterVar> = windows
        .iter()
        .enumerate()
        .map(|(i, (wmax, _))| reduce_axis(*wmax, &format!("rv{i}")))
        .collect();
    let reduction = |ix: &[Expr], red: fn(Expr, &[IterVar]) -> Reduce| {
        let mut idx = ix.to_vec();
        let mut conds = Vec::new();
        for i in 0..axes.len() {
            let (start, end) = bounds(&ix[axes[i]], i);
            idx[axes[i]] = add(start.clone(), rv[i].expr());
            if !windows[i].1 {
                conds.push(rv[i].expr().lt(sub(end, start)));
            }
        }
        let r = red(x.at(&idx), &rv);
        if conds.is_empty() {
            r
        } else {
            r.with_condition(Expr::all(conds))
        }
    };
    match pool_type {
        PoolType::Max => compute_ax(&out_shape, "adaptive_pool_max", "adaptive_pool_max", |ix| {
            reduction(ix, max)
        }),
        PoolType::Avg => {
            let pool_sum =
                compute_ax(&out_shape, "adaptive_pool_sum", "adaptive_pool_sum", |ix| {
                    reduction(ix, sum)
                })?;
            compute_ax(&out_shape, "adaptive_pool_avg", "elemwise", |ix| {
                let mut factor: Option<Expr> = None;
                for i in 0..axes.len() {
                    let f = if windows[i].1 {
                        Expr::constant(dt, windows[i].0 as f64)
                    } else {
                        let (start, end) = bounds(&ix[axes[i]], i);
                        as_dtype(dt, sub(end, start))
                    };
                    factor = Some(match factor {
                        None => f,
                        Some(g) => match (g.as_float(), f.as_float()) {
                            (Some(a), Some(b)) => Expr::constant(dt, a * b),
                            _ => g * f,
                        },
                    });
                }
                pool_sum.at(ix) / factor.unwrap_or_else(|| Expr::constant(dt, 1.0))
            })
        }
    }
}

/// Adaptive max or average pooling of the `H` and `W` axes of `x` to `output_size`
/// (height, width), as TVM's `topi::nn::adaptive_pool`: output index `o` of a dimension
/// of size `n` pooled to `m` covers `[floor(o·n/m), ceil((o+1)·n/m))`; average pooling
/// divides by the size of that window.
pub fn adaptive_pool(
    x: &Tensor,
    output_size: (i64, i64),
    pool_type: PoolType,
    layout: &str,
) -> Result<Tensor, TeError> {
    let op = "adaptive_pool";
    let (h, w) = find_height_width(op, layout, x.shape())?;
    adaptive_impl(op, x, &[output_size.0, output_size.1], pool_type, &[h, w])
}

/// Global max or average pooling of the `H` and `W` axes of `x` (to 1×1), as TVM's
/// `topi::nn::global_pool` (an adaptive pooling to 1×1).
pub fn global_pool(x: &Tensor, pool_type: PoolType, layout: &str) -> Result<Tensor, TeError> {
    let op = "global_pool";
    let (h, w) = find_height_width(op, layout, x.shape())?;
    adaptive_impl(op, x, &[1, 1], pool_type, &[h, w])
}

// ----- 3-D -----

/// The attributes of a 3-D pooling (TVM's `max_pool3d` / `avg_pool3d` attributes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool3dAttrs {
    /// (depth, height, width) of the window.
    pub pool_size: (i64, i64, i64),
    /// (depth, height, width) strides.
    pub strides: (i64, i64, i64),
    /// (depth, height, width) dilations.
    pub dilation: (i64, i64, i64),
    /// Padding: front, top, left, back, bottom, right.
    pub padding: [i64; 6],
    /// The data layout: `NCDHW`, `NDHWC`, or another layout of primal axes with `D`, `H`
    /// and `W` unsplit.
    pub layout: String,
    /// Whether the output size rounds up (as [`Pool2dAttrs::ceil_mode`]).
    pub ceil_mode: bool,
    /// Average pooling only: whether padded elements count in the divisor.
    pub count_include_pad: bool,
}

impl Pool3dAttrs {
    /// A `pool_size` window with `strides` and symmetric (depth, height, width)
    /// `padding`; dilation 1, layout `NCDHW`, floor mode, padding not counted.
    pub fn new(
        pool_size: (i64, i64, i64),
        strides: (i64, i64, i64),
        padding: (i64, i64, i64),
    ) -> Self {
        let (d, h, w) = padding;
        Pool3dAttrs {
            pool_size,
            strides,
            dilation: (1, 1, 1),
            padding: [d, h, w, d, h, w],
            layout: "NCDHW".into(),
            ceil_mode: false,
            count_include_pad: false,
        }
    }
    /// The six paddings: front, top, left, back, bottom, right.
    pub fn with_padding(mut self, padding: [i64; 6]) -> Self {
        self.padding = padding;
        self
    }
    pub fn with_dilation(mut self, dilation: (i64, i64, i64)) -> Self {
        self.dilation = dilation;
        self
    }
    pub fn with_layout(mut self, layout: &str) -> Self {
        self.layout = layout.to_string();
        self
    }
    pub fn with_ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }
    pub fn with_count_include_pad(mut self, count_include_pad: bool) -> Self {
        self.count_include_pad = count_include_pad;
        self
    }
}

/// 3-D max or average pooling over the `D`, `H` and `W` axes of `x` (TVM's
/// `topi::nn::pool3d`): the stages of [`pool2d`] with three pooled axes (`rv0, rv1,
/// rv2`). Errors as [`pool2d`].
pub fn pool3d(x: &Tensor, pool_type: PoolType, attrs: &Pool3dAttrs) -> Result<Tensor, TeError> {
    let op = "pool3d";
    let [d, h, w] = find_depth_height_width(op, &attrs.layout, x.shape())?;
    let a = attrs;
    pool_impl_nd(
        op,
        x,
        pool_type,
        &PoolNd {
            axes: vec![d, h, w],
            kernel: vec![a.pool_size.0, a.pool_size.1, a.pool_size.2],
            stride: vec![a.strides.0, a.strides.1, a.strides.2],
            dilation: vec![a.dilation.0, a.dilation.1, a.dilation.2],
            pad_head: a.padding[..3].to_vec(),
            pad_tail: a.padding[3..].to_vec(),
            ceil_mode: a.ceil_mode,
            count_include_pad: a.count_include_pad,
        },
    )
}

/// Adaptive max or average pooling of the `D`, `H` and `W` axes of `x` to
/// `output_size` (TVM's `topi::nn::adaptive_pool3d`), windows as [`adaptive_pool`].
pub fn adaptive_pool3d(
    x: &Tensor,
    output_size: (i64, i64, i64),
    pool_type: PoolType,
    layout: &str,
) -> Result<Tensor, TeError> {
    let op = "adaptive_pool3d";
    let axes = find_depth_height_width(op, layout, x.shape())?;
    let size = [output_size.0, output_size.1, output_size.2];
    adaptive_impl(op, x, &size, pool_type, &axes)
}

/// Global max or average pooling of the `D`, `H` and `W` axes of `x` (to 1×1×1), as
/// relay's `global_avg_pool3d` / `global_max_pool3d` (an adaptive 3-D pooling to
/// 1×1×1).
pub fn global_pool3d(x: &Tensor, pool_type: PoolType, layout: &str) -> Result<Tensor, TeError> {
    let op = "global_pool3d";
    let axes = find_depth_height_width(op, layout, x.shape())?;
    adaptive_impl(op, x, &[1, 1, 1], pool_type, &axes)
}
