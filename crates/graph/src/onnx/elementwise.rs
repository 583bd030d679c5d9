//! Elementwise operators: arithmetic (with the legacy `broadcast`/`axis` form of opsets
//! before 7), the unary functions and activations, power and PReLU, comparisons and
//! logic, `Where`, the variadic `Sum`/`Mean`/`Max`/`Min`, `Clip`, `Cast` and `CastLike`.

use super::attrs::NodeCtx;
use super::{tensor, Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op, Unary};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{Activation, BinaryFn, MathFn};

/// `Relu`, `Sigmoid`, `Tanh`, `Exp`, `Sqrt`, `Erf`.
pub(super) fn unary(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let u = match c.op {
        "Relu" => Unary::Relu,
        "Sigmoid" => Unary::Sigmoid,
        "Tanh" => Unary::Tanh,
        "Exp" => Unary::Exp,
        "Sqrt" => Unary::Sqrt,
        _ => Unary::Erf,
    };
    Ok(vec![imp.op(&c.name, Op::Unary(u), &[c.input(0)?])?])
}

/// The functions of one argument without parameters.
pub(super) fn math(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let f = match c.op {
        "Abs" => MathFn::Abs,
        "Neg" => MathFn::Neg,
        "Sign" => MathFn::Sign,
        "Log" => MathFn::Log,
        "Floor" => MathFn::Floor,
        "Ceil" => MathFn::Ceil,
        "Round" => MathFn::RoundEven,
        "Reciprocal" => MathFn::Reciprocal,
        "Softplus" => MathFn::Softplus,
        "Softsign" => MathFn::Softsign,
        "HardSwish" => MathFn::HardSwish,
        "Sin" => MathFn::Sin,
        "Cos" => MathFn::Cos,
        "Tan" => MathFn::Tan,
        "Asin" => MathFn::Asin,
        "Acos" => MathFn::Acos,
        "Atan" => MathFn::Atan,
        "Sinh" => MathFn::Sinh,
        "Cosh" => MathFn::Cosh,
        "Asinh" => MathFn::Asinh,
        "Acosh" => MathFn::Acosh,
        "Atanh" => MathFn::Atanh,
        "Mish" => MathFn::Mish,
        "IsNaN" => MathFn::IsNaN,
        "BitwiseNot" => MathFn::BitNot,
        _ => MathFn::Not,
    };
    Ok(vec![imp.op(&c.name, Op::Math(f), &[c.input(0)?])?])
}

/// `Gelu` (opset 20): exact, or its tanh approximation.
pub(super) fn gelu(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let op = match c.string("approximate").as_deref().unwrap_or("none") {
        "none" => Op::Unary(Unary::Gelu),
        "tanh" => Op::Math(MathFn::GeluTanh),
        other => return Err(c.bad(format!("approximate `{other}` is not defined"))),
    };
    Ok(vec![imp.op(&c.name, op, &[c.input(0)?])?])
}

/// The activations with parameters, ONNX's defaults.
pub(super) fn activation(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let f = |name: &str, default: f32| c.float(name, default) as f64;
    let act = match c.op {
        "LeakyRelu" => Activation::LeakyRelu {
            alpha: f("alpha", 0.01),
        },
        "Elu" => Activation::Elu {
            alpha: f("alpha", 1.0),
        },
        "Selu" => Activation::Selu {
            alpha: f("alpha", 1.673_263_2),
            gamma: f("gamma", 1.050_701),
        },
        "HardSigmoid" => Activation::HardSigmoid {
            alpha: f("alpha", 0.2),
            beta: f("beta", 0.5),
        },
        "Celu" => Activation::Celu {
            alpha: f("alpha", 1.0),
        },
        "Shrink" => Activation::Shrink {
            lambd: f("lambd", 0.5),
            bias: f("bias", 0.0),
        },
        "Swish" => Activation::Swish {
            alpha: f("alpha", 1.0),
        },
        "IsInf" => Activation::IsInf {
            positive: c.int("detect_positive", 1) != 0,
            negative: c.int("detect_negative", 1) != 0,
        },
        _ => Activation::ThresholdedRelu {
            alpha: f("alpha", 1.0),
        },
    };
    Ok(vec![imp.op(
        &c.name,
        Op::Activation(act),
        &[c.input(0)?],
    )?])
}

