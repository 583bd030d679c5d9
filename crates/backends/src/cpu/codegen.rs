//! C code generation from the IR.
//!
//! The function becomes `static int32_t <name>_impl(T* __restrict__ p0, …)` plus an
//! exported entry `int32_t tessera_<name>(void** args, int32_t num_args)`. Buffers are
//! flattened row-major. Vectorized loops are first turned into vector expressions
//! (`tessera_ir::transform::vectorize_loops`) and emitted with GCC/Clang vector
//! extensions: contiguous accesses become unaligned vector loads and stores, other
//! accesses gathers and scatters, arithmetic the vector operators. Parallel loops become
//! OpenMP loops (outermost only), unrolled loops carry `#pragma GCC unroll`, allocations
//! are 64-byte aligned (on the stack when small, `aligned_alloc` otherwise).
//!
//! The C computes what the interpreter computes: offsets are int64 for buffers beyond
//! int32's range; narrow integers and float16 are rounded after each scalar operation and
//! signed vector lanes wrap; comparisons (masks of -1/0) and bool vectors (bytes of 0/1)
//! are converted wherever a value of another type is needed; min/max ignore a NaN
//! operand. Scalar int32/int64 arithmetic is assumed not to overflow (as the simplifier
//! assumes). What C cannot express is refused with [`BackendError::Unsupported`].

use crate::backend::BackendError;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write;
use tessera_ir::arith::simplify;
use tessera_ir::transform::{auto_unroll, unroll_loops, vectorize_loops};
use tessera_ir::{
    BinOp, Buffer, CmpOp, DataType, Expr, ExprNode, ForKind, Intrinsic, PrimFunc, Stmt, StmtNode,
    TypeCode, Var,
};

/// Allocations up to this many bytes live on the stack.
const STACK_LIMIT: usize = 32 * 1024;

/// The C type of a generated expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    /// A scalar.
    S(DataType),
    /// A vector of `lanes` elements of a scalar type.
    V(DataType, u16),
    /// A comparison mask: lanes of signed integers of `bits` bits, all ones or zero.
    M(u8, u16),
}

fn scalar_c(t: DataType) -> &'static str {
    match (t.code, t.bits) {
        (TypeCode::Bool, _) => "bool",
        (TypeCode::Int, 8) => "int8_t",
        (TypeCode::Int, 16) => "int16_t",
        (TypeCode::Int, 32) => "int32_t",
        (TypeCode::Int, _) => "int64_t",
        (TypeCode::UInt, 8) => "uint8_t",
        (TypeCode::UInt, 16) => "uint16_t",
        (TypeCode::UInt, 32) => "uint32_t",
        (TypeCode::UInt, _) => "uint64_t",
        (TypeCode::Float, 16) => "_Float16",
        (TypeCode::Float, 32) => "float",
        (TypeCode::Float, _) => "double",
    }
}

fn suffix(t: DataType) -> String {
    t.element_of().to_string()
}

/// Identifiers a variable may not be named in C: the keywords, the identifiers the
/// generated code itself uses (types, functions, macros), the object-like macros of the
/// included headers (glibc's and GCC's predefined `linux`/`unix`), any of which would
/// change the meaning of a declaration. Names starting with `_` are reserved to the
/// implementation and `tsr_`/`v_` to the generator: [`Gen::name_of`] prefixes those.
#[rustfmt::skip]
const RESERVED: &[&str] = &[
    // C11 keywords (the `_X` ones start with `_` and are prefixed anyway) and GNU ones.
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "asm", "typeof",
    // <stdbool.h>, <stdint.h> types and what the entry point and allocations use.
    "bool", "true", "false", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
    "uint32_t", "uint64_t", "args", "num_args", "main", "free", "aligned_alloc", "abs",
    // The math functions the generated code calls.
    "exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "pow", "powf", "fabs",
    "fabsf", "erf", "erff", "floor", "floorf", "ceil", "ceilf", "round", "roundf", "fmod",
    "fmodf",
    // Object-like macros of <math.h>, <stdbool.h>, <stdint.h>, <stdlib.h> and the compiler.
    "linux", "unix", "errno", "math_errhandling", "NULL", "NAN", "INFINITY", "HUGE_VAL",
    "HUGE_VALF", "HUGE_VALL", "MATH_ERRNO", "MATH_ERREXCEPT", "FP_NAN", "FP_INFINITE",
    "FP_ZERO", "FP_SUBNORMAL", "FP_NORMAL", "FP_FAST_FMA", "FP_FAST_FMAF", "FP_ILOGB0",
    "FP_ILOGBNAN", "M_E", "M_LOG2E", "M_LOG10E", "M_LN2", "M_LN10", "M_PI", "M_PI_2", "M_PI_4",
    "M_1_PI", "M_2_PI", "M_2_SQRTPI", "M_SQRT2", "M_SQRT1_2", "EXIT_FAILURE", "EXIT_SUCCESS",
    "RAND_MAX", "MB_CUR_MAX", "BIG_ENDIAN", "LITTLE_ENDIAN", "PDP_ENDIAN", "BYTE_ORDER",
    "FD_SETSIZE", "NFDBITS", "WNOHANG", "WUNTRACED", "WSTOPPED", "WEXITED", "WCONTINUED",
    "WNOWAIT", "INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN", "INT8_MAX", "INT16_MAX",
    "INT32_MAX", "INT64_MAX", "UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX",
    "INT_LEAST8_MIN", "INT_LEAST16_MIN", "INT_LEAST32_MIN", "INT_LEAST64_MIN", "INT_LEAST8_MAX",
    "INT_LEAST16_MAX", "INT_LEAST32_MAX", "INT_LEAST64_MAX", "UINT_LEAST8_MAX",
    "UINT_LEAST16_MAX", "UINT_LEAST32_MAX", "UINT_LEAST64_MAX", "INT_FAST8_MIN",
    "INT_FAST16_MIN", "INT_FAST32_MIN", "INT_FAST64_MIN", "INT_FAST8_MAX", "INT_FAST16_MAX",
    "INT_FAST32_MAX", "INT_FAST64_MAX", "UINT_FAST8_MAX", "UINT_FAST16_MAX", "UINT_FAST32_MAX",
    "UINT_FAST64_MAX", "INTPTR_MIN", "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX",
    "UINTMAX_MAX", "PTRDIFF_MIN", "PTRDIFF_MAX", "SIG_ATOMIC_MIN", "SIG_ATOMIC_MAX", "SIZE_MAX",
    "WCHAR_MIN", "WCHAR_MAX", "WINT_MIN", "WINT_MAX",
];

struct Gen {
    body: String,
    indent: usize,
    names: HashMap<u64, String>,
    used: HashSet<String>,
    /// The variables (and buffer handles) declared where the code is being emitted.
    in_scope: HashSet<u64>,
    vec_types: BTreeSet<(String, u16, DataType)>,
    in_parallel: bool,
    num_threads: usize,
    tmp: usize,
    func: String,
}

fn unsupported(func: &str, reason: String) -> BackendError {
    BackendError::Unsupported {
        backend: "cpu".into(),
        func: func.to_string(),
        reason,
    }
}

