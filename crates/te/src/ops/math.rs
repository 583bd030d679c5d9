//! Elementwise functions beyond arithmetic: the sign and rounding family, the
//! activations with parameters (ONNX's `LeakyRelu`, `Elu`, `Selu`, `HardSigmoid`,
//! `HardSwish`, `Softplus`, `Softsign`), power and PReLU, comparisons and logic (bool
//! results), and the three-way `where`. Each is one stage tagged `elemwise` (one input)
//! or `broadcast` (several, NumPy broadcasting), so a fused group inlines it.

use super::attr_err;
use super::elemwise::{
    broadcast_index, broadcast_shape, compute_ax, const_of, TAG_BROADCAST, TAG_ELEMWISE,
};
use crate::error::TeError;
use crate::tensor::Tensor;
use tessera_ir::{DataType, Expr, Intrinsic};

/// The elementwise functions of one argument without parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    Abs,
    Neg,
    /// -1, 0 or 1.
    Sign,
    Log,
    Floor,
    Ceil,
    /// To the nearest integer, halves to even (ONNX's `Round`, NumPy's `round`).
    RoundEven,
    Reciprocal,
    /// `log(1 + e^x)`, computed as `max(x, 0) + log(1 + e^-|x|)` (no overflow).
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `x · min(max(x + 3, 0), 6) / 6`.
    HardSwish,
    /// Logical not (bool tensors).
    Not,
    /// GELU's tanh approximation, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    GeluTanh,
    /// The trigonometric functions and their inverses (radians).
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    /// The hyperbolic functions and their inverses.
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    /// `x · tanh(softplus(x))`.
    Mish,
    /// Whether `x` is NaN (a bool result).
    IsNaN,
    /// Bitwise not (integer tensors).
    BitNot,
}

impl MathFn {
    /// The operator's name (`abs`, `negative`, …): stage `T_<name>`.
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Abs => "abs",
            MathFn::Neg => "negative",
            MathFn::Sign => "sign",
            MathFn::Log => "log",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::RoundEven => "round",
            MathFn::Reciprocal => "reciprocal",
            MathFn::Softplus => "softplus",
            MathFn::Softsign => "softsign",
            MathFn::HardSwish => "hard_swish",
            MathFn::Not => "logical_not",
            MathFn::GeluTanh => "gelu_tanh",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Asin => "asin",
            MathFn::Acos => "acos",
            MathFn::Atan => "atan",
            MathFn::Sinh => "sinh",
            MathFn::Cosh => "cosh",
            MathFn::Asinh => "asinh",
            MathFn::Acosh => "acosh",
            MathFn::Atanh => "atanh",
            MathFn::Mish => "mish",
            MathFn::IsNaN => "isnan",
            MathFn::BitNot => "bitwise_not",
        }
    }

    fn needs_float(self) -> bool {
        !matches!(
            self,
            MathFn::Abs | MathFn::Neg | MathFn::Sign | MathFn::Not | MathFn::BitNot
        )
    }

    fn apply(self, v: Expr, dt: DataType) -> Expr {
        let c = |x: f64| const_of(dt, x);
        match self {
            MathFn::Abs => Expr::max(v.clone(), c(0.0) - v),
            MathFn::Neg => c(0.0) - v,
            MathFn::Sign => Expr::select(
                v.gt(c(0.0)),
                c(1.0),
                Expr::select(v.lt(c(0.0)), c(-1.0), c(0.0)),
            ),
            MathFn::Log => v.log(),
            MathFn::Floor => Expr::math(Intrinsic::Floor, v),
            MathFn::Ceil => Expr::math(Intrinsic::Ceil, v),
            MathFn::RoundEven if v.dtype().is_float() => Expr::math(Intrinsic::RoundEven, v),
            MathFn::RoundEven => {
                let f = Expr::math(Intrinsic::Floor, v.clone());
                let d = v - f.clone();
                let half = Expr::math(Intrinsic::Floor, f.clone() * c(0.5)) * c(2.0);
                let even = half.eq(f.clone());
                Expr::select(
                    d.gt(c(0.5)),
                    f.clone() + c(1.0),
                    Expr::select(
                        d.lt(c(0.5)),
                        f.clone(),
                        Expr::select(even, f.clone(), f + c(1.0)),
                    ),
                )
            }
            MathFn::Reciprocal => c(1.0) / v,
            MathFn::Softplus => {
                let abs = Expr::math(Intrinsic::Fabs, v.clone());
                Expr::max(v, c(0.0)) + (c(1.0) + (c(0.0) - abs).exp()).log()
            }
            MathFn::Softsign => v.clone() / (c(1.0) + Expr::math(Intrinsic::Fabs, v)),
            MathFn::HardSwish => {
                let gate = Expr::min(Expr::max(v.clone() + c(3.0), c(0.0)), c(6.0));
                v * gate / c(6.0)
            }
            MathFn::Not => Expr::not(v),
            MathFn::BitNot => Expr::call(dt, Intrinsic::BitNot, vec![v]),
            MathFn::GeluTanh => {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                let cube = v.clone() * v.clone() * v.clone();
                let inner = c(k) * (v.clone() + c(0.044715) * cube);
                c(0.5) * v * (c(1.0) + inner.tanh())
            }
            MathFn::Mish => {
                let softplus = MathFn::Softplus.apply(v.clone(), dt);
                v * softplus.tanh()
            }
            // NaN is the one value unequal to itself (no fast-math in any backend)
            MathFn::IsNaN => v.clone().ne(v),
            MathFn::Sin => Expr::math(Intrinsic::Sin, v),
            MathFn::Cos => Expr::math(Intrinsic::Cos, v),
            MathFn::Tan => Expr::math(Intrinsic::Tan, v),
            MathFn::Asin => Expr::math(Intrinsic::Asin, v),
            MathFn::Acos => Expr::math(Intrinsic::Acos, v),
            MathFn::Atan => Expr::math(Intrinsic::Atan, v),
            MathFn::Sinh => Expr::math(Intrinsic::Sinh, v),
            MathFn::Cosh => Expr::math(Intrinsic::Cosh, v),
            MathFn::Asinh => Expr::math(Intrinsic::Asinh, v),
            MathFn::Acosh => Expr::math(Intrinsic::Acosh, v),
            MathFn::Atanh => Expr::math(Intrinsic::Atanh, v),
        }
    }
}

