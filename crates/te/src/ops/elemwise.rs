//! Elementwise and broadcast operators, written as TVM's C++ TOPI writes them: output
//! stages named `T_<op>`, axes `ax0, ax1, …`, tags `elemwise` (unary and tensor–scalar
//! operators) and `broadcast` (tensor–tensor operators, NumPy broadcasting).
//!
//! Constants are always of the tensor's data type (`0f` for float32, `(int8)0` for int8).

use super::attr_err;
use crate::error::TeError;
use crate::tensor::{compute_tagged, Tensor};
use tessera_ir::{DataType, Expr, ExprNode, Intrinsic};

/// TVM's tag of elementwise (unary, tensor–scalar) operators.
pub const TAG_ELEMWISE: &str = "elemwise";
/// TVM's tag of broadcast (tensor–tensor) operators.
pub const TAG_BROADCAST: &str = "broadcast";

/// The axis names of TVM's C++ `te::compute`: `ax0, ax1, …`.
pub(crate) fn ax_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ax{i}")).collect()
}

/// [`compute_tagged`] with the axes named `ax0, ax1, …`.
pub(crate) fn compute_ax(
    shape: &[i64],
    name: &str,
    tag: &str,
    f: impl FnOnce(&[Expr]) -> Expr,
) -> Result<Tensor, TeError> {
    let names = ax_names(shape.len());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    compute_tagged(shape, name, tag, &refs, f)
}

/// The constant `v` of type `dtype` (TVM's `make_const`): integers truncate toward zero
/// and saturate at the type's range (NaN becomes 0), bools are `v != 0`.
pub(crate) fn const_of(dtype: DataType, v: f64) -> Expr {
    if dtype.is_float() {
        Expr::float_of(dtype, v)
    } else if dtype.is_bool() {
        Expr::bool(v != 0.0)
    } else {
        let (lo, hi) = dtype.int_range();
        let c = if v.is_nan() {
            0
        } else if v >= hi as f64 {
            hi
        } else if v <= lo as f64 {
            lo
        } else {
            v as i64
        };
        Expr::int_of(dtype, c)
    }
}

/// `value` as an expression of `dtype` (TVM's `tvm::cast` with constant folding):
/// constants become constants of `dtype`, other expressions of another type are cast.
pub(crate) fn to_dtype(dtype: DataType, value: Expr) -> Expr {
    if value.dtype() == dtype {
        return value;
    }
    match value.node() {
        ExprNode::IntImm { value: v, .. } => {
            if dtype.is_float() || dtype.is_bool() {
                const_of(dtype, *v as f64)
            } else {
                let (lo, hi) = dtype.int_range();
                Expr::int_of(dtype, (*v).clamp(lo, hi))
            }
        }
        ExprNode::FloatImm { value: v, .. } => const_of(dtype, *v),
        _ => Expr::cast(dtype, value),
    }
}

/// `axis` (negative counts from the end) as an index into `ndim` dimensions.
pub(crate) fn normalize_axis(
    op: &str,
    attr: &str,
    axis: i64,
    ndim: usize,
) -> Result<usize, TeError> {
    let n = ndim as i64;
    if axis < -n || axis >= n {
        return Err(attr_err(
            op,
            attr,
            format!("{axis} is out of range for a {ndim}-dimensional tensor"),
        ));
    }
    Ok(if axis < 0 { axis + n } else { axis } as usize)
}

fn require_float(op: &str, x: &Tensor) -> Result<(), TeError> {
    if !x.dtype().is_float() {
        return Err(attr_err(
            op,
            "dtype",
            format!("needs a float tensor, `{}` is {}", x.name(), x.dtype()),
        ));
    }
    Ok(())
}

fn same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<(), TeError> {
    if a.dtype() != b.dtype() {
        return Err(attr_err(
            op,
            "dtype",
            format!(
                "operands differ in type: `{}` is {}, `{}` is {}",
                a.name(),
                a.dtype(),
                b.name(),
                b.dtype()
            ),
        ));
    }
    Ok(())
}

fn unary(x: &Tensor, name: &str, f: impl FnOnce(Expr) -> Expr) -> Result<Tensor, TeError> {
    compute_ax(x.shape(), name, TAG_ELEMWISE, |ix| f(x.at(ix)))
}

fn float_unary(
    op: &str,
    x: &Tensor,
    f: impl FnOnce(Expr, DataType) -> Expr,
) -> Result<Tensor, TeError> {
    require_float(op, x)?;
    let dt = x.dtype();
    unary(x, &format!("T_{op}"), |v| f(v, dt))
}

// ----- unary -----