/// Generates the C source of `func`; parallel loops use `num_threads` threads.
pub fn generate_c(func: &PrimFunc, num_threads: usize) -> Result<String, BackendError> {
    let (body, skipped) = vectorize_loops(&unroll_loops(&auto_unroll(&func.body)));
    let mut g = Gen {
        body: String::new(),
        indent: 1,
        names: HashMap::new(),
        used: HashSet::new(),
        in_scope: HashSet::new(),
        vec_types: BTreeSet::new(),
        in_parallel: false,
        num_threads: num_threads.max(1),
        tmp: 0,
        func: func.name.clone(),
    };
    let mut params = Vec::new();
    for p in &func.params {
        if p.const_shape().is_none() {
            return Err(unsupported(
                &func.name,
                format!("parameter `{}` has a shape that is not constant", p.name()),
            ));
        }
        let n = g.declare(p.data());
        params.push(format!("{}* __restrict__ {n}", scalar_c(p.dtype())));
    }
    g.stmt(&body)?;

    let entry = entry_symbol(&func.name);
    let mut out = String::new();
    out.push_str("// Generated by tessera (CPU backend). Do not edit.\n");
    out.push_str(
        "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n",
    );
    out.push_str(HELPERS);
    for (_, l, t) in &g.vec_types {
        let bytes = t.bytes() * *l as usize;
        // GCC has no vectors of `bool`: bool lanes are bytes holding 0 or 1.
        let c = if t.is_bool() { "int8_t" } else { scalar_c(*t) };
        let name = vec_name(*t, *l);
        writeln!(
            out,
            "typedef {c} {name} __attribute__((vector_size({bytes})));"
        )
        .unwrap();
        writeln!(
            out,
            "typedef {c} {name}_u __attribute__((vector_size({bytes}), aligned({})));",
            t.bytes()
        )
        .unwrap();
    }
    if !g.vec_types.is_empty() {
        out.push('\n');
    }
    for s in &skipped {
        writeln!(
            out,
            "// loop `{}` stays scalar: {}",
            comment(&s.var),
            comment(&s.reason)
        )
        .unwrap();
    }
    let fname = sanitize(&func.name);
    writeln!(out, "static int32_t {fname}_impl({}) {{", params.join(", ")).unwrap();
    out.push_str("  int32_t tsr_status = 0;\n");
    out.push_str(&g.body);
    out.push_str("  return tsr_status;\n}\n\n");
    writeln!(out, "int32_t {entry}(void** args, int32_t num_args) {{").unwrap();
    writeln!(out, "  if (num_args != {}) return -2;", func.params.len()).unwrap();
    let casts: Vec<String> = func
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| format!("({}*)args[{i}]", scalar_c(p.dtype())))
        .collect();
    writeln!(out, "  return {fname}_impl({});", casts.join(", ")).unwrap();
    out.push_str("}\n");
    Ok(out)
}

/// The exported symbol of a function.
pub fn entry_symbol(func_name: &str) -> String {
    format!("tessera_{}", sanitize(func_name))
}

fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'v');
    }
    s
}

/// Text made safe for a `//` comment: a line break (or a backslash ending the line) would
/// let the rest of it escape into the code.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() || c == '\\' { ' ' } else { c })
        .collect()
}

fn vec_name(t: DataType, lanes: u16) -> String {
    format!("v_{}x{lanes}", suffix(t))
}

fn mask_elem(bits: u8) -> DataType {
    DataType::int(bits)
}

const HELPERS: &str = r#"#define TSR_INT_HELPERS(T, N) \
  static inline T tsr_min_##N(T a, T b) { return a < b ? a : b; } \
  static inline T tsr_max_##N(T a, T b) { return a > b ? a : b; } \
  static inline T tsr_floordiv_##N(T a, T b) { T q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; } \
  static inline T tsr_floormod_##N(T a, T b) { T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
TSR_INT_HELPERS(int8_t, int8)
TSR_INT_HELPERS(int16_t, int16)
TSR_INT_HELPERS(int32_t, int32)
TSR_INT_HELPERS(int64_t, int64)
TSR_INT_HELPERS(uint8_t, uint8)
TSR_INT_HELPERS(uint16_t, uint16)
TSR_INT_HELPERS(uint32_t, uint32)
TSR_INT_HELPERS(uint64_t, uint64)
#define TSR_FLOAT_HELPERS(T, N) \
  static inline T tsr_min_##N(T a, T b) { return (a < b || b != b) ? a : b; } \
  static inline T tsr_max_##N(T a, T b) { return (a > b || b != b) ? a : b; }
TSR_FLOAT_HELPERS(_Float16, float16)
TSR_FLOAT_HELPERS(float, float32)
TSR_FLOAT_HELPERS(double, float64)

"#;