/// `f(x)` elementwise (stage `T_<name>`, tag `elemwise`).
pub fn math(x: &Tensor, f: MathFn) -> Result<Tensor, TeError> {
    let dt = x.dtype();
    if f.needs_float() && !dt.is_float() {
        return Err(attr_err(
            f.name(),
            "dtype",
            format!("needs a float tensor, got {dt}"),
        ));
    }
    if (f == MathFn::Not) != dt.is_bool() || (f == MathFn::BitNot && !dt.is_integer()) {
        return Err(attr_err(
            f.name(),
            "dtype",
            format!("{} of a {dt} tensor is not defined", f.name()),
        ));
    }
    compute_ax(x.shape(), &format!("T_{}", f.name()), TAG_ELEMWISE, |ix| {
        f.apply(x.at(ix), dt)
    })
}

/// Activations with parameters (ONNX's definitions).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// `x` if `x ≥ 0`, else `alpha · x`.
    LeakyRelu { alpha: f64 },
    /// `x` if `x > 0`, else `alpha · (e^x - 1)`.
    Elu { alpha: f64 },
    /// `gamma · (x if x > 0, else alpha · (e^x - 1))`.
    Selu { alpha: f64, gamma: f64 },
    /// `max(0, min(1, alpha · x + beta))`.
    HardSigmoid { alpha: f64, beta: f64 },
    /// `x` if `x > alpha`, else 0.
    ThresholdedRelu { alpha: f64 },
    /// `max(0, x) + min(0, alpha · (e^(x/alpha) - 1))`.
    Celu { alpha: f64 },
    /// `x - bias` if `x > lambd`, `x + bias` if `x < -lambd`, else 0.
    Shrink { lambd: f64, bias: f64 },
    /// `x · σ(alpha · x)`.
    Swish { alpha: f64 },
    /// Whether `x` is an infinity of the signs asked for (a bool result).
    IsInf { positive: bool, negative: bool },
}

impl Activation {
    /// The operator's name: stage `T_<name>`.
    pub fn name(&self) -> &'static str {
        match self {
            Activation::LeakyRelu { .. } => "leaky_relu",
            Activation::Elu { .. } => "elu",
            Activation::Selu { .. } => "selu",
            Activation::HardSigmoid { .. } => "hard_sigmoid",
            Activation::ThresholdedRelu { .. } => "thresholded_relu",
            Activation::Celu { .. } => "celu",
            Activation::Shrink { .. } => "shrink",
            Activation::Swish { .. } => "swish",
            Activation::IsInf { .. } => "isinf",
        }
    }
}

