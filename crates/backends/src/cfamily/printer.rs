//! The C-family printer: one function body (or device kernel) from the IR, in the
//! language a [`Dialect`] describes.
//!
//! Buffers are flattened row-major ([`super::flatten`]). Vectorized loops arrive as
//! vector expressions (`tessera_ir::transform::vectorize_loops`) and are printed with
//! vector types ([`super::vector`]): contiguous accesses become the dialect's vector
//! loads and stores, other accesses gathers and scatters, arithmetic the vector
//! operators. Parallel loops take the dialect's pragma (OpenMP in C, outermost only),
//! unrolled loops its unroll pragma, a serial loop around an unrolled register tile its
//! serial pragma (in C: stay a loop); loops bound to GPU threads become the thread's index
//! (guarded when the axis is launched wider), virtual threads serial loops; allocations
//! are declared as the dialect says (the stack or the heap on the CPU, hoisted `__local`
//! arrays in OpenCL).
//!
//! The code computes what the interpreter computes: offsets are int64 for buffers beyond
//! int32's range; narrow integers and float16 are rounded after each scalar operation and
//! signed vector lanes wrap; comparisons (masks of -1/0) and bool vectors (bytes of 0/1)
//! are converted wherever a value of another type is needed; min/max ignore a NaN
//! operand. Scalar int32/int64 arithmetic is assumed not to overflow (as the simplifier
//! assumes). What the language cannot express is refused with
//! [`BackendError::Unsupported`].

use super::dialect::{AllocDecl, Dialect};
use super::flatten::{flat_expr, flat_ramp, offset_type};
use super::names::{comment, sanitize, scalar_c, suffix, vec_name, RESERVED};
use crate::backend::BackendError;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write;
use tessera_ir::transform::{AllreduceInfo, ThreadExtents};
use tessera_ir::{
    BinOp, Buffer, DataType, Expr, ExprNode, ForKind, Intrinsic, Stmt, StmtNode, ThreadAxis,
    TypeCode, Var,
};

/// The C type of a generated expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    /// A scalar.
    S(DataType),
    /// A vector of `lanes` elements of a scalar type.
    V(DataType, u16),
    /// A comparison mask: lanes of signed integers of `bits` bits, all ones or zero.
    M(u8, u16),
}

/// The vector types a printed function uses (sorted, so their typedefs print in a fixed
/// order).
pub type VectorTypes = BTreeSet<(String, u16, DataType)>;

/// A printed function: its parameter declarations, its body (indented one level), the
/// declarations hoisted to its top and the vector types it uses.
#[derive(Clone, Debug, Default)]
pub struct PrintedFunction {
    pub params: Vec<String>,
    pub hoisted: Vec<String>,
    pub body: String,
    pub vector_types: VectorTypes,
}

/// Prints the body of a function of `params` in `dialect`. `launch`: the kernel's launch
/// extents when it is a device kernel (thread-bound loops are refused without);
/// `num_threads`: the threads of a parallel loop.
pub fn print_function(
    dialect: &dyn Dialect,
    name: &str,
    params: &[Buffer],
    body: &Stmt,
    launch: Option<&ThreadExtents>,
    num_threads: usize,
) -> Result<PrintedFunction, BackendError> {
    let mut g = Gen {
        dialect,
        launch,
        body: String::new(),
        indent: 1,
        names: HashMap::new(),
        used: HashSet::new(),
        in_scope: HashSet::new(),
        vec_types: BTreeSet::new(),
        hoisted: Vec::new(),
        in_parallel: false,
        num_threads: num_threads.max(1),
        tmp: 0,
        func: name.to_string(),
    };
    let mut decls = Vec::new();
    for p in params {
        if p.const_shape().is_none() {
            return Err(g.err(format!(
                "parameter `{}` has a shape that is not constant",
                p.name()
            )));
        }
        dialect
            .check_type(p.dtype())
            .map_err(|r| g.err(r.to_string()))?;
        let n = g.declare(p.data());
        decls.push(dialect.param(scalar_c(p.dtype()), &n));
    }
    g.stmt(body)?;
    Ok(PrintedFunction {
        params: decls,
        hoisted: g.hoisted,
        body: g.body,
        vector_types: g.vec_types,
    })
}

