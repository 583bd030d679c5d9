//! Scalar and vector expressions.
//!
//! Expressions are immutable values behind an `Arc`: cloning is cheap and passes build new
//! trees that share the unchanged parts of the old ones.

use crate::buffer::Buffer;
use crate::dtype::DataType;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_VAR_ID: AtomicU64 = AtomicU64::new(1);

fn fresh_id() -> u64 {
    NEXT_VAR_ID.fetch_add(1, Ordering::Relaxed)
}

/// A variable. Two variables are the same variable when their ids are equal; the name is
/// only a hint for printing.
#[derive(Clone, Debug, Serialize)]
pub struct Var(Arc<VarNode>);

#[derive(Debug, Serialize, Deserialize)]
pub struct VarNode {
    pub name: String,
    pub id: u64,
    pub dtype: DataType,
}

impl<'de> Deserialize<'de> for Var {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let node = VarNode::deserialize(d)?;
        // Keep fresh ids of this process distinct from the deserialized ones.
        NEXT_VAR_ID.fetch_max(node.id + 1, Ordering::Relaxed);
        Ok(Var(Arc::new(node)))
    }
}

impl Var {
    /// A new variable, distinct from every other.
    pub fn new(name: impl Into<String>, dtype: DataType) -> Self {
        Var(Arc::new(VarNode {
            name: name.into(),
            id: fresh_id(),
            dtype,
        }))
    }
    /// A new int32 variable.
    pub fn int(name: impl Into<String>) -> Self {
        Self::new(name, DataType::int32())
    }
    pub fn name(&self) -> &str {
        &self.0.name
    }
    pub fn id(&self) -> u64 {
        self.0.id
    }
    pub fn dtype(&self) -> DataType {
        self.0.dtype
    }
    /// A new variable with the same type and a new name.
    pub fn copy_with_name(&self, name: impl Into<String>) -> Var {
        Var::new(name, self.dtype())
    }
    pub fn to_expr(&self) -> Expr {
        Expr::new(ExprNode::Var(self.clone()))
    }
}

impl PartialEq for Var {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}
impl Eq for Var {}
impl Hash for Var {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id.hash(state)
    }
}
impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Binary arithmetic operators. `Div` and `Mod` on integers truncate toward zero (as in
/// C); `FloorDiv` and `FloorMod` round toward negative infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    FloorDiv,
    FloorMod,
    Min,
    Max,
}

/// Comparison operators; the result is bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// The operator that gives the same answer with its operands swapped (`a < b` is
    /// `b > a`).
    pub fn swapped(self) -> CmpOp {
        match self {
            CmpOp::Eq | CmpOp::Ne => self,
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
        }
    }
}

/// Intrinsic calls. `IfThenElse` evaluates only the branch it takes (unlike `Select`), so a
/// padded access may guard an out-of-bounds load with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Intrinsic {
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Tanh,
    Sigmoid,
    Pow,
    Fabs,
    Erf,
    Floor,
    Ceil,
    Round,
    /// Rounding to the nearest integer, halves to even (TVM's `nearbyint`; C's `rint` in
    /// the default rounding mode): what ONNX's quantization and `Round` specify, where
    /// [`Intrinsic::Round`] (C's `round`) rounds halves away from zero.
    RoundEven,
    IfThenElse,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    /// `Σ_{i<4} u8(a_i) · i8(b_i)`: the four bytes of int32 word `a` read unsigned, those
    /// of `b` signed, their products summed exactly in int32 — one lane of x86's
    /// `vpdpbusd` (AVX-512 VNNI / AVX-VNNI) without its accumulator. The int8 products
    /// compute on words of four bytes so that a vector of words is that instruction's
    /// operand; the CPU printer maps `acc + dot4(a, b)` on vectors to it (or to its
    /// AVX2 emulation).
    Dot4U8I8,
    /// [`Intrinsic::Dot4U8I8`] where the sum of two adjacent products of `b`'s bytes with
    /// any bytes ≤ 255 fits int16 — each pair's positive parts, and its negative parts,
    /// sum to at most 128, as 7-bit weights (onnxruntime's `reduce_range`) always do: the
    /// same sum, so CPUs without VNNI may use the shorter saturating `vpmaddubsw` form
    /// and stay exact (te's `pairs_fit` proves it per weight).
    Dot4U8I7,
    /// [`Intrinsic::Dot4U8I8`] with its adjacent byte products summed in int16 with
    /// saturation, `sat16(a₀b₀ + a₁b₁) + sat16(a₂b₂ + a₃b₃)`: x86's `vpmaddubsw` then
    /// `vpmaddwd` by ones, the int8 product onnxruntime and TVM compute on CPUs without
    /// VNNI. It differs from the exact sum only where a pair exceeds int16 (255 · 127 · 2
    /// does); a build asks for it (`Int8Sums::Saturating`), never by default.
    Dot4U8I8Sat,
    /// The bitwise operators of integers (TVM's `tir.bitwise_*` and `tir.shift_*`):
    /// and, or, xor, not; shifts by the second operand, right shifts logical for
    /// unsigned types and arithmetic for signed ones (C's).
    BitAnd,
    BitOr,
    BitXor,
    BitNot,
    ShiftLeft,
    ShiftRight,
}