/// A parameterized activation elementwise (stage `T_<name>`, tag `elemwise`). Float
/// tensors only.
pub fn activation(x: &Tensor, act: Activation) -> Result<Tensor, TeError> {
    let dt = x.dtype();
    if !dt.is_float() {
        return Err(attr_err(
            act.name(),
            "dtype",
            format!("needs a float tensor, got {dt}"),
        ));
    }
    let c = |v: f64| const_of(dt, v);
    compute_ax(
        x.shape(),
        &format!("T_{}", act.name()),
        TAG_ELEMWISE,
        |ix| {
            let v = x.at(ix);
            let elu = |alpha: f64, v: Expr| {
                Expr::select(v.gt(c(0.0)), v.clone(), c(alpha) * (v.exp() - c(1.0)))
            };
            match act {
                Activation::LeakyRelu { alpha } => {
                    Expr::select(v.lt(c(0.0)), c(alpha) * v.clone(), v)
                }
                Activation::Elu { alpha } => elu(alpha, v),
                Activation::Selu { alpha, gamma } => c(gamma) * elu(alpha, v),
                Activation::HardSigmoid { alpha, beta } => {
                    Expr::max(Expr::min(c(alpha) * v + c(beta), c(1.0)), c(0.0))
                }
                Activation::ThresholdedRelu { alpha } => Expr::select(v.gt(c(alpha)), v, c(0.0)),
                Activation::Celu { alpha } => {
                    let neg = c(alpha) * ((v.clone() / c(alpha)).exp() - c(1.0));
                    Expr::max(v, c(0.0)) + Expr::min(neg, c(0.0))
                }
                Activation::Shrink { lambd, bias } => Expr::select(
                    v.gt(c(lambd)),
                    v.clone() - c(bias),
                    Expr::select(v.lt(c(-lambd)), v + c(bias), c(0.0)),
                ),
                Activation::Swish { alpha } => v.clone() * (c(alpha) * v).sigmoid(),
                Activation::IsInf { positive, negative } => {
                    let pos = v.clone().eq(c(f64::INFINITY));
                    let neg = v.eq(c(f64::NEG_INFINITY));
                    match (positive, negative) {
                        (true, true) => Expr::or(pos, neg),
                        (true, false) => pos,
                        (false, true) => neg,
                        (false, false) => Expr::bool(false),
                    }
                }
            }
        },
    )
}

/// Functions of two arguments beyond arithmetic, NumPy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryFn {
    /// `a^b` (floats).
    Power,
    /// `a` if `a ≥ 0`, else `b · a` (ONNX's PRelu, the slope broadcast to the data).
    Prelu,
    /// The remainder of `a / b` rounded toward zero, with `a`'s sign (C's `%` and
    /// `fmod`; ONNX's `Mod` with `fmod=1`).
    TruncMod,
    /// The remainder of `a / b` rounded toward negative infinity, with `b`'s sign
    /// (Python's `%`; ONNX's `Mod` with `fmod=0`; for floats `a - floor(a / b) · b`).
    FloorMod,
    Equal,
    Less,
    Greater,
    LessEqual,
    GreaterEqual,
    /// Logical and, or, xor (bool tensors).
    And,
    Or,
    Xor,
    /// Bitwise and, or, xor, and shifts of `a` by `b` bits (integer tensors; a right
    /// shift logical for unsigned types: ONNX's `BitwiseAnd`…, `BitShift`).
    BitAnd,
    BitOr,
    BitXor,
    ShiftLeft,
    ShiftRight,
}

