//! The reference interpreter: runs a [`PrimFunc`] on host buffers.
//!
//! It is the oracle of every correctness test, so it is written to be obviously right:
//! every loop runs serially in order (parallel, vectorized and thread-bound loops too),
//! every access is checked against its buffer's shape, every arithmetic result is
//! rounded or wrapped to its type, and `if_then_else` evaluates only the branch it takes.

use crate::buffer::Buffer;
use crate::dtype::{DataType, TypeCode};
use crate::expr::{BinOp, CmpOp, Expr, ExprNode, Intrinsic, Var};
use crate::stmt::{PrimFunc, Stmt, StmtNode};
use std::collections::HashMap;

/// One lane of a value: integers (and bools) as `i64`, floats as `f64`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    I(i64),
    F(f64),
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::I(v) => v as f64,
            Scalar::F(v) => v,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::I(v) => v,
            Scalar::F(v) => v as i64,
        }
    }
    /// The value converted to (one lane of) `dtype`: floats rounded to the type's
    /// precision, integers wrapped to its width, bools to 0/1.
    pub fn cast(self, dtype: DataType) -> Scalar {
        match dtype.code {
            TypeCode::Float => {
                let v = self.as_f64();
                Scalar::F(match dtype.bits {
                    16 => half::f16::from_f64(v).to_f64(),
                    32 => v as f32 as f64,
                    _ => v,
                })
            }
            TypeCode::Bool => Scalar::I((self.as_f64() != 0.0) as i64),
            _ => Scalar::I(crate::arith::wrap_int(dtype, self.as_i64())),
        }
    }
}

/// A host buffer: a dense row-major array of one data type.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBuffer {
    pub dtype: DataType,
    pub shape: Vec<usize>,
    pub data: Vec<Scalar>,
}