/// `b` aligned for the legacy broadcast of opsets before 7: with `broadcast = 1` and an
/// `axis`, `b`'s dimensions sit at `axis` of `a`'s (NumPy aligns them at the end).
fn legacy_broadcast(
    imp: &mut Importer,
    c: &NodeCtx,
    a: NodeIndex,
    b: NodeIndex,
) -> Result<NodeIndex, GraphError> {
    if imp.opset >= 7 || c.int("broadcast", 0) == 0 || !c.has("axis") {
        return Ok(b);
    }
    let (ra, sb) = (imp.rank(a) as i64, imp.shape(b));
    let mut axis = c.int("axis", 0);
    if axis < 0 {
        axis += ra;
    }
    let trailing = ra - axis - sb.len() as i64;
    if axis < 0 || trailing < 0 {
        return Err(c.bad(format!(
            "legacy broadcast of {sb:?} at axis {axis} of rank {ra}"
        )));
    }
    let mut shape = sb;
    shape.extend(std::iter::repeat_n(1, trailing as usize));
    imp.reshape(&c.sub("broadcast"), b, shape)
}

/// `Add`, `Sub`, `Mul`, `Div`.
pub(super) fn arithmetic(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let b = match c.op {
        "Add" => Binary::Add,
        "Sub" => Binary::Sub,
        "Mul" => Binary::Mul,
        _ => Binary::Div,
    };
    let x = c.input(0)?;
    let y = legacy_broadcast(imp, c, x, c.input(1)?)?;
    Ok(vec![imp.op(&c.name, Op::Binary(b), &[x, y])?])
}

/// `Pow`. A constant exponent of 2, 3, 4, ½, -½, -1, -2 or 1 (the whole exponent one
/// value, broadcasting into the base's shape) becomes products, a square root and a
/// reciprocal: vector code in a fused epilogue instead of a `pow` call per lane (GPT-2's
/// GELU cubes, RMS norm squares), exact for the integer powers of every base.
pub(super) fn pow(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let y = legacy_broadcast(imp, c, x, c.input(1)?)?;
    if let Some(out) = pow_by_products(imp, c, x, y)? {
        return Ok(vec![out]);
    }
    let dt = imp.ty(x).dtype;
    if dt.is_float() {
        // the result has the base's type: an exponent of another type converts to it
        let y = if imp.ty(y).dtype == dt {
            y
        } else {
            imp.op(&c.sub("exponent"), Op::Cast { dtype: dt }, &[y])?
        };
        return Ok(vec![imp.op(
            &c.name,
            Op::BinaryFn(BinaryFn::Power),
            &[x, y],
        )?]);
    }
    // an integer base: the power in float64 (exact for every result an int32 holds),
    // converted back to the base's type as ONNX's reference does (`astype`, truncating)
    let wide = DataType::float(64);
    let xf = imp.op(&c.sub("base"), Op::Cast { dtype: wide }, &[x])?;
    let yf = imp.op(&c.sub("exponent"), Op::Cast { dtype: wide }, &[y])?;
    let p = imp.op(&c.sub("power"), Op::BinaryFn(BinaryFn::Power), &[xf, yf])?;
    Ok(vec![imp.op(&c.name, Op::Cast { dtype: dt }, &[p])?])
}