/// `max(x, 0)` (TVM's `topi::relu`, stage `T_relu`).
pub fn relu(x: &Tensor) -> Result<Tensor, TeError> {
    let zero = const_of(x.dtype(), 0.0);
    unary(x, "T_relu", |v| Expr::max(v, zero))
}

/// `max(min(x, a_max), a_min)` (TVM's `topi::clip`, stage `T_clip`); the bounds are
/// converted to the tensor's type.
pub fn clip(x: &Tensor, a_min: f64, a_max: f64) -> Result<Tensor, TeError> {
    if a_min.is_nan() || a_max.is_nan() {
        return Err(attr_err("clip", "a_min", "the bounds must not be NaN"));
    }
    if a_min > a_max {
        return Err(attr_err(
            "clip",
            "a_min",
            format!("a_min {a_min} is greater than a_max {a_max}"),
        ));
    }
    let (lo, hi) = (const_of(x.dtype(), a_min), const_of(x.dtype(), a_max));
    unary(x, "T_clip", |v| Expr::max(Expr::min(v, hi), lo))
}

/// The logistic function (stage `T_sigmoid`, TVM's `tir.sigmoid`). Float tensors only.
pub fn sigmoid(x: &Tensor) -> Result<Tensor, TeError> {
    float_unary("sigmoid", x, |v, _| v.sigmoid())
}

/// Hyperbolic tangent (stage `T_tanh`). Float tensors only.
pub fn tanh(x: &Tensor) -> Result<Tensor, TeError> {
    float_unary("tanh", x, |v, _| v.tanh())
}

/// `e^x` (stage `T_exp`). Float tensors only.
pub fn exp(x: &Tensor) -> Result<Tensor, TeError> {
    float_unary("exp", x, |v, _| v.exp())
}

/// Square root (stage `T_sqrt`). Float tensors only.
pub fn sqrt(x: &Tensor) -> Result<Tensor, TeError> {
    float_unary("sqrt", x, |v, _| v.sqrt())
}

/// The error function (stage `T_erf`). Float tensors only.
pub fn erf(x: &Tensor) -> Result<Tensor, TeError> {
    float_unary("erf", x, |v, _| Expr::math(Intrinsic::Erf, v))
}

/// GELU, exact form `0.5·x·(1 + erf(x/√2))` (stage `T_gelu`). Float tensors only.
pub fn gelu(x: &Tensor) -> Result<Tensor, TeError> {
    float_unary("gelu", x, |v, dt| {
        let scaled = v.clone() * const_of(dt, std::f64::consts::FRAC_1_SQRT_2);
        let half = const_of(dt, 0.5) * v;
        half * (const_of(dt, 1.0) + Expr::math(Intrinsic::Erf, scaled))
    })
}

/// Conversion to `dtype` (TVM's `topi::cast`, stage `T_cast`); a cast to the tensor's
/// own type reads the element unchanged, as TVM's `tvm::cast` folds it.
pub fn cast(x: &Tensor, dtype: DataType) -> Result<Tensor, TeError> {
    if !dtype.is_scalar() {
        return Err(attr_err(
            "cast",
            "dtype",
            format!("{dtype} is a vector type; tensors hold scalars"),
        ));
    }
    unary(x, "T_cast", |v| {
        if v.dtype() == dtype {
            v
        } else {
            Expr::cast(dtype, v)
        }
    })
}

/// Float to int8 at `scale` (TVM's realized `simulated_quantize` for 8 bits, stage
/// `T_quantize`): `clip(round(x / scale), -127, 127)`, rounding half away from zero.
pub fn quantize_int8(x: &Tensor, scale: f64) -> Result<Tensor, TeError> {
    let dt = x.dtype();
    if !dt.is_float() {
        return Err(attr_err(
            "quantize",
            "dtype",
            format!("needs a float tensor, `{}` is {dt}", x.name()),
        ));
    }
    if !(scale.is_finite() && scale > 0.0) {
        return Err(attr_err(
            "quantize",
            "scale",
            format!("{scale} is not a positive number"),
        ));
    }
    unary(x, "T_quantize", |v| {
        let r = Expr::math(Intrinsic::Round, v * const_of(dt, 1.0 / scale));
        let c = Expr::max(Expr::min(r, const_of(dt, 127.0)), const_of(dt, -127.0));
        Expr::cast(DataType::int(8), c)
    })
}

/// An integer tensor to float32 at `scale` (stage `T_dequantize`): `x · scale`.
pub fn dequantize(x: &Tensor, scale: f64) -> Result<Tensor, TeError> {
    if !x.dtype().is_integer() {
        return Err(attr_err(
            "dequantize",
            "dtype",
            format!("needs an integer tensor, `{}` is {}", x.name(), x.dtype()),
        ));
    }
    let f = DataType::float32();
    unary(x, "T_dequantize", |v| Expr::cast(f, v) * const_of(f, scale))
}