impl Intrinsic {
    /// Whether this is one of the int8 dot products on words of four bytes.
    pub fn is_dot4(self) -> bool {
        matches!(
            self,
            Intrinsic::Dot4U8I8 | Intrinsic::Dot4U8I7 | Intrinsic::Dot4U8I8Sat
        )
    }

    /// Whether this is one of the bitwise operators of integers.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            Intrinsic::BitAnd
                | Intrinsic::BitOr
                | Intrinsic::BitXor
                | Intrinsic::BitNot
                | Intrinsic::ShiftLeft
                | Intrinsic::ShiftRight
        )
    }

    pub const ALL: [Intrinsic; 34] = [
        Intrinsic::Exp,
        Intrinsic::Log,
        Intrinsic::Sqrt,
        Intrinsic::Rsqrt,
        Intrinsic::Tanh,
        Intrinsic::Sigmoid,
        Intrinsic::Pow,
        Intrinsic::Fabs,
        Intrinsic::Erf,
        Intrinsic::Floor,
        Intrinsic::Ceil,
        Intrinsic::Round,
        Intrinsic::RoundEven,
        Intrinsic::IfThenElse,
        Intrinsic::Sin,
        Intrinsic::Cos,
        Intrinsic::Tan,
        Intrinsic::Asin,
        Intrinsic::Acos,
        Intrinsic::Atan,
        Intrinsic::Sinh,
        Intrinsic::Cosh,
        Intrinsic::Asinh,
        Intrinsic::Acosh,
        Intrinsic::Atanh,
        Intrinsic::Dot4U8I8,
        Intrinsic::Dot4U8I7,
        Intrinsic::Dot4U8I8Sat,
        Intrinsic::BitAnd,
        Intrinsic::BitOr,
        Intrinsic::BitXor,
        Intrinsic::BitNot,
        Intrinsic::ShiftLeft,
        Intrinsic::ShiftRight,
    ];

    /// The intrinsic TVM prints as `name` ([`Intrinsic::name`]).
    pub fn parse(name: &str) -> Option<Intrinsic> {
        Self::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The name TVM prints for the call, e.g. `tir.exp`.
    pub fn name(self) -> &'static str {
        match self {
            Intrinsic::Exp => "tir.exp",
            Intrinsic::Log => "tir.log",
            Intrinsic::Sqrt => "tir.sqrt",
            Intrinsic::Rsqrt => "tir.rsqrt",
            Intrinsic::Tanh => "tir.tanh",
            Intrinsic::Sigmoid => "tir.sigmoid",
            Intrinsic::Pow => "tir.pow",
            Intrinsic::Fabs => "tir.fabs",
            Intrinsic::Erf => "tir.erf",
            Intrinsic::Floor => "tir.floor",
            Intrinsic::Ceil => "tir.ceil",
            Intrinsic::Round => "tir.round",
            Intrinsic::RoundEven => "tir.nearbyint",
            Intrinsic::IfThenElse => "tir.if_then_else",
            Intrinsic::Sin => "tir.sin",
            Intrinsic::Cos => "tir.cos",
            Intrinsic::Tan => "tir.tan",
            Intrinsic::Asin => "tir.asin",
            Intrinsic::Acos => "tir.acos",
            Intrinsic::Atan => "tir.atan",
            Intrinsic::Sinh => "tir.sinh",
            Intrinsic::Cosh => "tir.cosh",
            Intrinsic::Asinh => "tir.asinh",
            Intrinsic::Acosh => "tir.acosh",
            Intrinsic::Atanh => "tir.atanh",
            // not TVM's: its x86 int8 schedules tensorize with LLVM's `vpdpbusd` instead
            Intrinsic::Dot4U8I8 => "tessera.dot4_u8i8",
            Intrinsic::Dot4U8I7 => "tessera.dot4_u8i7",
            Intrinsic::Dot4U8I8Sat => "tessera.dot4_u8i8_sat",
            Intrinsic::BitAnd => "tir.bitwise_and",
            Intrinsic::BitOr => "tir.bitwise_or",
            Intrinsic::BitXor => "tir.bitwise_xor",
            Intrinsic::BitNot => "tir.bitwise_not",
            Intrinsic::ShiftLeft => "tir.shift_left",
            Intrinsic::ShiftRight => "tir.shift_right",
        }
    }
    /// How many arguments the call takes.
    pub fn arity(self) -> usize {
        match self {
            Intrinsic::Pow
            | Intrinsic::Dot4U8I8
            | Intrinsic::Dot4U8I7
            | Intrinsic::Dot4U8I8Sat
            | Intrinsic::BitAnd
            | Intrinsic::BitOr
            | Intrinsic::BitXor
            | Intrinsic::ShiftLeft
            | Intrinsic::ShiftRight => 2,
            Intrinsic::IfThenElse => 3,
            _ => 1,
        }
    }
}