/// [`pow`] of a constant exponent as products, or `None` where it is not one of those.
fn pow_by_products(
    imp: &mut Importer,
    c: &NodeCtx,
    x: NodeIndex,
    y: NodeIndex,
) -> Result<Option<NodeIndex>, GraphError> {
    if !imp.ty(x).dtype.is_float() {
        return Ok(None);
    }
    let Some(v) = imp.constant(y).map(tessera_runtime::NDArray::to_f64_vec) else {
        return Ok(None);
    };
    let (xs, ys) = (imp.shape(x), imp.shape(y));
    let keeps_shape = tessera_te::ops::broadcast_shape("pow", &xs, &ys).ok() == Some(xs);
    let Some(&e) = v.first() else {
        return Ok(None);
    };
    if !keeps_shape || v.iter().any(|&w| w != e) {
        return Ok(None);
    }
    let mul = |imp: &mut Importer, name: &str, a: NodeIndex, b: NodeIndex| {
        imp.op(name, Op::Binary(Binary::Mul), &[a, b])
    };
    let recip = |imp: &mut Importer, name: &str, a: NodeIndex| {
        imp.op(name, Op::Math(MathFn::Reciprocal), &[a])
    };
    let out = match e {
        1.0 => x,
        2.0 => mul(imp, &c.name, x, x)?,
        3.0 => {
            let sq = mul(imp, &c.sub("square"), x, x)?;
            mul(imp, &c.name, sq, x)?
        }
        4.0 => {
            let sq = mul(imp, &c.sub("square"), x, x)?;
            mul(imp, &c.name, sq, sq)?
        }
        0.5 => imp.op(&c.name, Op::Unary(Unary::Sqrt), &[x])?,
        -0.5 => {
            let r = imp.op(&c.sub("sqrt"), Op::Unary(Unary::Sqrt), &[x])?;
            recip(imp, &c.name, r)?
        }
        -1.0 => recip(imp, &c.name, x)?,
        -2.0 => {
            let sq = mul(imp, &c.sub("square"), x, x)?;
            recip(imp, &c.name, sq)?
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// `PRelu`: the slope broadcast to the data.
pub(super) fn prelu(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let mut slope = c.input(1)?;
    // before opset 7 a 1-D slope of the channels' size applies along axis 1
    let (sx, ss) = (imp.shape(x), imp.shape(slope));
    if imp.opset < 7 && ss.len() == 1 && sx.len() > 2 && ss[0] == sx[1] && ss[0] != sx[sx.len() - 1]
    {
        let mut shape = ss.clone();
        shape.extend(std::iter::repeat_n(1, sx.len() - 2));
        slope = imp.reshape(&c.sub("slope"), slope, shape)?;
    }
    Ok(vec![imp.op(
        &c.name,
        Op::BinaryFn(BinaryFn::Prelu),
        &[x, slope],
    )?])
}

/// `Mod`: with `fmod=1` the remainder with the dividend's sign (C's `fmod`), else with
/// the divisor's (Python's `%`).
pub(super) fn modulo(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let y = c.input(1)?;
    // fmod=0 on floats: `a - floor(a / b) · b`, as opset 28 defines it
    let fmod = c.int("fmod", 0) != 0;
    let f = if fmod {
        BinaryFn::TruncMod
    } else {
        BinaryFn::FloorMod
    };
    Ok(vec![imp.op(&c.name, Op::BinaryFn(f), &[x, y])?])
}

/// `BitwiseAnd`, `BitwiseOr`, `BitwiseXor` and `BitShift` (its `direction` attribute) of
/// integer tensors.
pub(super) fn bitwise(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let f = match c.op {
        "BitwiseAnd" => BinaryFn::BitAnd,
        "BitwiseOr" => BinaryFn::BitOr,
        "BitwiseXor" => BinaryFn::BitXor,
        _ => match c.string("direction").as_deref() {
            Some("LEFT") => BinaryFn::ShiftLeft,
            Some("RIGHT") => BinaryFn::ShiftRight,
            other => return Err(c.bad(format!("direction {other:?} is not LEFT or RIGHT"))),
        },
    };
    Ok(vec![imp.op(
        &c.name,
        Op::BinaryFn(f),
        &[c.input(0)?, c.input(1)?],
    )?])
}

/// Comparisons and logic of two arguments.
pub(super) fn predicate(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let f = match c.op {
        "Equal" => BinaryFn::Equal,
        "Less" => BinaryFn::Less,
        "Greater" => BinaryFn::Greater,
        "LessOrEqual" => BinaryFn::LessEqual,
        "GreaterOrEqual" => BinaryFn::GreaterEqual,
        "And" => BinaryFn::And,
        "Or" => BinaryFn::Or,
        _ => BinaryFn::Xor,
    };
    let x = c.input(0)?;
    let y = legacy_broadcast(imp, c, x, c.input(1)?)?;
    Ok(vec![imp.op(&c.name, Op::BinaryFn(f), &[x, y])?])
}

/// `Where`.
pub(super) fn where_(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let ins = [c.input(0)?, c.input(1)?, c.input(2)?];
    Ok(vec![imp.op(&c.name, Op::Where, &ins)?])
}

/// `Sum`, `Mean`, `Max`, `Min` of one or more inputs (broadcast): a chain of binary
/// operators, the mean scaled by `1/n` at the end.
pub(super) fn variadic(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let xs = c.all_inputs();
    let Some((&first, rest)) = xs.split_first() else {
        return Err(c.bad("needs at least one input"));
    };
    let b = match c.op {
        "Max" => Binary::Max,
        "Min" => Binary::Min,
        _ => Binary::Add,
    };
    let mut acc = first;
    for (k, &x) in rest.iter().enumerate() {
        let name = if k + 1 == rest.len() && c.op != "Mean" {
            c.name.clone()
        } else {
            c.sub(&format!("{}", k + 1))
        };
        acc = imp.op(&name, Op::Binary(b), &[acc, x])?;
    }
    if c.op == "Mean" && xs.len() > 1 {
        let dt = imp.ty(acc).dtype;
        let s = imp.scalar(&c.sub("scale"), dt, 1.0 / xs.len() as f64)?;
        acc = imp.op(&c.name, Op::Binary(Binary::Mul), &[acc, s])?;
    }
    Ok(vec![acc])
}

/// `Clip`: bounds as attributes before opset 11, as inputs from it — constants fold
/// into the operator, computed ones (or network inputs) are a maximum and a minimum with
/// the scalar at run time. A lower bound above the upper gives the upper everywhere
/// (ONNX's `min(max(x, lo), hi)`).
pub(super) fn clip(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let (mut lo, mut hi) = (f32::MIN as f64, f32::MAX as f64);
    let mut computed = [None, None];
    if imp.opset < 11 {
        lo = c.float("min", f32::MIN) as f64;
        hi = c.float("max", f32::MAX) as f64;
    } else {
        for (k, slot) in [(1usize, &mut lo), (2, &mut hi)] {
            let Some(b) = c.opt(k) else { continue };
            match imp.constant(b).map(NDArray::to_f64_vec) {
                Some(v) => {
                    *slot = *v
                        .first()
                        .ok_or_else(|| c.bad(format!("input {k} is empty")))?
                }
                None => computed[k - 1] = Some(b),
            }
        }
    }
    if computed == [None, None] {
        let op = Op::Clip {
            min: lo.min(hi),
            max: hi,
        };
        return Ok(vec![imp.op(&c.name, op, &[x])?]);
    }
    // the lower bound, then the upper, each constant or computed
    let lower = match computed[0] {
        Some(b) => imp.op(&c.sub("lower"), Op::Binary(Binary::Max), &[x, b])?,
        None => imp.op(
            &c.sub("lower"),
            Op::Clip {
                min: lo,
                max: f64::INFINITY,
            },
            &[x],
        )?,
    };
    let out = match computed[1] {
        Some(b) => imp.op(&c.name, Op::Binary(Binary::Min), &[lower, b])?,
        None => imp.op(
            &c.name,
            Op::Clip {
                min: f64::NEG_INFINITY,
                max: hi,
            },
            &[lower],
        )?,
    };
    Ok(vec![out])
}

/// `Cast` and `CastLike` (to the second input's type); constants are converted at
/// import.
pub(super) fn cast(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let x = c.input(0)?;
    let to = if c.op == "CastLike" {
        imp.ty(c.input(1)?).dtype
    } else {
        // before opset 6 the type is named by a string
        let code = match c.string("to").as_deref() {
            Some(name) => {
                tensor::code_of_name(name).ok_or_else(|| c.bad(format!("unknown type `{name}`")))?
            }
            None => c.int("to", 1) as i32,
        };
        tensor::dtype_of(code).ok_or_else(|| c.bad(format!("unsupported target type {code}")))?
    };
    if to == imp.ty(x).dtype {
        return Ok(vec![x]);
    }
    Ok(vec![imp.op(&c.name, Op::Cast { dtype: to }, &[x])?])
}

/// `SwiGLU` (opset 28): `A · σ(alpha · A) · B`, a swish of the gate times the value.
pub(super) fn swiglu(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (a, b) = (c.input(0)?, c.input(1)?);
    if imp.shape(a) != imp.shape(b) {
        return Err(c.bad(format!(
            "the gate {:?} and the value {:?} must have one shape",
            imp.shape(a),
            imp.shape(b)
        )));
    }
    let alpha = c.float("alpha", 1.0) as f64;
    let gate = imp.op(
        &c.sub("swish"),
        Op::Activation(Activation::Swish { alpha }),
        &[a],
    )?;
    Ok(vec![imp.op(
        &c.name,
        Op::Binary(Binary::Mul),
        &[gate, b],
    )?])
}