impl HostBuffer {
    /// A buffer of zeros.
    pub fn zeros(dtype: DataType, shape: &[usize]) -> Self {
        let n = shape.iter().product();
        let zero = if dtype.is_float() {
            Scalar::F(0.0)
        } else {
            Scalar::I(0)
        };
        HostBuffer {
            dtype,
            shape: shape.to_vec(),
            data: vec![zero; n],
        }
    }
    /// A buffer of `dtype` holding `values` (converted to the type).
    pub fn from_f64(dtype: DataType, shape: &[usize], values: &[f64]) -> Self {
        assert_eq!(
            shape.iter().product::<usize>(),
            values.len(),
            "values do not fill the shape"
        );
        let data = values.iter().map(|v| Scalar::F(*v).cast(dtype)).collect();
        HostBuffer {
            dtype,
            shape: shape.to_vec(),
            data,
        }
    }
    pub fn to_f64(&self) -> Vec<f64> {
        self.data.iter().map(|s| s.as_f64()).collect()
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Why the interpreter stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InterpError {
    #[error("function `{func}` takes {expected} buffers, {got} were given")]
    ArgCount {
        func: String,
        expected: usize,
        got: usize,
    },
    #[error("argument {index} (`{name}`): expected {expected_dtype}{expected_shape:?}, got {got_dtype}{got_shape:?}")]
    ArgMismatch {
        index: usize,
        name: String,
        expected_dtype: DataType,
        expected_shape: Vec<i64>,
        got_dtype: DataType,
        got_shape: Vec<usize>,
    },
    #[error("parameter `{0}` has a shape that is not constant")]
    SymbolicShape(String),
    #[error("access {buffer}{indices:?} is out of bounds of shape {shape:?}")]
    OutOfBounds {
        buffer: String,
        indices: Vec<i64>,
        shape: Vec<usize>,
    },
    #[error("buffer `{0}` is used but neither a parameter nor allocated")]
    UnknownBuffer(String),
    #[error("variable `{0}` is used but not bound")]
    UnboundVar(String),
    #[error("division by zero in `{0}`")]
    DivisionByZero(String),
    #[error("allocation of `{0}` has a negative or unevaluable size")]
    BadAllocation(String),
    #[error("mismatched vector lanes in `{0}`")]
    Lanes(String),
    #[error("intrinsic `{0}` called with the wrong number of arguments")]
    Arity(String),
}

type Value = Vec<Scalar>;

struct Machine<'a> {
    vars: HashMap<Var, Scalar>,
    args: &'a mut [HostBuffer],
    allocs: Vec<HostBuffer>,
    /// Buffer data variable → (is argument, index).
    slots: HashMap<Var, (bool, usize)>,
}

/// Runs `func` with `args` bound to its parameters in order. The buffers' types and
/// shapes must match the parameters exactly.
pub fn run(func: &PrimFunc, args: &mut [HostBuffer]) -> Result<(), InterpError> {
    if func.params.len() != args.len() {
        return Err(InterpError::ArgCount {
            func: func.name.clone(),
            expected: func.params.len(),
            got: args.len(),
        });
    }
    let mut slots = HashMap::new();
    for (i, (p, a)) in func.params.iter().zip(args.iter()).enumerate() {
        let shape = p
            .const_shape()
            .ok_or_else(|| InterpError::SymbolicShape(p.name().to_string()))?;
        let same_shape = shape.len() == a.shape.len()
            && shape.iter().zip(&a.shape).all(|(x, y)| *x == *y as i64);
        if p.dtype() != a.dtype || !same_shape || a.data.len() != a.shape.iter().product::<usize>()
        {
            return Err(InterpError::ArgMismatch {
                index: i,
                name: p.name().to_string(),
                expected_dtype: p.dtype(),
                expected_shape: shape,
                got_dtype: a.dtype,
                got_shape: a.shape.clone(),
            });
        }
        slots.insert(p.data().clone(), (true, i));
    }
    let mut m = Machine {
        vars: HashMap::new(),
        args,
        allocs: Vec::new(),
        slots,
    };
    m.exec(&func.body)
}

fn lane(v: &Value, i: usize) -> Scalar {
    if v.len() == 1 {
        v[0]
    } else {
        v[i]
    }
}

fn is_true(s: Scalar) -> bool {
    s.as_f64() != 0.0
}

fn floordiv(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

impl Machine<'_> {
    fn storage(&self, b: &Buffer) -> Result<&HostBuffer, InterpError> {
        match self.slots.get(b.data()) {
            Some((true, i)) => Ok(&self.args[*i]),
            Some((false, i)) => Ok(&self.allocs[*i]),
            None => Err(InterpError::UnknownBuffer(b.name().to_string())),
        }
    }

    fn storage_mut(&mut self, b: &Buffer) -> Result<&mut HostBuffer, InterpError> {
        match self.slots.get(b.data()) {
            Some((true, i)) => Ok(&mut self.args[*i]),
            Some((false, i)) => Ok(&mut self.allocs[*i]),
            None => Err(InterpError::UnknownBuffer(b.name().to_string())),
        }
    }

    /// The flat offsets of each lane of a (possibly vector) access.
    fn offsets(&mut self, b: &Buffer, indices: &[Expr]) -> Result<Vec<usize>, InterpError> {
        let idx: Vec<Value> = indices
            .iter()
            .map(|i| self.eval(i))
            .collect::<Result<_, _>>()?;
        let lanes = idx.iter().map(|v| v.len()).max().unwrap_or(1);
        if idx.iter().any(|v| v.len() != 1 && v.len() != lanes) {
            return Err(InterpError::Lanes(b.name().to_string()));
        }
        let shape = self.storage(b)?.shape.clone();
        (0..lanes)
            .map(|l| {
                let point: Vec<i64> = idx.iter().map(|v| lane(v, l).as_i64()).collect();
                let in_bounds = point.len() == shape.len()
                    && point
                        .iter()
                        .zip(&shape)
                        .all(|(i, d)| *i >= 0 && (*i as usize) < *d);
                if !in_bounds {
                    return Err(InterpError::OutOfBounds {
                        buffer: b.name().to_string(),
                        indices: point,
                        shape: shape.clone(),
                    });
                }
                Ok(point
                    .iter()
                    .zip(&shape)
                    .fold(0usize, |acc, (i, d)| acc * d + *i as usize))
            })
            .collect()
    }

    fn exec(&mut self, s: &Stmt) -> Result<(), InterpError> {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                body,
                ..
            } => {
                let lo = self.eval_scalar(min)?.as_i64();
                let n = self.eval_scalar(extent)?.as_i64();
                let old = self.vars.get(var).copied();
                for i in lo..lo + n {
                    self.vars.insert(var.clone(), Scalar::I(i));
                    self.exec(body)?;
                }
                match old {
                    Some(o) => self.vars.insert(var.clone(), o),
                    None => self.vars.remove(var),
                };
            }
            StmtNode::Store {
                buffer,
                indices,
                value,
            } => {
                let offs = self.offsets(buffer, indices)?;
                let v = self.eval(value)?;
                if v.len() != 1 && v.len() != offs.len() {
                    return Err(InterpError::Lanes(buffer.name().to_string()));
                }
                let st = self.storage_mut(buffer)?;
                let dt = st.dtype;
                for (l, off) in offs.iter().enumerate() {
                    st.data[*off] = lane(&v, l).cast(dt);
                }
            }
            StmtNode::Allocate { buffer, body } => {
                let mut shape = Vec::new();
                for d in buffer.shape() {
                    let n = self.eval_scalar(d)?.as_i64();
                    if n < 0 {
                        return Err(InterpError::BadAllocation(buffer.name().to_string()));
                    }
                    shape.push(n as usize);
                }
                let slot = self.allocs.len();
                self.allocs.push(HostBuffer::zeros(buffer.dtype(), &shape));
                let old = self.slots.insert(buffer.data().clone(), (false, slot));
                let r = self.exec(body);
                // Allocations nest, so this one (and everything above it) is dead now; without
                // freeing it an allocation inside a loop would keep one copy per iteration.
                self.allocs.truncate(slot);
                match old {
                    Some(o) => self.slots.insert(buffer.data().clone(), o),
                    None => self.slots.remove(buffer.data()),
                };
                r?;
            }
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
                if is_true(self.eval_scalar(cond)?) {
                    self.exec(then_case)?;
                } else if let Some(e) = else_case {
                    self.exec(e)?;
                }
            }
            StmtNode::Seq(v) => {
                for x in v {
                    self.exec(x)?;
                }
            }
            StmtNode::Attr { body, .. } => self.exec(body)?,
            StmtNode::Let { var, value, body } => {
                let v = self.eval_scalar(value)?;
                let old = self.vars.insert(var.clone(), v);
                self.exec(body)?;
                match old {
                    Some(o) => self.vars.insert(var.clone(), o),
                    None => self.vars.remove(var),
                };
            }
            StmtNode::Evaluate(e) => {
                self.eval(e)?;
            }
            StmtNode::StorageSync(_) => {}
        }
        Ok(())
    }

    fn eval_scalar(&mut self, e: &Expr) -> Result<Scalar, InterpError> {
        let v = self.eval(e)?;
        if v.len() != 1 {
            return Err(InterpError::Lanes(e.to_string()));
        }
        Ok(v[0])
    }

    /// Applies `f` lane by lane to two values of equal (or scalar) width.
    fn zip(
        e: &Expr,
        a: &Value,
        b: &Value,
        mut f: impl FnMut(Scalar, Scalar) -> Result<Scalar, InterpError>,
    ) -> Result<Value, InterpError> {
        let n = a.len().max(b.len());
        if (a.len() != 1 && a.len() != n) || (b.len() != 1 && b.len() != n) {
            return Err(InterpError::Lanes(e.to_string()));
        }
        (0..n).map(|i| f(lane(a, i), lane(b, i))).collect()
    }

    fn eval(&mut self, e: &Expr) -> Result<Value, InterpError> {
        let dt = e.dtype().element_of();
        Ok(match e.node() {
            ExprNode::Var(v) => vec![*self
                .vars
                .get(v)
                .ok_or_else(|| InterpError::UnboundVar(v.name().to_string()))?],
            ExprNode::IntImm { value, .. } => vec![Scalar::I(*value)],
            ExprNode::FloatImm { value, .. } => vec![Scalar::F(*value).cast(dt)],
            ExprNode::Binary { op, a, b } => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                let float = dt.is_float();
                Self::zip(e, &x, &y, |p, q| {
                    binary_lane(e, *op, float, p, q).map(|r| r.cast(dt))
                })?
            }
            ExprNode::Cmp { op, a, b } => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                let float = a.dtype().is_float();
                Self::zip(e, &x, &y, |p, q| {
                    Ok(Scalar::I(compare_lane(*op, float, p, q) as i64))
                })?
            }
            ExprNode::And(a, b) | ExprNode::Or(a, b) => {
                let and = matches!(e.node(), ExprNode::And(..));
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Self::zip(e, &x, &y, |p, q| {
                    let r = if and {
                        is_true(p) && is_true(q)
                    } else {
                        is_true(p) || is_true(q)
                    };
                    Ok(Scalar::I(r as i64))
                })?
            }
            ExprNode::Not(a) => self
                .eval(a)?
                .into_iter()
                .map(|p| Scalar::I(!is_true(p) as i64))
                .collect(),
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => {
                let c = self.eval(cond)?;
                let (t, f) = (self.eval(then_value)?, self.eval(else_value)?);
                let n = c.len().max(t.len()).max(f.len());
                (0..n)
                    .map(|i| {
                        if is_true(lane(&c, i)) {
                            lane(&t, i)
                        } else {
                            lane(&f, i)
                        }
                    })
                    .collect()
            }
            ExprNode::Cast { dtype, value } => self
                .eval(value)?
                .into_iter()
                .map(|s| s.cast(dtype.element_of()))
                .collect(),
            ExprNode::Load { buffer, indices } => {
                let offs = self.offsets(buffer, indices)?;
                let st = self.storage(buffer)?;
                offs.iter().map(|o| st.data[*o]).collect()
            }
            ExprNode::Ramp {
                base,
                stride,
                lanes,
            } => {
                let (b, s) = (
                    self.eval_scalar(base)?.as_i64(),
                    self.eval_scalar(stride)?.as_i64(),
                );
                (0..*lanes as i64)
                    .map(|i| Scalar::I(b + i * s).cast(dt))
                    .collect()
            }
            ExprNode::Broadcast { value, lanes } => vec![self.eval_scalar(value)?; *lanes as usize],
            ExprNode::Call { op, args, .. } => {
                if args.len() != op.arity() {
                    return Err(InterpError::Arity(op.name().to_string()));
                }
                if *op == Intrinsic::IfThenElse {
                    let c = self.eval_scalar(&args[0])?;
                    return self.eval(if is_true(c) { &args[1] } else { &args[2] });
                }
                if op.is_dot4() {
                    let (x, y) = (self.eval(&args[0])?, self.eval(&args[1])?);
                    return Self::zip(e, &x, &y, |p, q| {
                        Ok(Scalar::I(dot4(*op, p.as_i64(), q.as_i64())).cast(dt))
                    });
                }
                if op.is_bitwise() {
                    let x = self.eval(&args[0])?;
                    let y = match args.get(1) {
                        Some(b) => self.eval(b)?,
                        None => vec![Scalar::I(0)],
                    };
                    return Self::zip(e, &x, &y, |p, q| {
                        Ok(Scalar::I(bitwise_lane(*op, dt, p.as_i64(), q.as_i64())).cast(dt))
                    });
                }
                let x = self.eval(&args[0])?;
                let y = if args.len() > 1 {
                    self.eval(&args[1])?
                } else {
                    vec![Scalar::F(0.0)]
                };
                Self::zip(e, &x, &y, |p, q| {
                    Ok(Scalar::F(math_lane(*op, p.as_f64(), q.as_f64())).cast(dt))
                })?
            }
        })
    }
}