impl BinaryFn {
    /// The operator's name: stage `T_<name>`.
    pub fn name(self) -> &'static str {
        match self {
            BinaryFn::Power => "power",
            BinaryFn::Prelu => "prelu",
            BinaryFn::TruncMod => "truncmod",
            BinaryFn::FloorMod => "floormod",
            BinaryFn::Equal => "equal",
            BinaryFn::Less => "less",
            BinaryFn::Greater => "greater",
            BinaryFn::LessEqual => "less_equal",
            BinaryFn::GreaterEqual => "greater_equal",
            BinaryFn::And => "logical_and",
            BinaryFn::Or => "logical_or",
            BinaryFn::Xor => "logical_xor",
            BinaryFn::BitAnd => "bitwise_and",
            BinaryFn::BitOr => "bitwise_or",
            BinaryFn::BitXor => "bitwise_xor",
            BinaryFn::ShiftLeft => "left_shift",
            BinaryFn::ShiftRight => "right_shift",
        }
    }

    /// Whether the result is a bool tensor.
    pub fn is_predicate(self) -> bool {
        !matches!(
            self,
            BinaryFn::Power | BinaryFn::Prelu | BinaryFn::TruncMod | BinaryFn::FloorMod
        ) && self.bitwise().is_none()
    }

    /// The intrinsic of a bitwise function.
    fn bitwise(self) -> Option<Intrinsic> {
        Some(match self {
            BinaryFn::BitAnd => Intrinsic::BitAnd,
            BinaryFn::BitOr => Intrinsic::BitOr,
            BinaryFn::BitXor => Intrinsic::BitXor,
            BinaryFn::ShiftLeft => Intrinsic::ShiftLeft,
            BinaryFn::ShiftRight => Intrinsic::ShiftRight,
            _ => return None,
        })
    }

    fn apply(self, a: Expr, b: Expr, dt: DataType) -> Expr {
        match self {
            BinaryFn::Power => a.pow(b),
            BinaryFn::Prelu => Expr::select(a.lt(const_of(dt, 0.0)), b * a.clone(), a),
            BinaryFn::TruncMod => a % b,
            BinaryFn::FloorMod if dt.is_float() => {
                // C's fmod, moved by one divisor where its sign is not the divisor's:
                // exact, and ONNX's special cases (an infinite divisor keeps a
                // finite dividend of its sign, and gives itself otherwise)
                let r = a % b.clone();
                let zero = const_of(dt, 0.0);
                let differs = Expr::and(
                    r.clone().ne(zero.clone()),
                    r.clone().lt(zero.clone()).ne(b.clone().lt(zero)),
                );
                Expr::select(differs, r.clone() + b, r)
            }
            BinaryFn::FloorMod => Expr::floormod(a, b),
            BinaryFn::Equal => a.eq(b),
            BinaryFn::Less => a.lt(b),
            BinaryFn::Greater => a.gt(b),
            BinaryFn::LessEqual => a.le(b),
            BinaryFn::GreaterEqual => a.ge(b),
            BinaryFn::And => Expr::and(a, b),
            BinaryFn::Or => Expr::or(a, b),
            BinaryFn::Xor => a.ne(b),
            BinaryFn::BitAnd | BinaryFn::BitOr | BinaryFn::BitXor => {
                let op = self.bitwise().unwrap_or(Intrinsic::BitAnd);
                Expr::call(dt, op, vec![a, b])
            }
            // a shift by a negative amount or by the width or more (undefined in C):
            // what the sign's extension alone gives (ONNX's BitShift-28), -1 for a
            // negative signed value shifted right, else 0
            BinaryFn::ShiftLeft | BinaryFn::ShiftRight => {
                let op = self.bitwise().unwrap_or(Intrinsic::ShiftLeft);
                let width = f64::from(dt.bits);
                let fits = Expr::and(
                    b.clone().ge(const_of(dt, 0.0)),
                    b.clone().lt(const_of(dt, width)),
                );
                let fill = if self == BinaryFn::ShiftRight && dt.is_int() {
                    Expr::call(dt, op, vec![a.clone(), const_of(dt, width - 1.0)])
                } else {
                    const_of(dt, 0.0)
                };
                Expr::select(fits, Expr::call(dt, op, vec![a, b]), fill)
            }
        }
    }
}

/// `f(a, b)` with NumPy broadcasting (stage `T_<name>`, tag `broadcast`).
pub fn binary_fn(a: &Tensor, b: &Tensor, f: BinaryFn) -> Result<Tensor, TeError> {
    let op = f.name();
    if a.dtype() != b.dtype() {
        return Err(attr_err(
            op,
            "dtype",
            format!("operands differ in type: {} and {}", a.dtype(), b.dtype()),
        ));
    }
    let dt = a.dtype();
    let logic = matches!(f, BinaryFn::And | BinaryFn::Or | BinaryFn::Xor);
    let float_only = matches!(f, BinaryFn::Power | BinaryFn::Prelu);
    let integer_only = f.bitwise().is_some();
    if logic != dt.is_bool() || (float_only && !dt.is_float()) || (integer_only && !dt.is_integer())
    {
        return Err(attr_err(
            op,
            "dtype",
            format!("{op} of {dt} tensors is not defined"),
        ));
    }
    let out = broadcast_shape(op, a.shape(), b.shape())?;
    compute_ax(&out, &format!("T_{op}"), TAG_BROADCAST, |ix| {
        f.apply(
            a.at(&broadcast_index(ix, &out, a.shape())),
            b.at(&broadcast_index(ix, &out, b.shape())),
            dt,
        )
    })
}

/// `cond ? a : b` elementwise with NumPy broadcasting of all three (stage `T_where`, tag
/// `broadcast`); `cond` is a bool tensor, `a` and `b` of one type.
pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor, TeError> {
    let op = "where";
    if !cond.dtype().is_bool() {
        return Err(attr_err(
            op,
            "condition",
            format!("must be bool, got {}", cond.dtype()),
        ));
    }
    if a.dtype() != b.dtype() {
        return Err(attr_err(
            op,
            "dtype",
            format!(
                "the branches differ in type: {} and {}",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    let ab = broadcast_shape(op, a.shape(), b.shape())?;
    let out = broadcast_shape(op, cond.shape(), &ab)?;
    compute_ax(&out, "T_where", TAG_BROADCAST, |ix| {
        Expr::select(
            cond.at(&broadcast_index(ix, &out, cond.shape())),
            a.at(&broadcast_index(ix, &out, a.shape())),
            b.at(&broadcast_index(ix, &out, b.shape())),
        )
    })
}