/// An expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr(Arc<ExprNode>);

/// The expression nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprNode {
    Var(Var),
    IntImm {
        dtype: DataType,
        value: i64,
    },
    FloatImm {
        dtype: DataType,
        #[serde(with = "float_repr")]
        value: f64,
    },
    Binary {
        op: BinOp,
        a: Expr,
        b: Expr,
    },
    Cmp {
        op: CmpOp,
        a: Expr,
        b: Expr,
    },
    And(Expr, Expr),
    Or(Expr, Expr),
    Not(Expr),
    Select {
        cond: Expr,
        then_value: Expr,
        else_value: Expr,
    },
    Cast {
        dtype: DataType,
        value: Expr,
    },
    /// A read of a buffer element; with a `Ramp` index it reads a vector.
    Load {
        buffer: Buffer,
        indices: Vec<Expr>,
    },
    /// The vector `base, base + stride, …` of `lanes` lanes.
    Ramp {
        base: Expr,
        stride: Expr,
        lanes: u16,
    },
    /// A scalar repeated over `lanes` lanes.
    Broadcast {
        value: Expr,
        lanes: u16,
    },
    Call {
        dtype: DataType,
        op: Intrinsic,
        args: Vec<Expr>,
    },
}

/// The serialized form of a float immediate. JSON has no infinities or NaN (serde_json
/// writes them as `null` and cannot read them back), so human-readable formats write those
/// three as the strings `"inf"`, `"-inf"` and `"nan"`; finite values stay numbers.
mod float_repr {
    use serde::{de, Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() || !s.is_human_readable() {
            s.serialize_f64(*v)
        } else if v.is_nan() {
            s.serialize_str("nan")
        } else if *v > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_str("-inf")
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = f64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or one of \"inf\", \"-inf\", \"nan\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
                match v {
                    "inf" => Ok(f64::INFINITY),
                    "-inf" => Ok(f64::NEG_INFINITY),
                    "nan" => Ok(f64::NAN),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        if d.is_human_readable() {
            d.deserialize_any(V)
        } else {
            d.deserialize_f64(V)
        }
    }
}

impl Expr {
    pub fn new(node: ExprNode) -> Self {
        Expr(Arc::new(node))
    }
    pub fn node(&self) -> &ExprNode {
        &self.0
    }
    /// Whether both handles point to the same node (no structural comparison).
    pub fn same_as(&self, other: &Expr) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The type of the value this expression computes.
    pub fn dtype(&self) -> DataType {
        match self.node() {
            ExprNode::Var(v) => v.dtype(),
            ExprNode::IntImm { dtype, .. } | ExprNode::FloatImm { dtype, .. } => *dtype,
            ExprNode::Binary { a, .. } => a.dtype(),
            ExprNode::Cmp { a, .. } => DataType::bool().with_lanes(a.dtype().lanes),
            ExprNode::And(a, _) | ExprNode::Or(a, _) | ExprNode::Not(a) => a.dtype(),
            ExprNode::Select { then_value, .. } => then_value.dtype(),
            ExprNode::Cast { dtype, .. } => *dtype,
            ExprNode::Load { buffer, indices } => {
                let lanes = indices.iter().map(|i| i.dtype().lanes).max().unwrap_or(1);
                buffer.dtype().with_lanes(lanes)
            }
            ExprNode::Ramp { base, lanes, .. } => base.dtype().with_lanes(*lanes),
            ExprNode::Broadcast { value, lanes } => value.dtype().with_lanes(*lanes),
            ExprNode::Call { dtype, .. } => *dtype,
        }
    }