/// One lane of arithmetic `op` (of `e`, for its error): floats in `f64`, integers
/// wrapping, a division by zero an error.
fn binary_lane(
    e: &Expr,
    op: BinOp,
    float: bool,
    p: Scalar,
    q: Scalar,
) -> Result<Scalar, InterpError> {
    if float {
        let (p, q) = (p.as_f64(), q.as_f64());
        return Ok(Scalar::F(match op {
            BinOp::Add => p + q,
            BinOp::Sub => p - q,
            BinOp::Mul => p * q,
            BinOp::Div => p / q,
            BinOp::Mod => p % q,
            BinOp::FloorDiv => (p / q).floor(),
            BinOp::FloorMod => p - (p / q).floor() * q,
            BinOp::Min => p.min(q),
            BinOp::Max => p.max(q),
        }));
    }
    let (p, q) = (p.as_i64(), q.as_i64());
    if q == 0
        && matches!(
            op,
            BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod
        )
    {
        return Err(InterpError::DivisionByZero(e.to_string()));
    }
    Ok(Scalar::I(match op {
        BinOp::Add => p.wrapping_add(q),
        BinOp::Sub => p.wrapping_sub(q),
        BinOp::Mul => p.wrapping_mul(q),
        BinOp::Div => p.wrapping_div(q),
        BinOp::Mod => p.wrapping_rem(q),
        BinOp::FloorDiv => floordiv(p, q),
        BinOp::FloorMod => p.wrapping_sub(floordiv(p, q).wrapping_mul(q)),
        BinOp::Min => p.min(q),
        BinOp::Max => p.max(q),
    }))
}