/// Arithmetic right shift by `n` bits of an integer tensor (TVM's `x >> n`, stage
/// `T_right_shift`). The IR has no shift operator, so it is written as floor division
/// by powers of two (exact for arithmetic shifts of signed and unsigned values).
pub fn right_shift(x: &Tensor, n: i64) -> Result<Tensor, TeError> {
    let dt = x.dtype();
    if !dt.is_integer() {
        return Err(attr_err(
            "right_shift",
            "dtype",
            format!("needs an integer tensor, `{}` is {}", x.name(), dt),
        ));
    }
    if n < 0 || n >= dt.bits as i64 {
        return Err(attr_err(
            "right_shift",
            "shift",
            format!("{n} is outside [0, {}) for {dt}", dt.bits),
        ));
    }
    // Each divisor must be representable in the tensor's type: at most 2^(bits-2)
    // (signed) and below 2^31 so that it also fits the index arithmetic of the IR.
    let chunk = (dt.bits as i64 - 2).clamp(1, 30);
    unary(x, "T_right_shift", |mut v| {
        let mut left = n;
        while left > 0 {
            let k = left.min(chunk);
            v = Expr::floordiv(v, Expr::int_of(dt, 1i64 << k));
            left -= k;
        }
        v
    })
}

// ----- broadcast -----

/// The NumPy broadcast of shapes `a` and `b`: aligned from the right, a dimension of
/// one stretches, other sizes must be equal.
pub fn broadcast_shape(op: &str, a: &[i64], b: &[i64]) -> Result<Vec<i64>, TeError> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for k in 0..n {
        let da = if k + a.len() >= n {
            a[k + a.len() - n]
        } else {
            1
        };
        let db = if k + b.len() >= n {
            b[k + b.len() - n]
        } else {
            1
        };
        out[k] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(TeError::BadShape {
                op: op.to_string(),
                shape: a.to_vec(),
                reason: format!(
                    "shapes {a:?} and {b:?} do not broadcast: dimension {k} of the result \
                     would be {da} and {db}"
                ),
            });
        };
    }
    Ok(out)
}

/// The index into an input of shape `s` broadcast to `out` at output index `ix` (TVM's
/// `InputIndexFromBroadcast`): a stretched dimension reads index 0.
pub(crate) fn broadcast_index(ix: &[Expr], out: &[i64], s: &[i64]) -> Vec<Expr> {
    let off = out.len() - s.len();
    s.iter()
        .enumerate()
        .map(|(k, d)| {
            if *d == 1 && out[off + k] != 1 {
                Expr::int(0)
            } else {
                ix[off + k].clone()
            }
        })
        .collect()
}

fn broadcast_binary(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    f: fn(Expr, Expr) -> Expr,
) -> Result<Tensor, TeError> {
    same_dtype(op, a, b)?;
    let out = broadcast_shape(op, a.shape(), b.shape())?;
    compute_ax(&out, &format!("T_{op}"), TAG_BROADCAST, |ix| {
        f(
            a.at(&broadcast_index(ix, &out, a.shape())),
            b.at(&broadcast_index(ix, &out, b.shape())),
        )
    })
}

fn scalar_binary(
    op: &str,
    x: &Tensor,
    v: Expr,
    f: fn(Expr, Expr) -> Expr,
) -> Result<Tensor, TeError> {
    let c = to_dtype(x.dtype(), v);
    unary(x, &format!("T_{op}"), |e| f(e, c))
}

fn add_f(a: Expr, b: Expr) -> Expr {
    a + b
}
fn sub_f(a: Expr, b: Expr) -> Expr {
    a - b
}
fn mul_f(a: Expr, b: Expr) -> Expr {
    a * b
}
fn div_f(a: Expr, b: Expr) -> Expr {
    a / b
}

/// `a + b` with NumPy broadcasting (stage `T_add`).
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    broadcast_binary("add", a, b, add_f)
}
/// `a - b` with NumPy broadcasting (stage `T_subtract`).
pub fn subtract(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    broadcast_binary("subtract", a, b, sub_f)
}
/// `a * b` with NumPy broadcasting (stage `T_multiply`).
pub fn multiply(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    broadcast_binary("multiply", a, b, mul_f)
}
/// `a / b` with NumPy broadcasting (stage `T_divide`; integers truncate, as TVM's `div`).
pub fn divide(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    broadcast_binary("divide", a, b, div_f)
}
/// `max(a, b)` with NumPy broadcasting (stage `T_maximum`).
pub fn maximum(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    broadcast_binary("maximum", a, b, Expr::max)
}
/// `min(a, b)` with NumPy broadcasting (stage `T_minimum`).
pub fn minimum(a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    broadcast_binary("minimum", a, b, Expr::min)
}