/// The name under which [`VectorTypes`] records that the vector math of a type is used
/// ([`Dialect::vector_math`]): its helpers print after the typedefs.
pub(super) const VECTOR_MATH: &str = "~vector math";

/// The typedefs of `types` in `dialect`, one block, then the vector math helpers used.
pub fn vector_typedefs(dialect: &dyn Dialect, types: &VectorTypes) -> String {
    let mut out = String::new();
    for (_, l, t) in types.iter().filter(|(n, ..)| n != VECTOR_MATH) {
        // GCC has no vectors of `bool`: bool lanes are bytes holding 0 or 1.
        let c = if t.is_bool() { "int8_t" } else { scalar_c(*t) };
        out.push_str(&dialect.vector_typedef(c, *t, *l));
    }
    for (_, l, t) in types.iter().filter(|(n, ..)| n == VECTOR_MATH) {
        out.push_str(&dialect.vector_math_helpers(*t, *l));
    }
    if !types.is_empty() {
        out.push('\n');
    }
    out
}

pub(super) fn unsupported(backend: &str, func: &str, reason: String) -> BackendError {
    BackendError::Unsupported {
        backend: backend.into(),
        func: func.to_string(),
        reason,
    }
}

/// The printer's state while it prints one function.
pub(super) struct Gen<'a> {
    pub(super) dialect: &'a dyn Dialect,
    launch: Option<&'a ThreadExtents>,
    body: String,
    indent: usize,
    names: HashMap<u64, String>,
    used: HashSet<String>,
    /// The variables (and buffer handles) declared where the code is being emitted.
    in_scope: HashSet<u64>,
    vec_types: VectorTypes,
    hoisted: Vec<String>,
    in_parallel: bool,
    num_threads: usize,
    tmp: usize,
    func: String,
}