/// One lane of comparison `op`: a NaN compares unequal to everything.
fn compare_lane(op: CmpOp, float: bool, p: Scalar, q: Scalar) -> bool {
    use std::cmp::Ordering::*;
    let ord = if float {
        p.as_f64().partial_cmp(&q.as_f64())
    } else {
        Some(p.as_i64().cmp(&q.as_i64()))
    };
    match (op, ord) {
        (CmpOp::Ne, None) => true,
        (_, None) => false,
        (CmpOp::Eq, Some(o)) => o == Equal,
        (CmpOp::Ne, Some(o)) => o != Equal,
        (CmpOp::Lt, Some(o)) => o == Less,
        (CmpOp::Le, Some(o)) => o != Greater,
        (CmpOp::Gt, Some(o)) => o == Greater,
        (CmpOp::Ge, Some(o)) => o != Less,
    }
}

/// `Σ_{i<4} u8(a_i) · i8(b_i)` over the four low bytes of `a` and `b`
/// ([`Intrinsic::Dot4U8I8`]).
pub fn dot4_u8i8(a: i64, b: i64) -> i64 {
    (0..4)
        .map(|i| {
            let x = (a >> (8 * i)) as u8 as i64;
            let y = (b >> (8 * i)) as u8 as i8 as i64;
            x * y
        })
        .sum()
}