    // ----- leaves -----

    pub fn int(value: i64) -> Expr {
        Self::int_of(DataType::int32(), value)
    }
    pub fn int_of(dtype: DataType, value: i64) -> Expr {
        Expr::new(ExprNode::IntImm { dtype, value })
    }
    pub fn float(value: f64) -> Expr {
        Self::float_of(DataType::float32(), value)
    }
    pub fn float_of(dtype: DataType, value: f64) -> Expr {
        Expr::new(ExprNode::FloatImm { dtype, value })
    }
    pub fn bool(value: bool) -> Expr {
        Self::int_of(DataType::bool(), value as i64)
    }
    /// A constant of any type (int, uint, bool or float) holding `value`.
    pub fn constant(dtype: DataType, value: f64) -> Expr {
        if dtype.is_float() {
            Self::float_of(dtype, value)
        } else {
            Self::int_of(dtype, value as i64)
        }
    }
    /// The integer value of an integer or bool immediate.
    pub fn as_int(&self) -> Option<i64> {
        match self.node() {
            ExprNode::IntImm { value, .. } => Some(*value),
            _ => None,
        }
    }
    pub fn as_float(&self) -> Option<f64> {
        match self.node() {
            ExprNode::FloatImm { value, .. } => Some(*value),
            _ => None,
        }
    }
    pub fn as_var(&self) -> Option<&Var> {
        match self.node() {
            ExprNode::Var(v) => Some(v),
            _ => None,
        }
    }
    pub fn is_const_int(&self, v: i64) -> bool {
        self.as_int() == Some(v)
    }

    // ----- builders -----

    /// A constant of this expression's type, for mixing literals into arithmetic.
    fn lit(&self, v: i64) -> Expr {
        Expr::constant(self.dtype(), v as f64)
    }