impl Gen {
    fn name_of(&mut self, v: &Var) -> String {
        if let Some(n) = self.names.get(&v.id()) {
            return n.clone();
        }
        let mut base = sanitize(v.name());
        // The generator's own names start with `tsr_` and `v_`, the implementation's with
        // `_`: a variable named so gets a prefix (a suffix would keep the prefix).
        if base.starts_with("tsr_") || base.starts_with("v_") || base.starts_with('_') {
            base.insert(0, 'u');
        }
        let mut n = base.clone();
        let mut k = 1;
        while self.used.contains(&n) || RESERVED.contains(&n.as_str()) {
            n = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(n.clone());
        self.names.insert(v.id(), n.clone());
        n
    }

    /// Declares `v` in the current scope; returns its C name.
    fn declare(&mut self, v: &Var) -> String {
        self.in_scope.insert(v.id());
        self.name_of(v)
    }

    /// The C name of a use of `v`, which must be declared: an unbound variable or an
    /// unknown buffer is refused here rather than by the C compiler.
    fn use_var(&mut self, v: &Var) -> Result<String, BackendError> {
        if !self.in_scope.contains(&v.id()) {
            return Err(self.err(format!("variable `{}` is used but not bound", v.name())));
        }
        Ok(self.name_of(v))
    }

    fn use_buffer(&mut self, b: &Buffer) -> Result<String, BackendError> {
        if !self.in_scope.contains(&b.data().id()) {
            return Err(self.err(format!(
                "buffer `{}` is neither a parameter nor allocated here",
                b.name()
            )));
        }
        Ok(self.name_of(b.data()))
    }

    /// Emits `body` with `v` declared, then ends `v`'s scope.
    fn scoped(&mut self, v: &Var, body: &Stmt) -> Result<(), BackendError> {
        let fresh = self.in_scope.insert(v.id());
        let r = self.stmt(body);
        if fresh {
            self.in_scope.remove(&v.id());
        }
        r
    }

    fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("tsr_t{}", self.tmp)
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.body.push_str("  ");
        }
        self.body.push_str(s);
        self.body.push('\n');
    }

    fn vt(&mut self, t: DataType, lanes: u16) -> String {
        self.vec_types.insert((suffix(t), lanes, t.element_of()));
        vec_name(t.element_of(), lanes)
    }

    fn err(&self, reason: impl Into<String>) -> BackendError {
        unsupported(&self.func, reason.into())
    }

    // ----- expressions -----

    fn literal(&self, e: &Expr) -> Option<String> {
        match e.node() {
            ExprNode::IntImm { dtype, value } => Some(match (dtype.code, dtype.bits) {
                (TypeCode::Bool, _) => {
                    if *value != 0 {
                        "true".into()
                    } else {
                        "false".into()
                    }
                }
                (TypeCode::Int, 32) => {
                    if *value == i32::MIN as i64 {
                        "(-2147483647 - 1)".into()
                    } else {
                        format!("{value}")
                    }
                }
                (TypeCode::Int, 64) if *value == i64::MIN => "INT64_MIN".into(),
                (TypeCode::UInt, 64) => format!("UINT64_C({})", *value as u64),
                _ => format!("(({}){value}LL)", scalar_c(*dtype)),
            }),
            ExprNode::FloatImm { dtype, value } => Some(float_literal(*dtype, *value)),
            _ => None,
        }
    }

    fn expr(&mut self, e: &Expr) -> Result<(String, Ty), BackendError> {
        let t = e.dtype();
        if t.is_scalar() {
            return Ok((self.scalar(e)?, Ty::S(t)));
        }
        self.vector(e)
    }

    /// A scalar expression.
    fn scalar(&mut self, e: &Expr) -> Result<String, BackendError> {
        if let Some(l) = self.literal(e) {
            return Ok(l);
        }
        if operands(e).iter().any(|x| x.dtype().is_vector()) {
            return Err(self.err(format!("`{e}` has a scalar type and vector operands")));
        }
        let t = e.dtype();
        Ok(match e.node() {
            ExprNode::Var(v) => self.use_var(v)?,
            ExprNode::Binary { op, a, b } => {
                let (x, y) = (self.scalar(a)?, self.scalar(b)?);
                let n = suffix(t);
                let code = match (op, t.is_float()) {
                    // Types narrower than int are promoted: wrap through uint32_t, which
                    // cannot overflow (uint16 * uint16 would overflow int).
                    (BinOp::Add | BinOp::Sub | BinOp::Mul, false) if t.bits < 32 => {
                        let sym = match op {
                            BinOp::Add => "+",
                            BinOp::Sub => "-",
                            _ => "*",
                        };
                        format!("((uint32_t)({x}) {sym} (uint32_t)({y}))")
                    }
                    (BinOp::Add, _) => format!("({x} + {y})"),
                    (BinOp::Sub, _) => format!("({x} - {y})"),
                    (BinOp::Mul, _) => format!("({x} * {y})"),
                    (BinOp::Div, _) => format!("({x} / {y})"),
                    (BinOp::Mod, false) => format!("({x} % {y})"),
                    (BinOp::Mod, true) => format!("{}({x}, {y})", math_fn("fmod", t)),
                    (BinOp::FloorDiv, false) => format!("tsr_floordiv_{n}({x}, {y})"),
                    (BinOp::FloorDiv, true) => format!("{}(({x}) / ({y}))", math_fn("floor", t)),
                    (BinOp::FloorMod, false) => format!("tsr_floormod_{n}({x}, {y})"),
                    (BinOp::FloorMod, true) => {
                        let (tx, ty) = (self.fresh(), self.fresh());
                        let c = scalar_c(t);
                        format!("({{ {c} {tx} = {x}; {c} {ty} = {y}; {tx} - {}({tx} / {ty}) * {ty}; }})", math_fn("floor", t))
                    }
                    (BinOp::Min, _) => format!("tsr_min_{n}({x}, {y})"),
                    (BinOp::Max, _) => format!("tsr_max_{n}({x}, {y})"),
                };
                // C computes on types narrower than int (and on _Float16) in a wider type:
                // round the result to its type as the interpreter does after each operation.
                if t.bits < 32 {
                    format!("(({})({code}))", scalar_c(t))
                } else {
                    code
                }
            }
            ExprNode::Cmp { op, a, b } => {
                format!("({} {} {})", self.scalar(a)?, op.symbol(), self.scalar(b)?)
            }
            ExprNode::And(a, b) => format!("({} && {})", self.scalar(a)?, self.scalar(b)?),
            ExprNode::Or(a, b) => format!("({} || {})", self.scalar(a)?, self.scalar(b)?),
            ExprNode::Not(a) => format!("(!{})", self.scalar(a)?),
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => {
                format!(
                    "({} ? {} : {})",
                    self.scalar(cond)?,
                    self.scalar(then_value)?,
                    self.scalar(else_value)?
                )
            }
            ExprNode::Cast { dtype, value } => {
                format!("(({})({}))", scalar_c(*dtype), self.scalar(value)?)
            }
            ExprNode::Load { buffer, indices } => {
                let idx = self.flat_scalar(buffer, indices)?;
                format!("{}[{idx}]", self.use_buffer(buffer)?)
            }
            ExprNode::Call {
                op: Intrinsic::IfThenElse,
                args,
                ..
            } => {
                format!(
                    "({} ? {} : {})",
                    self.scalar(&args[0])?,
                    self.scalar(&args[1])?,
                    self.scalar(&args[2])?
                )
            }
            ExprNode::Call { op, args, .. } => {
                let a: Vec<String> = args
                    .iter()
                    .map(|x| self.scalar(x))
                    .collect::<Result<_, _>>()?;
                math_call(*op, t, &a)
            }
            ExprNode::Ramp { .. } | ExprNode::Broadcast { .. } => {
                return Err(self.err("a one-lane vector expression"))
            }
            ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => {
                unreachable!("literals are handled above")
            }
        })
    }

    /// The flat row-major offset of a scalar access.
    fn flat_expr(buffer: &Buffer, indices: &[Expr]) -> Result<Expr, String> {
        let shape = buffer.const_shape().ok_or_else(|| {
            format!(
                "buffer `{}` has a shape that is not constant",
                buffer.name()
            )
        })?;
        if shape.len() != indices.len() {
            return Err(format!(
                "buffer `{}` has {} dimensions, accessed with {} indices",
                buffer.name(),
                shape.len(),
                indices.len()
            ));
        }
        // Offsets are computed in int64 where the buffer has more elements than int32
        // holds, in int32 otherwise; narrower (or unsigned) indices are widened first, so
        // that neither the products nor the sum wrap.
        let offset_t = Self::offset_type(&shape);
        let mut flat: Option<Expr> = None;
        for (i, idx) in indices.iter().enumerate() {
            let stride: i64 = shape[i + 1..].iter().product();
            let t = if idx.dtype() == DataType::int64() {
                DataType::int64()
            } else {
                offset_t
            };
            let idx = if idx.dtype() != t {
                Expr::cast(t, idx.clone())
            } else {
                idx.clone()
            };
            let term = if stride == 1 { idx } else { &idx * stride };
            flat = Some(match flat {
                None => term,
                // Both operands in the wider type: never narrow the partial sum.
                Some(f) if f.dtype() == term.dtype() => f + term,
                Some(f) if f.dtype() == DataType::int64() => {
                    f + Expr::cast(DataType::int64(), term)
                }
                Some(f) => Expr::cast(term.dtype(), f) + term,
            });
        }
        Ok(simplify(&flat.unwrap_or_else(|| Expr::int(0))))
    }

    /// The type of the flat offsets into a buffer of `shape`: int64 when it has more
    /// elements than int32 holds.
    fn offset_type(shape: &[i64]) -> DataType {
        let n = shape
            .iter()
            .try_fold(1i64, |acc, d| acc.checked_mul((*d).max(0)));
        if n.is_none_or(|n| n > i32::MAX as i64) {
            DataType::int64()
        } else {
            DataType::int32()
        }
    }

    fn flat_scalar(&mut self, buffer: &Buffer, indices: &[Expr]) -> Result<String, BackendError> {
        let f = Self::flat_expr(buffer, indices).map_err(|r| self.err(r))?;
        self.scalar(&f)
    }

    /// For a vector access: `(base, stride)` of the flat offsets when every index is a
    /// scalar, a broadcast or a ramp with a constant stride.
    fn flat_ramp(buffer: &Buffer, indices: &[Expr]) -> Option<(Expr, i64)> {
        let shape = buffer.const_shape()?;
        let mut bases = Vec::new();
        let mut stride = 0i64;
        for (i, idx) in indices.iter().enumerate() {
            let s = match idx.node() {
                ExprNode::Ramp { base, stride, .. } => {
                    bases.push(base.clone());
                    simplify(stride).as_int()?
                }
                ExprNode::Broadcast { value, .. } => {
                    bases.push(value.clone());
                    0
                }
                _ if idx.dtype().is_scalar() => {
                    bases.push(idx.clone());
                    0
                }
                _ => return None,
            };
            let k = shape
                .get(i + 1..)?
                .iter()
                .try_fold(1i64, |acc, d| acc.checked_mul(*d))?;
            stride = stride.checked_add(s.checked_mul(k)?)?;
        }
        let base = Self::flat_expr(buffer, &bases).ok()?;
        Some((base, stride))
    }

    /// The C expression of the flat offsets of a vector access, as an int vector, and the
    /// type of its lanes (int64 for buffers with more elements than int32 holds).
    fn flat_vector(
        &mut self,
        buffer: &Buffer,
        indices: &[Expr],
        lanes: u16,
    ) -> Result<(String, DataType), BackendError> {
        let shape = buffer
            .const_shape()
            .ok_or_else(|| self.err("a buffer shape is not constant"))?;
        if shape.len() != indices.len() {
            return Err(self.err(format!(
                "buffer `{}` has {} dimensions, accessed with {} indices",
                buffer.name(),
                shape.len(),
                indices.len()
            )));
        }
        let offset_t = if indices
            .iter()
            .any(|i| i.dtype().element_of() == DataType::int64())
        {
            DataType::int64()
        } else {
            Self::offset_type(&shape)
        };
        let mut terms = Vec::new();
        for (i, idx) in indices.iter().enumerate() {
            let k: i64 = shape[i + 1..].iter().product();
            let widened = if idx.dtype().is_scalar() {
                Expr::broadcast(idx.clone(), lanes)
            } else {
                idx.clone()
            };
            let widened = if widened.dtype().element_of() != offset_t {
                Expr::cast(offset_t.with_lanes(lanes), widened)
            } else {
                widened
            };
            let (c, _) = self.vector(&widened)?;
            terms.push(if k == 1 { c } else { format!("({c} * {k})") });
        }
        Ok((format!("({})", terms.join(" + ")), offset_t))
    }

    fn broadcast_code(&mut self, value: String, t: DataType, lanes: u16) -> String {
        let vt = self.vt(t, lanes);
        let tmp = self.fresh();
        let elems = vec![tmp.clone(); lanes as usize].join(", ");
        format!(
            "({{ {} {tmp} = {value}; ({vt}){{{elems}}}; }})",
            scalar_c(t)
        )
    }

    /// Converts a mask to `bits`-wide lanes.
    fn mask_to(&mut self, code: String, from: Ty, bits: u8) -> String {
        match from {
            Ty::M(b, l) if b != bits => {
                let vt = self.vt(mask_elem(bits), l);
                format!("__builtin_convertvector({code}, {vt})")
            }
            _ => code,
        }
    }

    /// A bool vector (a mask, lanes of 0/1 or a scalar bool) as a mask of `bits`-wide
    /// lanes; other values count as true where they are not zero.
    fn as_mask(&mut self, code: String, from: Ty, bits: u8, lanes: u16) -> String {
        match from {
            Ty::M(..) => self.mask_to(code, from, bits),
            Ty::V(t, _) => {
                let m = format!("({code} != 0)");
                self.mask_to(m, Ty::M(t.bits.max(8), lanes), bits)
            }
            Ty::S(t) => {
                let v = self.broadcast_code(code, t, lanes);
                self.as_mask(v, Ty::V(t, lanes), bits, lanes)
            }
        }
    }

    /// A value (a vector, a mask or a scalar) as a vector of `lanes` lanes of `to`,
    /// converted as the interpreter converts: true is 1, a value is true where it is not
    /// zero, floats become integers by truncation.
    fn convert(&mut self, code: String, from: Ty, to: DataType, lanes: u16) -> String {
        let to = to.element_of();
        match from {
            Ty::S(t) => {
                let v = self.broadcast_code(code, t, lanes);
                self.convert(v, Ty::V(t, lanes), to, lanes)
            }
            Ty::V(t, _) if t == to => code,
            // A mask's lanes are -1 or 0.
            Ty::M(_, _) if to.is_bool() => {
                let m = self.mask_to(code, from, 8);
                format!("({m} & 1)")
            }
            Ty::M(b, _) => {
                let ones = format!("({code} & 1)");
                self.convert(ones, Ty::V(mask_elem(b), lanes), to, lanes)
            }
            Ty::V(t, _) if to.is_bool() => {
                let m = format!("({code} != 0)");
                self.convert(m, Ty::M(t.bits.max(8), lanes), to, lanes)
            }
            Ty::V(_, _) => {
                let vt = self.vt(to, lanes);
                format!("__builtin_convertvector({code}, {vt})")
            }
        }
    }

    /// The vector code of `e` as lanes of `to` (see [`Gen::convert`]).
    fn vector_as(&mut self, e: &Expr, to: DataType, lanes: u16) -> Result<String, BackendError> {
        let (c, t) = self.vector(e)?;
        Ok(self.convert(c, t, to, lanes))
    }

    /// Lane-wise `m ? a : b` for vectors of type `t`.
    fn blend(
        &mut self,
        m: String,
        mty: Ty,
        a: String,
        b: String,
        t: DataType,
        lanes: u16,
    ) -> String {
        let bits = t.bits.max(8);
        let m = self.mask_to(m, mty, bits);
        let vt = self.vt(t, lanes);
        let it = self.vt(mask_elem(bits), lanes);
        let (tm, ta, tb) = (self.fresh(), self.fresh(), self.fresh());
        format!("({{ {it} {tm} = {m}; {vt} {ta} = {a}; {vt} {tb} = {b}; ({vt})((({it}){ta} & {tm}) | (({it}){tb} & ~{tm})); }})")
    }

    /// GCC's vector types have a power-of-two number of lanes.
    fn check_lanes(&self, lanes: u16) -> Result<(), BackendError> {
        if lanes.is_power_of_two() {
            Ok(())
        } else {
            Err(self.err(format!(
                "a vector of {lanes} lanes (C vector types need a power of two)"
            )))
        }
    }

    /// Applies a scalar C function lane by lane.
    fn per_lane(
        &mut self,
        args: Vec<String>,
        t: DataType,
        lanes: u16,
        f: impl Fn(&[String]) -> String,
    ) -> String {
        let vt = self.vt(t, lanes);
        let tmps: Vec<String> = args.iter().map(|_| self.fresh()).collect();
        let decls: String = tmps
            .iter()
            .zip(&args)
            .map(|(n, a)| format!("{vt} {n} = {a}; "))
            .collect();
        let lanes_code: Vec<String> = (0..lanes)
            .map(|i| f(&tmps.iter().map(|n| format!("{n}[{i}]")).collect::<Vec<_>>()))
            .collect();
        format!("({{ {decls}({vt}){{{}}}; }})", lanes_code.join(", "))
    }

    fn vector(&mut self, e: &Expr) -> Result<(String, Ty), BackendError> {
        let t = e.dtype();
        let (el, lanes) = (t.element_of(), t.lanes);
        if t.is_scalar() {
            return Ok((self.scalar(e)?, Ty::S(t)));
        }
        self.check_lanes(lanes)?;
        let scalar_only = matches!(e.node(), ExprNode::Ramp { .. } | ExprNode::Broadcast { .. });
        if operands(e).iter().any(|x| {
            let l = x.dtype().lanes;
            l != 1 && (l != lanes || scalar_only)
        }) {
            return Err(self.err(format!("`{e}` mixes vectors of different lanes")));
        }
        Ok(match e.node() {
            ExprNode::Ramp {
                base,
                stride,
                lanes,
            } => {
                let (b, s) = (self.scalar(base)?, self.scalar(stride)?);
                let vt = self.vt(el, *lanes);
                let (tb, ts) = (self.fresh(), self.fresh());
                let c = scalar_c(el);
                let elems: Vec<String> =
                    (0..*lanes).map(|i| format!("{tb} + {i} * {ts}")).collect();
                (
                    format!(
                        "({{ {c} {tb} = {b}; {c} {ts} = {s}; ({vt}){{{}}}; }})",
                        elems.join(", ")
                    ),
                    Ty::V(el, *lanes),
                )
            }
            ExprNode::Broadcast { value, lanes } => {
                let v = self.scalar(value)?;
                (self.broadcast_code(v, el, *lanes), Ty::V(el, *lanes))
            }
            ExprNode::Binary { op, a, b } => {
                if el.is_bool() {
                    return Err(self.err(format!("{op:?} of bool vectors")));
                }
                let x = self.vector_as(a, el, lanes)?;
                let y = self.vector_as(b, el, lanes)?;
                let code = match (op, el.is_float()) {
                    // Signed lanes wrap like the interpreter's integers: through the
                    // unsigned type (GCC would otherwise assume they never overflow).
                    (BinOp::Add | BinOp::Sub | BinOp::Mul, false) if el.is_int() => {
                        let sym = match op {
                            BinOp::Add => "+",
                            BinOp::Sub => "-",
                            _ => "*",
                        };
                        let vt = self.vt(el, lanes);
                        let ut = self.vt(DataType::uint(el.bits), lanes);
                        format!("(({vt})((({ut}){x}) {sym} (({ut}){y})))")
                    }
                    (BinOp::Add, _) => format!("({x} + {y})"),
                    (BinOp::Sub, _) => format!("({x} - {y})"),
                    (BinOp::Mul, _) => format!("({x} * {y})"),
                    (BinOp::Div, _) => format!("({x} / {y})"),
                    (BinOp::Mod, false) => format!("({x} % {y})"),
                    (BinOp::Min | BinOp::Max, _) => {
                        let (ta, tb) = (self.fresh(), self.fresh());
                        let vt = self.vt(el, lanes);
                        let cmp = if *op == BinOp::Min { "<" } else { ">" };
                        // Like the interpreter (IEEE minNum/maxNum): a NaN operand loses.
                        let m = if el.is_float() {
                            format!("(({ta} {cmp} {tb}) | ({tb} != {tb}))")
                        } else {
                            format!("({ta} {cmp} {tb})")
                        };
                        let inner = self.blend(
                            m,
                            Ty::M(el.bits.max(8), lanes),
                            ta.clone(),
                            tb.clone(),
                            el,
                            lanes,
                        );
                        format!("({{ {vt} {ta} = {x}; {vt} {tb} = {y}; {inner}; }})")
                    }
                    _ => {
                        // floordiv / floormod / float mod: lane by lane with the scalar helpers.
                        let s = e.dtype().element_of();
                        let name = suffix(s);
                        let op = *op;
                        self.per_lane(vec![x, y], el, lanes, |a| match (op, s.is_float()) {
                            (BinOp::FloorDiv, false) => {
                                format!("tsr_floordiv_{name}({}, {})", a[0], a[1])
                            }
                            (BinOp::FloorMod, false) => {
                                format!("tsr_floormod_{name}({}, {})", a[0], a[1])
                            }
                            (BinOp::FloorDiv, true) => {
                                format!("{}({} / {})", math_fn("floor", s), a[0], a[1])
                            }
                            (BinOp::FloorMod, true) => format!(
                                "({0} - {2}({0} / {1}) * {1})",
                                a[0],
                                a[1],
                                math_fn("floor", s)
                            ),
                            _ => format!("{}({}, {})", math_fn("fmod", s), a[0], a[1]),
                        })
                    }
                };
                (code, Ty::V(el, lanes))
            }
            ExprNode::Cmp { op, a, b } => {
                // Bools compare as 0/1 (a mask's true, -1, would order below false).
                let at = a.dtype().element_of();
                let x = self.vector_as(a, at, lanes)?;
                let y = self.vector_as(b, at, lanes)?;
                let bits = at.bits.max(8);
                let sym = match op {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                self.vt(mask_elem(bits), lanes);
                (format!("({x} {sym} {y})"), Ty::M(bits, lanes))
            }
            ExprNode::And(a, b) | ExprNode::Or(a, b) => {
                let (x, tx) = self.vector(a)?;
                let (y, ty) = self.vector(b)?;
                let bits = match (tx, ty) {
                    (Ty::M(b, _), _) | (_, Ty::M(b, _)) => b,
                    _ => 8,
                };
                let x = self.as_mask(x, tx, bits, lanes);
                let y = self.as_mask(y, ty, bits, lanes);
                let sym = if matches!(e.node(), ExprNode::And(..)) {
                    "&"
                } else {
                    "|"
                };
                self.vt(mask_elem(bits), lanes);
                (format!("({x} {sym} {y})"), Ty::M(bits, lanes))
            }
            ExprNode::Not(a) => {
                let (x, tx) = self.vector(a)?;
                let bits = match tx {
                    Ty::M(b, _) => b,
                    _ => 8,
                };
                let m = self.as_mask(x, tx, bits, lanes);
                self.vt(mask_elem(bits), lanes);
                (format!("(~{m})"), Ty::M(bits, lanes))
            }
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => {
                let (c, tc) = self.expr(cond)?;
                let a = self.vector_as(then_value, el, lanes)?;
                let b = self.vector_as(else_value, el, lanes)?;
                match tc {
                    Ty::S(_) => (format!("({c} ? {a} : {b})"), Ty::V(el, lanes)),
                    _ => {
                        let bits = el.bits.max(8);
                        let m = self.as_mask(c, tc, bits, lanes);
                        (
                            self.blend(m, Ty::M(bits, lanes), a, b, el, lanes),
                            Ty::V(el, lanes),
                        )
                    }
                }
            }
            ExprNode::Call {
                op: Intrinsic::IfThenElse,
                args,
                ..
            } => {
                if !args[0].dtype().is_scalar() {
                    return Err(self.err("if_then_else with a vector condition"));
                }
                let c = self.scalar(&args[0])?;
                let a = self.vector_as(&args[1], el, lanes)?;
                let b = self.vector_as(&args[2], el, lanes)?;
                (format!("({c} ? {a} : {b})"), Ty::V(el, lanes))
            }
            ExprNode::Call { op, args, .. } => {
                let a: Vec<String> = args
                    .iter()
                    .map(|x| self.vector_as(x, el, lanes))
                    .collect::<Result<_, _>>()?;
                let op = *op;
                (
                    self.per_lane(a, el, lanes, |xs| math_call(op, el, xs)),
                    Ty::V(el, lanes),
                )
            }
            ExprNode::Cast { dtype, value } => {
                let v = self.vector_as(value, dtype.element_of(), lanes)?;
                (v, Ty::V(dtype.element_of(), lanes))
            }
            ExprNode::Load { buffer, indices } => {
                let name = self.use_buffer(buffer)?;
                let vt = self.vt(el, lanes);
                match Self::flat_ramp(buffer, indices) {
                    Some((base, 1)) => {
                        let b = self.scalar(&base)?;
                        (format!("(*({vt}_u*)(&{name}[{b}]))"), Ty::V(el, lanes))
                    }
                    Some((base, 0)) => {
                        let b = self.scalar(&base)?;
                        (
                            self.broadcast_code(format!("{name}[{b}]"), el, lanes),
                            Ty::V(el, lanes),
                        )
                    }
                    _ => {
                        let (idx, idx_t) = self.flat_vector(buffer, indices, lanes)?;
                        let it = self.vt(idx_t, lanes);
                        let ti = self.fresh();
                        let elems: Vec<String> =
                            (0..lanes).map(|i| format!("{name}[{ti}[{i}]]")).collect();
                        (
                            format!("({{ {it} {ti} = {idx}; ({vt}){{{}}}; }})", elems.join(", ")),
                            Ty::V(el, lanes),
                        )
                    }
                }
            }
            ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => {
                return Err(self.err("a scalar leaf typed as a vector"))
            }
        })
    }

    // ----- statements -----

    fn stmt(&mut self, s: &Stmt) -> Result<(), BackendError> {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                let v = self.name_of(var);
                let c = scalar_c(var.dtype());
                let (lo, ext) = (self.scalar(min)?, self.scalar(extent)?);
                let end = if min.is_const_int(0) {
                    ext
                } else {
                    format!("{lo} + {ext}")
                };
                let mut entered_parallel = false;
                match kind {
                    ForKind::Parallel if !self.in_parallel => {
                        let n = self.num_threads;
                        self.line(&format!(
                            "#pragma omp parallel for num_threads({n}) schedule(static)"
                        ));
                        self.in_parallel = true;
                        entered_parallel = true;
                    }
                    ForKind::Parallel => self.line("// nested parallel loop runs serially"),
                    ForKind::Unrolled => {
                        let f = extent.as_int().filter(|n| *n <= 512).unwrap_or(16);
                        self.line(&format!("#pragma GCC unroll {f}"));
                    }
                    ForKind::ThreadBinding(t) => {
                        return Err(self.err(format!(
                            "loop `{}` is bound to {t}, which needs a GPU target",
                            var.name()
                        )))
                    }
                    ForKind::Serial | ForKind::Vectorized => {}
                }
                self.line(&format!("for ({c} {v} = {lo}; {v} < {end}; ++{v}) {{"));
                self.indent += 1;
                let r = self.scoped(var, body);
                self.indent -= 1;
                if entered_parallel {
                    self.in_parallel = false;
                }
                r?;
                self.line("}");
            }
            StmtNode::Store {
                buffer,
                indices,
                value,
            } => {
                let name = self.use_buffer(buffer)?;
                let t = value.dtype();
                if t.is_scalar() && indices.iter().all(|i| i.dtype().is_scalar()) {
                    let idx = self.flat_scalar(buffer, indices)?;
                    let v = self.scalar(value)?;
                    self.line(&format!("{name}[{idx}] = {v};"));
                } else {
                    let lanes = indices
                        .iter()
                        .map(|i| i.dtype().lanes)
                        .max()
                        .unwrap_or(1)
                        .max(t.lanes);
                    self.check_lanes(lanes)?;
                    if indices
                        .iter()
                        .map(|i| i.dtype().lanes)
                        .chain([t.lanes])
                        .any(|l| l != 1 && l != lanes)
                    {
                        return Err(self.err(format!(
                            "the store to `{}` mixes vectors of different lanes",
                            buffer.name()
                        )));
                    }
                    let el = buffer.dtype();
                    let (v, vty) = if t.is_scalar() {
                        (self.scalar(value)?, Ty::S(t))
                    } else {
                        self.vector(value)?
                    };
                    // The interpreter converts stored values to the buffer's type.
                    let v = self.convert(v, vty, el, lanes);
                    let vt = self.vt(el, lanes);
                    match Self::flat_ramp(buffer, indices) {
                        Some((base, 1)) => {
                            let b = self.scalar(&base)?;
                            self.line(&format!("*({vt}_u*)(&{name}[{b}]) = {v};"));
                        }
                        _ => {
                            let (idx, idx_t) = self.flat_vector(buffer, indices, lanes)?;
                            let it = self.vt(idx_t, lanes);
                            let (ti, tv) = (self.fresh(), self.fresh());
                            let mut line = format!("{{ {it} {ti} = {idx}; {vt} {tv} = {v};");
                            for i in 0..lanes {
                                write!(line, " {name}[{ti}[{i}]] = {tv}[{i}];").unwrap();
                            }
                            line.push_str(" }");
                            self.line(&line);
                        }
                    }
                }
            }
            StmtNode::Allocate { buffer, body } => {
                let name = self.name_of(buffer.data());
                let shape = buffer.const_shape().ok_or_else(|| {
                    self.err(format!(
                        "allocation `{}` has a shape that is not constant",
                        buffer.name()
                    ))
                })?;
                let n: i64 = shape.iter().product::<i64>().max(1);
                let c = scalar_c(buffer.dtype());
                let bytes = n as usize * buffer.dtype().bytes();
                if bytes <= STACK_LIMIT {
                    self.line("{");
                    self.indent += 1;
                    self.line(&format!("{c} {name}[{n}] __attribute__((aligned(64)));"));
                    self.scoped(buffer.data(), body)?;
                    self.indent -= 1;
                    self.line("}");
                } else {
                    let rounded = bytes.div_ceil(64) * 64;
                    self.line("{");
                    self.indent += 1;
                    self.line(&format!(
                        "{c}* {name} = ({c}*)aligned_alloc(64, {rounded});"
                    ));
                    self.line(&format!("if ({name} == NULL) {{"));
                    self.line("  #pragma omp atomic write");
                    self.line("  tsr_status = -1;");
                    self.line("} else {");
                    self.indent += 1;
                    self.scoped(buffer.data(), body)?;
                    self.line(&format!("free({name});"));
                    self.indent -= 1;
                    self.line("}");
                    self.indent -= 1;
                    self.line("}");
                }
            }
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
                let c = self.scalar(cond)?;
                self.line(&format!("if ({c}) {{"));
                self.indent += 1;
                self.stmt(then_case)?;
                self.indent -= 1;
                if let Some(e) = else_case {
                    self.line("} else {");
                    self.indent += 1;
                    self.stmt(e)?;
                    self.indent -= 1;
                }
                self.line("}");
            }
            StmtNode::Seq(v) => {
                for x in v {
                    self.stmt(x)?;
                }
            }
            StmtNode::Attr { key, value, body } => {
                let text = comment(&format!("{key} = {value}"));
                self.line(&format!("// {text}"));
                self.stmt(body)?;
            }
            StmtNode::Let { var, value, body } => {
                let v = self.name_of(var);
                let val = self.scalar(value)?;
                self.line("{");
                self.indent += 1;
                self.line(&format!("{} {v} = {val};", scalar_c(var.dtype())));
                self.scoped(var, body)?;
                self.indent -= 1;
                self.line("}");
            }
            StmtNode::Evaluate(e) => {
                let (c, _) = self.expr(e)?;
                self.line(&format!("(void)({c});"));
            }
            StmtNode::StorageSync(scope) => {
                return Err(self.err(format!("a {scope} storage sync needs a GPU target")))
            }
        }
        Ok(())
    }
}