/// One lane of the int8 dot product `op` ([`Intrinsic::is_dot4`]): the exact sum, or
/// for [`Intrinsic::Dot4U8I8Sat`] the sum of the two adjacent pairs, each saturated to
/// int16.
pub fn dot4(op: Intrinsic, a: i64, b: i64) -> i64 {
    if op != Intrinsic::Dot4U8I8Sat {
        return dot4_u8i8(a, b);
    }
    let product = |i: i64| {
        let x = (a >> (8 * i)) as u8 as i64;
        let y = (b >> (8 * i)) as u8 as i8 as i64;
        x * y
    };
    let pair = |i: i64| (product(i) + product(i + 1)).clamp(-32768, 32767);
    pair(0) + pair(2)
}

/// One lane of bitwise intrinsic `op` on integers of type `dt` (`q`: the second
/// operand): C's semantics, a right shift logical for unsigned types; a shift by the
/// type's width or more gives 0 (or the sign, shifting a negative right), where C leaves
/// it undefined.
pub fn bitwise_lane(op: Intrinsic, dt: DataType, p: i64, q: i64) -> i64 {
    let bits = u32::from(dt.bits.max(1)).min(64);
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let shift = u32::try_from(q).ok().filter(|&s| s < bits);
    match op {
        Intrinsic::BitAnd => p & q,
        Intrinsic::BitOr => p | q,
        Intrinsic::BitXor => p ^ q,
        Intrinsic::BitNot => !p,
        Intrinsic::ShiftLeft => shift.map_or(0, |s| p.wrapping_shl(s)),
        Intrinsic::ShiftRight if dt.is_int() => p >> shift.unwrap_or(63),
        Intrinsic::ShiftRight => shift.map_or(0, |s| (((p as u64) & mask) >> s) as i64),
        _ => 0,
    }
}