    pub fn binary(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::new(ExprNode::Binary { op, a, b })
    }
    pub fn cmp(op: CmpOp, a: Expr, b: Expr) -> Expr {
        Expr::new(ExprNode::Cmp { op, a, b })
    }
    pub fn floordiv(a: Expr, b: Expr) -> Expr {
        Self::binary(BinOp::FloorDiv, a, b)
    }
    pub fn floormod(a: Expr, b: Expr) -> Expr {
        Self::binary(BinOp::FloorMod, a, b)
    }
    pub fn truncdiv(a: Expr, b: Expr) -> Expr {
        Self::binary(BinOp::Div, a, b)
    }
    pub fn truncmod(a: Expr, b: Expr) -> Expr {
        Self::binary(BinOp::Mod, a, b)
    }
    pub fn min(a: Expr, b: Expr) -> Expr {
        Self::binary(BinOp::Min, a, b)
    }
    pub fn max(a: Expr, b: Expr) -> Expr {
        Self::binary(BinOp::Max, a, b)
    }
    pub fn eq(&self, b: impl IntoExpr) -> Expr {
        let b = b.into_expr_like(self);
        Self::cmp(CmpOp::Eq, self.clone(), b)
    }
    pub fn ne(&self, b: impl IntoExpr) -> Expr {
        let b = b.into_expr_like(self);
        Self::cmp(CmpOp::Ne, self.clone(), b)
    }
    pub fn lt(&self, b: impl IntoExpr) -> Expr {
        let b = b.into_expr_like(self);
        Self::cmp(CmpOp::Lt, self.clone(), b)
    }
    pub fn le(&self, b: impl IntoExpr) -> Expr {
        let b = b.into_expr_like(self);
        Self::cmp(CmpOp::Le, self.clone(), b)
    }
    pub fn gt(&self, b: impl IntoExpr) -> Expr {
        let b = b.into_expr_like(self);
        Self::cmp(CmpOp::Gt, self.clone(), b)
    }
    pub fn ge(&self, b: impl IntoExpr) -> Expr {
        let b = b.into_expr_like(self);
        Self::cmp(CmpOp::Ge, self.clone(), b)
    }
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::new(ExprNode::And(a, b))
    }
    pub fn or(a: Expr, b: Expr) -> Expr {
        Expr::new(ExprNode::Or(a, b))
    }
    #[allow(clippy::should_implement_trait)]
    pub fn not(a: Expr) -> Expr {
        Expr::new(ExprNode::Not(a))
    }
    /// The conjunction of all conditions (true when there are none).
    pub fn all(conds: impl IntoIterator<Item = Expr>) -> Expr {
        conds
            .into_iter()
            .reduce(Expr::and)
            .unwrap_or_else(|| Expr::bool(true))
    }
    pub fn select(cond: Expr, then_value: Expr, else_value: Expr) -> Expr {
        Expr::new(ExprNode::Select {
            cond,
            then_value,
            else_value,
        })
    }
    /// `cond ? then_value : else_value`, evaluating only the branch taken.
    pub fn if_then_else(cond: Expr, then_value: Expr, else_value: Expr) -> Expr {
        let dtype = then_value.dtype();
        Self::call(
            dtype,
            Intrinsic::IfThenElse,
            vec![cond, then_value, else_value],
        )
    }
    pub fn cast(dtype: DataType, value: Expr) -> Expr {
        Expr::new(ExprNode::Cast { dtype, value })
    }
    pub fn load(buffer: &Buffer, indices: Vec<Expr>) -> Expr {
        Expr::new(ExprNode::Load {
            buffer: buffer.clone(),
            indices,
        })
    }
    pub fn ramp(base: Expr, stride: Expr, lanes: u16) -> Expr {
        Expr::new(ExprNode::Ramp {
            base,
            stride,
            lanes,
        })
    }
    pub fn broadcast(value: Expr, lanes: u16) -> Expr {
        Expr::new(ExprNode::Broadcast { value, lanes })
    }
    pub fn call(dtype: DataType, op: Intrinsic, args: Vec<Expr>) -> Expr {
        Expr::new(ExprNode::Call { dtype, op, args })
    }
    /// A call of a one-argument math intrinsic with the argument's type.
    pub fn math(op: Intrinsic, arg: Expr) -> Expr {
        Self::call(arg.dtype(), op, vec![arg])
    }
    pub fn exp(self) -> Expr {
        Self::math(Intrinsic::Exp, self)
    }
    pub fn log(self) -> Expr {
        Self::math(Intrinsic::Log, self)
    }
    pub fn sqrt(self) -> Expr {
        Self::math(Intrinsic::Sqrt, self)
    }
    pub fn tanh(self) -> Expr {
        Self::math(Intrinsic::Tanh, self)
    }
    pub fn sigmoid(self) -> Expr {
        Self::math(Intrinsic::Sigmoid, self)
    }
    pub fn pow(self, e: impl IntoExpr) -> Expr {
        let e = e.into_expr_like(&self);
        Self::call(self.dtype(), Intrinsic::Pow, vec![self, e])
    }
}