/// `x + v` for a scalar `v`, converted to the tensor's type (stage `T_add`, tag
/// `elemwise`).
pub fn add_scalar(x: &Tensor, v: impl Into<Expr>) -> Result<Tensor, TeError> {
    scalar_binary("add", x, v.into(), add_f)
}
/// `x - v` for a scalar `v` (stage `T_subtract`).
pub fn subtract_scalar(x: &Tensor, v: impl Into<Expr>) -> Result<Tensor, TeError> {
    scalar_binary("subtract", x, v.into(), sub_f)
}
/// `x * v` for a scalar `v` (stage `T_multiply`).
pub fn multiply_scalar(x: &Tensor, v: impl Into<Expr>) -> Result<Tensor, TeError> {
    scalar_binary("multiply", x, v.into(), mul_f)
}
/// `x / v` for a scalar `v` (stage `T_divide`).
pub fn divide_scalar(x: &Tensor, v: impl Into<Expr>) -> Result<Tensor, TeError> {
    scalar_binary("divide", x, v.into(), div_f)
}
/// `max(x, v)` for a scalar `v` (stage `T_maximum`).
pub fn maximum_scalar(x: &Tensor, v: impl Into<Expr>) -> Result<Tensor, TeError> {
    scalar_binary("maximum", x, v.into(), Expr::max)
}
/// `min(x, v)` for a scalar `v` (stage `T_minimum`).
pub fn minimum_scalar(x: &Tensor, v: impl Into<Expr>) -> Result<Tensor, TeError> {
    scalar_binary("minimum", x, v.into(), Expr::min)
}

// ----- normalization -----

/// A 1-D parameter of `op` whose length must be `c`.
fn check_param(op: &str, what: &str, p: &Tensor, x: &Tensor, c: i64) -> Result<(), TeError> {
    if p.shape() != [c] {
        return Err(TeError::BadShape {
            op: op.to_string(),
            shape: p.shape().to_vec(),
            reason: format!(
                "{what} `{}` must have shape [{c}] (dimension of the axis of {:?})",
                p.name(),
                x.shape()
            ),
        });
    }
    same_dtype(op, x, p)
}

/// `x + bias` with the 1-D `bias` broadcast along `axis` of `x` (negative counts from the
/// end). One stage `T_add`, as Relay's `expand_dims` + `add` produces once the bias is
/// bound: `T_add(ax0, …) = (x[ax0, …] + bias[ax<axis>])`.
pub fn bias_add(x: &Tensor, bias: &Tensor, axis: i64) -> Result<Tensor, TeError> {
    let op = "bias_add";
    let ax = normalize_axis(op, "axis", axis, x.ndim())?;
    check_param(op, "bias", bias, x, x.shape()[ax])?;
    compute_ax(x.shape(), "T_add", TAG_BROADCAST, |ix| {
        x.at(ix) + bias.at(&[ix[ax].clone()])
    })
}

/// Batch normalization at inference, one stage `T_batch_norm`:
/// `(x - mean) / sqrt(var + epsilon) * gamma + beta`, the 1-D parameters broadcast along
/// `axis` of `x`.
pub fn batch_norm_inference(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    mean: &Tensor,
    var: &Tensor,
    axis: i64,
    epsilon: f64,
) -> Result<Tensor, TeError> {
    let op = "batch_norm";
    require_float(op, x)?;
    let ax = normalize_axis(op, "axis", axis, x.ndim())?;
    if !epsilon.is_finite() || epsilon < 0.0 {
        return Err(attr_err(
            op,
            "epsilon",
            format!("{epsilon} is not a finite non-negative number"),
        ));
    }
    let c = x.shape()[ax];
    for (what, p) in [
        ("gamma", gamma),
        ("beta", beta),
        ("moving_mean", mean),
        ("moving_var", var),
    ] {
        check_param(op, what, p, x, c)?;
    }
    let eps = const_of(x.dtype(), epsilon);
    compute_ax(x.shape(), "T_batch_norm", TAG_BROADCAST, |ix| {
        let ci = [ix[ax].clone()];
        let norm = (x.at(ix) - mean.at(&ci)) / (var.at(&ci) + eps).sqrt();
        norm * gamma.at(&ci) + beta.at(&ci)
    })
}