impl Gen<'_> {
    pub(super) fn name_of(&mut self, v: &Var) -> String {
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
        while self.used.contains(&n)
            || RESERVED.contains(&n.as_str())
            || self.dialect.reserved().contains(&n.as_str())
        {
            n = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(n.clone());
        self.names.insert(v.id(), n.clone());
        n
    }

    /// Declares `v` in the current scope; returns its C name.
    pub(super) fn declare(&mut self, v: &Var) -> String {
        self.in_scope.insert(v.id());
        self.name_of(v)
    }

    /// The C name of a use of `v`, which must be declared: an unbound variable or an
    /// unknown buffer is refused here rather than by the C compiler.
    pub(super) fn use_var(&mut self, v: &Var) -> Result<String, BackendError> {
        if !self.in_scope.contains(&v.id()) {
            return Err(self.err(format!("variable `{}` is used but not bound", v.name())));
        }
        Ok(self.name_of(v))
    }

    pub(super) fn use_buffer(&mut self, b: &Buffer) -> Result<String, BackendError> {
        if !self.in_scope.contains(&b.data().id()) {
            return Err(self.err(format!(
                "buffer `{}` is neither a parameter nor allocated here",
                b.name()
            )));
        }
        Ok(self.name_of(b.data()))
    }

    /// Emits `body` with `v` declared, then ends `v`'s scope.
    pub(super) fn scoped(&mut self, v: &Var, body: &Stmt) -> Result<(), BackendError> {
        let fresh = self.in_scope.insert(v.id());
        let r = self.stmt(body);
        if fresh {
            self.in_scope.remove(&v.id());
        }
        r
    }

    pub(super) fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("tsr_t{}", self.tmp)
    }

    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.body.push_str("  ");
        }
        self.body.push_str(s);
        self.body.push('\n');
    }

    /// Records that the source calls the vector math of `lanes` lanes of `t`.
    pub(super) fn use_vector_math(&mut self, t: DataType, lanes: u16) {
        self.vec_types
            .insert((VECTOR_MATH.into(), lanes, t.element_of()));
    }

    pub(super) fn vt(&mut self, t: DataType, lanes: u16) -> String {
        self.vec_types.insert((suffix(t), lanes, t.element_of()));
        vec_name(t.element_of(), lanes)
    }

    pub(super) fn err(&self, reason: impl Into<String>) -> BackendError {
        unsupported(self.dialect.backend(), &self.func, reason.into())
    }

    // ----- expressions -----

    pub(super) fn literal(&self, e: &Expr) -> Option<String> {
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

    pub(super) fn expr(&mut self, e: &Expr) -> Result<(String, Ty), BackendError> {
        let t = e.dtype();
        if t.is_scalar() {
            return Ok((self.scalar(e)?, Ty::S(t)));
        }
        self.vector(e)
    }

    /// A scalar expression.
    pub(super) fn scalar(&mut self, e: &Expr) -> Result<String, BackendError> {
        if let Some(l) = self.literal(e) {
            return Ok(l);
        }
        if operands(e).iter().any(|x| x.dtype().is_vector()) {
            return Err(self.err(format!("`{e}` has a scalar type and vector operands")));
        }
        if let Some(code) = self.byte_word_code(e)? {
            return Ok(code);
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
                    (BinOp::Mod, true) => format!("{}({x}, {y})", self.dialect.math_fn("fmod", t)),
                    (BinOp::FloorDiv, false) => format!("tsr_floordiv_{n}({x}, {y})"),
                    (BinOp::FloorDiv, true) => {
                        format!("{}(({x}) / ({y}))", self.dialect.math_fn("floor", t))
                    }
                    (BinOp::FloorMod, false) => format!("tsr_floormod_{n}({x}, {y})"),
                    (BinOp::FloorMod, true) if self.dialect.float_floormod(&x, &y, t).is_some() => {
                        self.dialect.float_floormod(&x, &y, t).unwrap_or_default()
                    }
                    (BinOp::FloorMod, true) => {
                        let (tx, ty) = (self.fresh(), self.fresh());
                        let c = scalar_c(t);
                        format!("({{ {c} {tx} = {x}; {c} {ty} = {y}; {tx} - {}({tx} / {ty}) * {ty}; }})", self.dialect.math_fn("floor", t))
                    }
                    // of truth values: both, either (ReduceMin and ReduceMax of bools)
                    (BinOp::Min, _) if t.is_bool() => format!("(({x}) && ({y}))"),
                    (BinOp::Max, _) if t.is_bool() => format!("(({x}) || ({y}))"),
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
                self.dialect
                    .check_type(*dtype)
                    .map_err(|r| self.err(r.to_string()))?;
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
                math_call(self.dialect, *op, t, &a)
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
    pub(super) fn flat_scalar(
        &mut self,
        buffer: &Buffer,
        indices: &[Expr],
    ) -> Result<String, BackendError> {
        let f = flat_expr(buffer, indices).map_err(|r| self.err(r.to_string()))?;
        self.scalar(&f)
    }

    /// The C expression of the flat offsets of a vector access, as an int vector, and the
    /// type of its lanes (int64 for buffers with more elements than int32 holds).
    pub(super) fn flat_vector(
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
            offset_type(&shape)
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

    // ----- statements -----

    /// A loop: a thread-bound one as the thread's index; a parallel, unrolled or register
    /// tile's loop with the dialect's pragma.
    fn for_loop(
        &mut self,
        var: &Var,
        min: &Expr,
        extent: &Expr,
        kind: ForKind,
        body: &Stmt,
    ) -> Result<(), BackendError> {
        if let ForKind::ThreadBinding(axis) = kind {
            if axis != ThreadAxis::VThread {
                return self.thread_loop(var, extent, axis, body);
            }
        }
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
                match self.dialect.parallel_pragma(self.num_threads) {
                    Some(p) => {
                        self.line(&p);
                        self.in_parallel = true;
                        entered_parallel = true;
                    }
                    None => self.line("// parallel loop runs serially"),
                }
            }
            ForKind::Parallel => self.line("// nested parallel loop runs serially"),
            ForKind::Unrolled => {
                let f = extent.as_int().filter(|n| *n <= 512).unwrap_or(16);
                let p = self.dialect.unroll_pragma(f);
                self.line(&p);
            }
            ForKind::Serial if is_unrolled_tile(body) => {
                if let Some(p) = self.dialect.serial_pragma() {
                    self.line(&p);
                }
            }
            // A virtual thread is a serial loop inside the thread.
            ForKind::Serial | ForKind::Vectorized | ForKind::ThreadBinding(_) => {}
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
        Ok(())
    }

    /// A store: scalar, a vector store where the lanes are contiguous, else a scatter lane
    /// by lane; the value converted to the buffer's type, as the interpreter does.
    fn store(
        &mut self,
        buffer: &Buffer,
        indices: &[Expr],
        value: &Expr,
    ) -> Result<(), BackendError> {
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
            match flat_ramp(buffer, indices) {
                Some((base, 1)) => {
                    let b = self.scalar(&base)?;
                    let st = self.dialect.vector_store(&vt, &name, &b, &v, lanes);
                    self.line(&st);
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
        Ok(())
    }

    /// A heap allocation of `bytes` (at least [`super::KEPT_ALLOCATION`]) kept between
    /// calls: the block a call leaves in the site's slot is the next call's, taken and
    /// given back atomically (two calls at once each have one; the one given back over
    /// another frees it). Blocks that large come from `mmap`, whose every page a call
    /// would fault in again (a module for a range of sizes allocates its kernels'
    /// intermediates at the largest).
    fn kept_allocation(
        &mut self,
        buffer: &Buffer,
        (name, c, bytes): (&str, &str, usize),
        body: &Stmt,
    ) -> Result<(), BackendError> {
        let rounded = bytes.div_ceil(64) * 64;
        let block = format!("{name}_block");
        let slot = format!("{name}_slot");
        self.line("{");
        self.indent += 1;
        self.line(&format!("static char* {slot} = 0;"));
        self.line(&format!(
            "char* {block} = (char*)__atomic_exchange_n(&{slot}, (char*)0, __ATOMIC_ACQ_REL);"
        ));
        self.line(&format!(
            "if ({block} == NULL) {block} = (char*)aligned_alloc(64, {rounded});"
        ));
        self.line(&format!("if ({block} == NULL) {{"));
        self.line("  #pragma omp atomic write");
        self.line("  tsr_status = -1;");
        self.line("} else {");
        self.indent += 1;
        self.line(&format!("{c}* {name} = ({c}*){block};"));
        self.scoped(buffer.data(), body)?;
        self.line(&format!(
            "{block} = (char*)__atomic_exchange_n(&{slot}, {block}, __ATOMIC_ACQ_REL);"
        ));
        self.line(&format!("if ({block} != NULL) free({block});"));
        self.indent -= 1;
        self.line("}");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// An allocation as the dialect declares it: here, hoisted (`__local`) or on the heap.
    fn allocate(&mut self, buffer: &Buffer, body: &Stmt) -> Result<(), BackendError> {
        let name = self.name_of(buffer.data());
        let shape = buffer.const_shape().ok_or_else(|| {
            self.err(format!(
                "allocation `{}` has a shape that is not constant",
                buffer.name()
            ))
        })?;
        self.dialect
            .check_type(buffer.dtype())
            .map_err(|r| self.err(r.to_string()))?;
        let n: i64 = shape.iter().product::<i64>().max(1);
        let c = scalar_c(buffer.dtype());
        let bytes = n as usize * buffer.dtype().bytes();
        let decl = self
            .dialect
            .allocation(buffer.scope(), c, &name, n, bytes)
            .map_err(|r| self.err(format!("allocation `{}`: {r}", buffer.name())))?;
        match decl {
            AllocDecl::Here(d) => {
                self.line("{");
                self.indent += 1;
                self.line(&d);
                self.scoped(buffer.data(), body)?;
                self.indent -= 1;
                self.line("}");
            }
            AllocDecl::Hoisted(d) => {
                self.hoisted.push(d);
                self.scoped(buffer.data(), body)?;
            }
            AllocDecl::Heap if bytes >= super::KEPT_ALLOCATION => {
                self.kept_allocation(buffer, (&name, c, bytes), body)?;
            }
            AllocDecl::Heap => {
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
        Ok(())
    }

    pub(super) fn stmt(&mut self, s: &Stmt) -> Result<(), BackendError> {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                self.for_loop(var, min, extent, *kind, body)?;
            }
            StmtNode::Store {
                buffer,
                indices,
                value,
            } => {
                self.store(buffer, indices, value)?;
            }
            StmtNode::Allocate { buffer, body } => {
                self.allocate(buffer, body)?;
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
                if let Some(info) = AllreduceInfo::of(s) {
                    let buf = self.use_buffer(&info.buffer)?;
                    if let Some(lines) = self.dialect.allreduce(&info, &buf, self.launch) {
                        for l in lines {
                            self.line(&l);
                        }
                        return Ok(());
                    }
                }
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
            StmtNode::StorageSync(scope) => match self.dialect.storage_sync(*scope) {
                Some(code) => self.line(&code),
                None => return Err(self.err(format!("a {scope} storage sync needs a GPU target"))),
            },
        }
        Ok(())
    }
    /// A loop bound to a GPU thread axis: the thread's index along the axis, guarded when
    /// the axis is launched wider than the loop.
    fn thread_loop(
        &mut self,
        var: &Var,
        extent: &Expr,
        axis: ThreadAxis,
        body: &Stmt,
    ) -> Result<(), BackendError> {
        let Some(index) = self.dialect.thread_index(axis) else {
            return Err(self.err(format!(
                "loop `{}` is bound to {axis}, which needs a GPU target",
                var.name()
            )));
        };
        let n = extent.as_int().ok_or_else(|| {
            self.err(format!(
                "loop `{}` is bound to {axis} with an extent that is not a constant",
                var.name()
            ))
        })?;
        let guarded = match self.launch {
            Some(l) => l.guarded(axis, n),
            None => return Err(self.err("a thread-bound loop outside a device kernel")),
        };
        let v = self.name_of(var);
        let c = scalar_c(var.dtype());
        self.line("{");
        self.indent += 1;
        self.line(&format!("{c} {v} = ({c})({index});"));
        if guarded {
            self.line(&format!("if ({v} < {n}) {{"));
            self.indent += 1;
        }
        self.scoped(var, body)?;
        if guarded {
            self.indent -= 1;
            self.line("}");
        }
        self.indent -= 1;
        self.line("}");
        Ok(())
    }
}

/// The operands of an expression (a load's indices, a ramp's base and stride).
pub(super) fn operands(e: &Expr) -> Vec<&Expr> {
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

pub(super) fn math_call(d: &dyn Dialect, op: Intrinsic, t: DataType, a: &[String]) -> String {
    let c = scalar_c(t.element_of());
    let f = |n: &str| d.math_fn(n, t);
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
        Intrinsic::RoundEven => format!("{}({})", f("rint"), a[0]),
        Intrinsic::IfThenElse => format!("({} ? {} : {})", a[0], a[1], a[2]),
        Intrinsic::BitAnd => format!("(({}) & ({}))", a[0], a[1]),
        Intrinsic::BitOr => format!("(({}) | ({}))", a[0], a[1]),
        Intrinsic::BitXor => format!("(({}) ^ ({}))", a[0], a[1]),
        Intrinsic::BitNot => format!("(~({}))", a[0]),
        Intrinsic::ShiftLeft => format!("(({}) << ({}))", a[0], a[1]),
        Intrinsic::ShiftRight => format!("(({}) >> ({}))", a[0], a[1]),
        Intrinsic::Dot4U8I8 | Intrinsic::Dot4U8I7 | Intrinsic::Dot4U8I8Sat => {
            // the four byte products written out (`a` and `b` are words, read 4 times)
            let terms: Vec<String> = (0..4)
                .map(|i| {
                    format!(
                        "(int32_t)(uint8_t)(({}) >> {s}) * (int32_t)(int8_t)(({}) >> {s})",
                        a[0],
                        a[1],
                        s = 8 * i
                    )
                })
                .collect();
            if op == Intrinsic::Dot4U8I8Sat {
                // each adjacent pair's sum clamped to int16 (an expression of the pair
                // alone, for every dialect: no statement expressions)
                let pair = |i: usize| {
                    let p = format!("({} + {})", terms[i], terms[i + 1]);
                    format!("({p} > 32767 ? 32767 : {p} < -32768 ? -32768 : {p})")
                };
                format!("({} + {})", pair(0), pair(2))
            } else {
                format!("({})", terms.join(" + "))
            }
        }
        Intrinsic::Sin
        | Intrinsic::Cos
        | Intrinsic::Tan
        | Intrinsic::Asin
        | Intrinsic::Acos
        | Intrinsic::Atan
        | Intrinsic::Sinh
        | Intrinsic::Cosh
        | Intrinsic::Asinh
        | Intrinsic::Acosh
        | Intrinsic::Atanh => {
            // the C, OpenCL and CUDA name is the IR's without its `tir.` prefix
            let base = op.name().trim_start_matches("tir.");
            format!("{}({})", f(base), a[0])
        }
    };
    if t.is_float() && t.bits != 16 {
        call
    } else {
        format!("(({c})({call}))")
    }
}

/// Stores in a loop-free body from which it counts as a register tile that fills the
/// register file (AVX2's 16 registers: the NHWC conv's 7 × 2 tile). Unrolling a loop
/// around a smaller tile spills nothing and helps: with the pragma on tiles of 4 and
/// more, the template tuners' best stem-like conv in 32 trials fell from 138–147 to 109
/// GFLOPS.
const TILE_STORES: usize = 12;

/// Whether `body` is an unrolled register tile as large as a register file:
/// straight-line code (no loop, the unroll pass has expanded the tile's) of at least
/// [`TILE_STORES`] stores, every one into a `local` buffer (an accumulator tile, as the
/// schedules' cache writes make them).
fn is_unrolled_tile(body: &Stmt) -> bool {
    struct Count {
        local: usize,
        other: bool,
    }
    impl tessera_ir::visit::ExprVisitor for Count {}
    impl tessera_ir::visit::StmtVisitor for Count {
        fn visit_stmt(&mut self, s: &Stmt) {
            match s.node() {
                StmtNode::For { .. } => self.other = true,
                StmtNode::Store { buffer, .. }
                    if buffer.scope() == tessera_ir::StorageScope::Local =>
                {
                    self.local += 1
                }
                StmtNode::Store { .. } => self.other = true,
                _ => tessera_ir::visit::walk_stmt(self, s),
            }
        }
    }
    let mut c = Count {
        local: 0,
        other: false,
    };
    tessera_ir::visit::StmtVisitor::visit_stmt(&mut c, body);
    !c.other && c.local >= TILE_STORES
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
#[path = "printer_tests.rs"]
mod tests;