/// Conversion of literals and expressions into an expression whose type follows another
/// operand (so `i + 1` adds an int32 one and `x * 2` on a float multiplies by `2f`).
pub trait IntoExpr {
    fn into_expr_like(self, like: &Expr) -> Expr;
}
impl IntoExpr for Expr {
    fn into_expr_like(self, _: &Expr) -> Expr {
        self
    }
}
impl IntoExpr for &Expr {
    fn into_expr_like(self, _: &Expr) -> Expr {
        self.clone()
    }
}
impl IntoExpr for &Var {
    fn into_expr_like(self, _: &Expr) -> Expr {
        self.to_expr()
    }
}
impl IntoExpr for i64 {
    fn into_expr_like(self, like: &Expr) -> Expr {
        like.lit(self)
    }
}
impl IntoExpr for i32 {
    fn into_expr_like(self, like: &Expr) -> Expr {
        like.lit(self as i64)
    }
}
impl IntoExpr for f64 {
    fn into_expr_like(self, like: &Expr) -> Expr {
        Expr::constant(like.dtype().element_of(), self)
    }
}

impl From<&Var> for Expr {
    fn from(v: &Var) -> Expr {
        v.to_expr()
    }
}
impl From<Var> for Expr {
    fn from(v: Var) -> Expr {
        v.to_expr()
    }
}
impl From<i64> for Expr {
    fn from(v: i64) -> Expr {
        Expr::int(v)
    }
}
impl From<i32> for Expr {
    fn from(v: i32) -> Expr {
        Expr::int(v as i64)
    }
}
impl From<f64> for Expr {
    fn from(v: f64) -> Expr {
        Expr::float(v)
    }
}
impl From<f32> for Expr {
    fn from(v: f32) -> Expr {
        Expr::float(v as f64)
    }
}

macro_rules! impl_arith {
    ($trait:ident, $method:ident, $op:expr) => {
        impl<R: IntoExpr> std::ops::$trait<R> for Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                let b = rhs.into_expr_like(&self);
                Expr::binary($op, self, b)
            }
        }
        impl<R: IntoExpr> std::ops::$trait<R> for &Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                let b = rhs.into_expr_like(self);
                Expr::binary($op, self.clone(), b)
            }
        }
        impl<R: IntoExpr> std::ops::$trait<R> for &Var {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                let a = self.to_expr();
                let b = rhs.into_expr_like(&a);
                Expr::binary($op, a, b)
            }
        }
    };
}
impl_arith!(Add, add, BinOp::Add);
impl_arith!(Sub, sub, BinOp::Sub);
impl_arith!(Mul, mul, BinOp::Mul);
impl_arith!(Div, div, BinOp::Div);
impl_arith!(Rem, rem, BinOp::Mod);

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        let zero = self.lit(0);
        Expr::binary(BinOp::Sub, zero, self)
    }
}

/// A half-open range `[min, min + extent)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Range {
    pub min: Expr,
    pub extent: Expr,
}

impl Range {
    pub fn new(min: impl Into<Expr>, extent: impl Into<Expr>) -> Self {
        Range {
            min: min.into(),
            extent: extent.into(),
        }
    }
    /// `[0, extent)`.
    pub fn from_extent(extent: impl Into<Expr>) -> Self {
        Range {
            min: Expr::int(0),
            extent: extent.into(),
        }
    }
}