/// The operands of an expression (a load's indices, a ramp's base and stride).
fn operands(e: &Expr) -> Vec<&Expr> {
    match e.node() {
        ExprNode::Binary { a, b, .. } | ExprNode::Cmp { a, b, .. } => vec![a, b],
        ExprNode::And(a, b) | ExprNode::Or(a, b) => vec![a, b],
        ExprNode::Not(a) | ExprNode::Cast { value: a, .. } => vec![a],
        ExprNode::Select {
            cond,
            then_value,
            else_value,
        } => vec![cond, then_value, else_value],
        ExprNode::Call { args, .. } => args.iter().collect(),
        ExprNode::Load { indices, .. } => indices.iter().collect(),
        ExprNode::Ramp { base, stride, .. } => vec![base, stride],
        ExprNode::Broadcast { value, .. } => vec![value],
        ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => Vec::new(),
    }
}

fn math_fn(base: &str, t: DataType) -> String {
    match t.bits {
        64 => base.to_string(),
        _ => format!("{base}f"),
    }
}

fn math_call(op: Intrinsic, t: DataType, a: &[String]) -> String {
    let c = scalar_c(t.element_of());
    let f = |n: &str| math_fn(n, t);
    let one = if t.bits == 64 { "1.0" } else { "1.0f" };
    let call = match op {
        Intrinsic::Exp => format!("{}({})", f("exp"), a[0]),
        Intrinsic::Log => format!("{}({})", f("log"), a[0]),
        Intrinsic::Sqrt => format!("{}({})", f("sqrt"), a[0]),
        Intrinsic::Rsqrt => format!("({one} / {}({}))", f("sqrt"), a[0]),
        Intrinsic::Tanh => format!("{}({})", f("tanh"), a[0]),
        Intrinsic::Sigmoid => format!("({one} / ({one} + {}(-({}))))", f("exp"), a[0]),
        Intrinsic::Pow => format!("{}({}, {})", f("pow"), a[0], a[1]),
        Intrinsic::Fabs => format!("{}({})", f("fabs"), a[0]),
        Intrinsic::Erf => format!("{}({})", f("erf"), a[0]),
        Intrinsic::Floor => format!("{}({})", f("floor"), a[0]),
        Intrinsic::Ceil => format!("{}({})", f("ceil"), a[0]),
        Intrinsic::Round => format!("{}({})", f("round"), a[0]),
        Intrinsic::IfThenElse => format!("({} ? {} : {})", a[0], a[1], a[2]),
    };
    if t.is_float() && t.bits != 16 {
        call
    } else {
        format!("(({c})({call}))")
    }
}