/// One lane of math intrinsic `op` (`q`: the second operand of `pow`).
fn math_lane(op: Intrinsic, p: f64, q: f64) -> f64 {
    match op {
        Intrinsic::Exp => p.exp(),
        Intrinsic::Log => p.ln(),
        Intrinsic::Sqrt => p.sqrt(),
        Intrinsic::Rsqrt => 1.0 / p.sqrt(),
        Intrinsic::Tanh => p.tanh(),
        Intrinsic::Sigmoid => 1.0 / (1.0 + (-p).exp()),
        Intrinsic::Pow => p.powf(q),
        Intrinsic::Fabs => p.abs(),
        Intrinsic::Erf => libm::erf(p),
        Intrinsic::Floor => p.floor(),
        Intrinsic::Ceil => p.ceil(),
        Intrinsic::Round => p.round(),
        Intrinsic::RoundEven => p.round_ties_even(),
        Intrinsic::Sin => p.sin(),
        Intrinsic::Cos => p.cos(),
        Intrinsic::Tan => p.tan(),
        Intrinsic::Asin => p.asin(),
        Intrinsic::Acos => p.acos(),
        Intrinsic::Atan => p.atan(),
        Intrinsic::Sinh => p.sinh(),
        Intrinsic::Cosh => p.cosh(),
        Intrinsic::Asinh => p.asinh(),
        Intrinsic::Acosh => p.acosh(),
        Intrinsic::Atanh => p.atanh(),
        // integer: evaluated by the caller
        Intrinsic::Dot4U8I8
        | Intrinsic::Dot4U8I7
        | Intrinsic::Dot4U8I8Sat
        | Intrinsic::BitAnd
        | Intrinsic::BitOr
        | Intrinsic::BitXor
        | Intrinsic::BitNot
        | Intrinsic::ShiftLeft
        | Intrinsic::ShiftRight => f64::NAN,
        // evaluated lazily by the caller; as a lane, the condition's value
        Intrinsic::IfThenElse => p,
    }
}

/// Evaluates a scalar integer expression under variable bindings (for tests and
/// analyses); `None` when it divides by zero or mentions an unbound variable.
pub fn eval_int(e: &Expr, bindings: &HashMap<Var, i64>) -> Option<i64> {
    let mut args: [HostBuffer; 0] = [];
    let mut m = Machine {
        vars: bindings
            .iter()
            .map(|(k, v)| (k.clone(), Scalar::I(*v)))
            .collect(),
        args: &mut args,
        allocs: Vec::new(),
        slots: HashMap::new(),
    };
    m.eval_scalar(e).ok().map(|s| s.as_i64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C's bitwise operators, with a right shift logical for unsigned types and the
    /// out-of-range shifts ONNX's BitShift-28 defines (the sign's extension alone).
    #[test]
    fn bitwise_lanes_follow_c_and_onnx() {
        let (u8t, i8t, u64t) = (DataType::uint(8), DataType::int(8), DataType::uint(64));
        assert_eq!(bitwise_lane(Intrinsic::BitAnd, u8t, 0b1100, 0b1010), 0b1000);
        assert_eq!(bitwise_lane(Intrinsic::BitOr, u8t, 0b1100, 0b1010), 0b1110);
        assert_eq!(bitwise_lane(Intrinsic::BitXor, u8t, 0b1100, 0b1010), 0b0110);
        assert_eq!(bitwise_lane(Intrinsic::BitNot, i8t, 5, 0), -6);
        assert_eq!(bitwise_lane(Intrinsic::ShiftLeft, u8t, 3, 2), 12);
        assert_eq!(bitwise_lane(Intrinsic::ShiftRight, i8t, -8, 1), -4);
        assert_eq!(bitwise_lane(Intrinsic::ShiftRight, u64t, -1, 60), 0xf);
        assert_eq!(bitwise_lane(Intrinsic::ShiftRight, i8t, -8, 9), -1);
        assert_eq!(bitwise_lane(Intrinsic::ShiftLeft, u8t, 1, 8), 0);
        assert_eq!(bitwise_lane(Intrinsic::ShiftRight, u8t, 200, -1), 0);
    }
}