fn float_literal(t: DataType, v: f64) -> String {
    // Narrower literals are written as floats: one beyond float's range is infinite
    // (Rust would print `inf`, which C does not read).
    let v = if t.bits == 64 { v } else { v as f32 as f64 };
    let (inf, nan) = match t.bits {
        64 => ("((double)INFINITY)", "((double)NAN)"),
        _ => ("INFINITY", "NAN"),
    };
    let text = if v.is_nan() {
        nan.to_string()
    } else if v.is_infinite() {
        if v > 0.0 {
            inf.to_string()
        } else {
            format!("(-{inf})")
        }
    } else {
        match t.bits {
            64 => format!("{v:?}"),
            _ => format!("{:?}f", v as f32),
        }
    };
    let text = if text.starts_with('-') {
        format!("({text})")
    } else {
        text
    };
    if t.bits == 16 {
        format!("((_Float16){text})")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::StorageScope;

    fn ivar(name: &str) -> Var {
        Var::int(name)
    }

    fn serial(v: &Var, extent: i64, body: Stmt) -> Stmt {
        Stmt::for_loop(
            v.clone(),
            Expr::int(0),
            Expr::int(extent),
            ForKind::Serial,
            body,
        )
    }

    fn vectorized(v: &Var, extent: i64, body: Stmt) -> Stmt {
        Stmt::for_loop(
            v.clone(),
            Expr::int(0),
            Expr::int(extent),
            ForKind::Vectorized,
            body,
        )
    }

    /// The flat offsets of a buffer with more than 2^31 elements are int64 all the way:
    /// no term, and no partial sum, is narrowed back to int32.
    #[test]
    fn offsets_into_huge_buffers_are_int64() {
        let a = Buffer::global("A", DataType::float32(), &[4, 1 << 30]);
        let (i, j) = (ivar("i"), ivar("j"));
        let scalar = serial(
            &i,
            4,
            serial(
                &j,
                1 << 30,
                Stmt::store(&a, vec![i.to_expr(), j.to_expr()], Expr::float(1.0)),
            ),
        );
        // Along the outer dimension: a gather and a scatter.
        let (r, c) = (ivar("r"), ivar("c"));
        let vector = serial(
            &c,
            1 << 30,
            vectorized(
                &r,
                4,
                Stmt::store(
                    &a,
                    vec![r.to_expr(), c.to_expr()],
                    Expr::load(&a, vec![Expr::int(3) - r.to_expr(), c.to_expr()]),
                ),
            ),
        );
        let f = PrimFunc::new("huge", vec![a], Stmt::seq(vec![scalar, vector]));
        let src = generate_c(&f, 1).unwrap();
        assert!(!src.contains("(int32_t)("), "an offset is narrowed:\n{src}");
        assert!(
            src.contains("A[((((int64_t)(i)) * ((int64_t)1073741824LL)) + ((int64_t)(j)))]"),
            "{src}"
        );
        assert!(
            src.contains("{ v_int64x4 tsr_t"),
            "int64 scatter indices:\n{src}"
        );
        assert!(
            src.contains("({ v_int64x4 tsr_t"),
            "int64 gather indices:\n{src}"
        );

        // A buffer that int32 offsets cover keeps them.
        let b = Buffer::global("B", DataType::float32(), &[4, 1 << 20]);
        let small = serial(
            &i,
            4,
            serial(
                &j,
                1 << 20,
                Stmt::store(&b, vec![i.to_expr(), j.to_expr()], Expr::float(1.0)),
            ),
        );
        let src = generate_c(&PrimFunc::new("small", vec![b], small), 1).unwrap();
        assert!(src.contains("B[((i * 1048576) + j)] = 1.0f;"), "{src}");
    }

    fn refused(f: &PrimFunc, needle: &str) {
        match generate_c(f, 1) {
            Err(BackendError::Unsupported { reason, .. }) => {
                assert!(reason.contains(needle), "`{needle}` not in: {reason}")
            }
            Err(e) => panic!("expected Unsupported ({needle}), got {e}"),
            Ok(src) => panic!("expected Unsupported ({needle}), got C:\n{src}"),
        }
    }

    /// What the backend cannot express is refused with a typed error, never left to the C
    /// compiler (or worse, compiled into something else).
    #[test]
    fn unsupported_constructs_are_typed_errors() {
        let f32t = DataType::float32();
        let a = Buffer::global("A", f32t, &[8]);
        let m = Buffer::global("M", DataType::bool(), &[8]);
        let ramp = |lanes: u16| Expr::ramp(Expr::int(0), Expr::int(1), lanes);
        let func = |body: Stmt| PrimFunc::new("f", vec![a.clone(), m.clone()], body);
        let store8 = |v: Expr| Stmt::store(&a, vec![ramp(8)], v);

        refused(
            &func(Stmt::storage_sync(StorageScope::Shared)),
            "storage sync",
        );
        // An if_then_else whose condition varies across lanes (the vectorizer never makes
        // one; a hand-written one must not compile to `vector ? a : b`).
        let lanes_cond = Expr::load(&a, vec![ramp(8)]).gt(Expr::broadcast(Expr::float(0.0), 8));
        refused(
            &func(store8(Expr::if_then_else(
                lanes_cond,
                Expr::load(&a, vec![ramp(8)]),
                Expr::broadcast(Expr::float(0.0), 8),
            ))),
            "vector condition",
        );
        // Arithmetic on bool vectors.
        let mb = Expr::load(&m, vec![ramp(8)]);
        let reversed = Expr::load(&m, vec![Expr::ramp(Expr::int(7), Expr::int(-1), 8)]);
        refused(
            &func(Stmt::store(&m, vec![ramp(8)], Expr::max(mb, reversed))),
            "bool vectors",
        );
        // Vectors GCC cannot type.
        refused(
            &func(Stmt::store(
                &a,
                vec![ramp(3)],
                Expr::broadcast(Expr::float(1.0), 3),
            )),
            "power of two",
        );
        // Mixed lane counts, and a scalar operation on a vector.
        refused(
            &func(store8(
                Expr::load(&a, vec![ramp(8)]) + Expr::load(&a, vec![ramp(4)]),
            )),
            "different lanes",
        );
        refused(
            &func(Stmt::store(
                &a,
                vec![ramp(4)],
                Expr::broadcast(Expr::float(1.0), 8),
            )),
            "different lanes",
        );
        refused(
            &func(Stmt::store(
                &a,
                vec![Expr::int(0)],
                Expr::float(1.0) + Expr::load(&a, vec![ramp(8)]),
            )),
            "vector operands",
        );
        // Unbound variables and buffers that are neither parameters nor allocated.
        let free = ivar("free_var");
        refused(
            &func(Stmt::store(&a, vec![free.to_expr()], Expr::float(1.0))),
            "not bound",
        );
        let stranger = Buffer::global("stranger", f32t, &[8]);
        refused(
            &func(Stmt::store(&stranger, vec![Expr::int(0)], Expr::float(1.0))),
            "neither a parameter nor allocated",
        );
        let i = ivar("i");
        let scoped = Stmt::seq(vec![
            serial(&i, 8, Stmt::store(&a, vec![i.to_expr()], Expr::float(1.0))),
            Stmt::store(&a, vec![i.to_expr()], Expr::float(2.0)),
        ]);
        refused(&func(scoped), "not bound");
        // Wrong number of indices, scalar and vector.
        refused(
            &func(Stmt::store(
                &a,
                vec![Expr::int(0), Expr::int(0)],
                Expr::float(1.0),
            )),
            "accessed with 2 indices",
        );
        refused(
            &func(Stmt::store(
                &a,
                vec![ramp(8), Expr::broadcast(Expr::int(0), 8)],
                Expr::broadcast(Expr::float(1.0), 8),
            )),
            "accessed with 2 indices",
        );
        // Shapes that are not constant.
        let n = ivar("n");
        let sym = Buffer::new("S", f32t, vec![n.to_expr()], StorageScope::Global);
        refused(
            &PrimFunc::new("f", vec![sym.clone()], Stmt::no_op()),
            "not constant",
        );
        refused(
            &func(Stmt::let_stmt(
                n.clone(),
                Expr::int(4),
                Stmt::allocate(sym, Stmt::no_op()),
            )),
            "not constant",
        );
    }

    /// Variables named like the generator's own names, C keywords or header macros get
    /// other names (and a name that keeps its prefix after a suffix does not loop).
    #[test]
    fn names_are_renamed_away_from_c_and_generated_names() {
        let names = [
            "tsr_t1",
            "v_float32x4",
            "_x",
            "linux",
            "INFINITY",
            "for",
            "a.b",
            "a_b",
        ];
        let bufs: Vec<Buffer> = names
            .iter()
            .map(|n| Buffer::global(*n, DataType::float32(), &[4]))
            .collect();
        let f = PrimFunc::new("f", bufs, Stmt::no_op());
        // On another thread: a renaming that never ends must fail the test, not hang it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(generate_c(&f, 1));
        });
        let src = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("generate_c returns")
            .unwrap();
        let sig = src
            .lines()
            .find(|l| l.starts_with("static int32_t f_impl("))
            .unwrap();
        for want in [
            "utsr_t1",
            "uv_float32x4",
            "u_x",
            "linux_1",
            "INFINITY_1",
            "for_1",
            "a_b,",
            "a_b_1)",
        ] {
            assert!(sig.contains(want), "{want} not in {sig}");
        }
    }

    #[test]
    fn comments_stay_comments() {
        let a = Buffer::global("A", DataType::float32(), &[1]);
        let body = Stmt::attr(
            "key\nA[0] = 2.0f; \\",
            Expr::int(1),
            Stmt::store(&a, vec![Expr::int(0)], Expr::float(1.0)),
        );
        let src = generate_c(&PrimFunc::new("f", vec![a], body), 1).unwrap();
        assert!(src.contains("  // key A[0] = 2.0f;   = 1\n"), "{src}");
    }
}
