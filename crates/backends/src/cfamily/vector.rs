//! The printer's vector expressions: GCC/Clang vector types (or the dialect's), lane
//! conversions as the interpreter converts, comparison masks, blends, contiguous loads
//! through the dialect and gathers lane by lane.

use super::flatten::flat_ramp;
use super::names::{mask_elem, scalar_c, suffix};
use super::printer::{math_call, operands, Gen, Ty};
use crate::backend::BackendError;
use tessera_ir::{BinOp, Buffer, CmpOp, DataType, Expr, ExprNode, Intrinsic};

impl Gen<'_> {
    pub(super) fn broadcast_code(&mut self, value: String, t: DataType, lanes: u16) -> String {
        let vt = self.vt(t, lanes);
        let tmp = self.fresh();
        let elems = vec![tmp.clone(); lanes as usize].join(", ");
        format!(
            "({{ {} {tmp} = {value}; ({vt}){{{elems}}}; }})",
            scalar_c(t)
        )
    }

    /// Converts a mask to `bits`-wide lanes.
    pub(super) fn mask_to(&mut self, code: String, from: Ty, bits: u8) -> String {
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
    pub(super) fn as_mask(&mut self, code: String, from: Ty, bits: u8, lanes: u16) -> String {
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
    pub(super) fn convert(&mut self, code: String, from: Ty, to: DataType, lanes: u16) -> String {
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
            // Integers narrower than 32 bits to or from floats go through int32 (GCC
            // converts such vectors lane by lane, the epilogues of quantized products),
            // as C's conversions do for values in int32's range
            Ty::V(t, _) if t.is_float() && to.is_integer() && to.bits < 32 => {
                let i = self.convert(code, from, DataType::int32(), lanes);
                self.convert(i, Ty::V(DataType::int32(), lanes), to, lanes)
            }
            Ty::V(t, _) if t.is_integer() && t.bits < 32 && to.is_float() => {
                let i = self.convert(code, from, DataType::int32(), lanes);
                self.convert(i, Ty::V(DataType::int32(), lanes), to, lanes)
            }
            Ty::V(t, _) if t == DataType::int32() && to.is_integer() && to.bits < 32 => {
                let helper = self.dialect.narrow_int32(&code, to, lanes);
                self.helper_or_convert(code, helper, to, to, lanes)
            }
            Ty::V(t, _)
                if t.is_integer() && (8..32).contains(&t.bits) && to == DataType::int32() =>
            {
                let helper = self.dialect.widen_to_int32(&code, t, lanes);
                self.helper_or_convert(code, helper, t, to, lanes)
            }
            Ty::V(_, _) => {
                let vt = self.vt(to, lanes);
                format!("__builtin_convertvector({code}, {vt})")
            }
        }
    }

    /// A conversion of `code` to lanes of `to` by the dialect's `helper` expression, whose
    /// definitions are those of `helpers_of`'s vector math, or by the language's
    /// conversion where the dialect has none.
    fn helper_or_convert(
        &mut self,
        code: String,
        helper: Option<String>,
        helpers_of: DataType,
        to: DataType,
        lanes: u16,
    ) -> String {
        let vt = self.vt(to, lanes);
        match helper {
            Some(c) => {
                self.use_vector_math(helpers_of, lanes);
                c
            }
            None => format!("__builtin_convertvector({code}, {vt})"),
        }
    }

    /// The vector code of `e` as lanes of `to` (see [`Gen::convert`]).
    pub(super) fn vector_as(
        &mut self,
        e: &Expr,
        to: DataType,
        lanes: u16,
    ) -> Result<String, BackendError> {
        let (c, t) = self.vector(e)?;
        Ok(self.convert(c, t, to, lanes))
    }

    /// Lane-wise `m ? a : b` for vectors of type `t`.
    pub(super) fn blend(
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
        let d = self.dialect;
        let (ia, ib) = (d.reinterpret(&ta, &it), d.reinterpret(&tb, &it));
        let mixed = d.reinterpret(&format!("(({ia} & {tm}) | ({ib} & ~{tm}))"), &vt);
        format!("({{ {it} {tm} = {m}; {vt} {ta} = {a}; {vt} {tb} = {b}; {mixed}; }})")
    }

    /// The dialect's vector types have this many lanes.
    pub(super) fn check_lanes(&self, lanes: u16) -> Result<(), BackendError> {
        self.dialect
            .check_lanes(lanes)
            .map_err(|r| self.err(r.to_string()))
    }

    /// Applies a scalar C function lane by lane.
    pub(super) fn per_lane(
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

    /// `acc + dot4(x, y)` (either order) as the dialect's one accumulating call, where it
    /// has one ([`super::vdot`]: one `vpdpbusd` with VNNI).
    fn dot4_accumulate(
        &mut self,
        a: &Expr,
        b: &Expr,
        el: DataType,
        lanes: u16,
    ) -> Result<Option<String>, BackendError> {
        let is_dot = |e: &Expr| matches!(e.node(), ExprNode::Call { op, args, .. } if op.is_dot4() && args.len() == 2);
        let (acc, dot) = match (is_dot(a), is_dot(b)) {
            (_, true) => (a, b),
            (true, false) => (b, a),
            _ => return Ok(None),
        };
        let ExprNode::Call { op, args, .. } = dot.node() else {
            return Ok(None);
        };
        let op = *op;
        let d = self.dialect;
        let probe = ["".to_string(), String::new(), String::new()];
        if d.vector_math(op, el, lanes, &probe).is_none() {
            return Ok(None);
        }
        let code = [
            self.vector_as(acc, el, lanes)?,
            self.vector_as(&args[0], el, lanes)?,
            self.vector_as(&args[1], el, lanes)?,
        ];
        self.use_vector_math(el, lanes);
        Ok(d.vector_math(op, el, lanes, &code))
    }

    /// The dialect's `min`/`max` of float vectors `a`, `b` (printed as `x`, `y`) where `b`
    /// is a constant other than NaN ([`super::dialect::Dialect::min_max_by_constant`]).
    fn min_max_by_constant(
        &mut self,
        op: &BinOp,
        b: &Expr,
        x: &str,
        y: &str,
        el: DataType,
        lanes: u16,
    ) -> Option<String> {
        if !matches!(op, BinOp::Min | BinOp::Max) || !el.is_float() {
            return None;
        }
        let constant = |e: &Expr| {
            let v = match e.node() {
                ExprNode::Broadcast { value, .. } => value.as_float(),
                _ => e.as_float(),
            };
            v.is_some_and(|v| !v.is_nan())
        };
        // (the constant second only: swapped, `min(+0, -0)` would keep the other zero)
        if !constant(b) {
            return None;
        }
        let code = self
            .dialect
            .min_max_by_constant(*op == BinOp::Min, el, lanes, x, y)?;
        self.use_vector_math(el, lanes);
        Some(code)
    }

    /// A vector arithmetic operation (`e` is `a op b`, `lanes` lanes of `el`).
    fn vector_binary(
        &mut self,
        e: &Expr,
        op: &BinOp,
        a: &Expr,
        b: &Expr,
        el: DataType,
        lanes: u16,
    ) -> Result<String, BackendError> {
        if el.is_bool() {
            return Err(self.err(format!("{op:?} of bool vectors")));
        }
        if *op == BinOp::Add {
            if let Some(code) = self.dot4_accumulate(a, b, el, lanes)? {
                return Ok(code);
            }
        }
        let x = self.vector_as(a, el, lanes)?;
        let y = self.vector_as(b, el, lanes)?;
        if let Some(code) = self.min_max_by_constant(op, b, &x, &y, el, lanes) {
            return Ok(code);
        }
        Ok(match (op, el.is_float()) {
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
                let d = self.dialect;
                let wrapped = format!(
                    "(({}) {sym} ({}))",
                    d.reinterpret(&x, &ut),
                    d.reinterpret(&y, &ut)
                );
                format!("({})", d.reinterpret(&wrapped, &vt))
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
                let d = self.dialect;
                self.per_lane(vec![x, y], el, lanes, |a| match (op, s.is_float()) {
                    (BinOp::FloorDiv, false) => {
                        format!("tsr_floordiv_{name}({}, {})", a[0], a[1])
                    }
                    (BinOp::FloorMod, false) => {
                        format!("tsr_floormod_{name}({}, {})", a[0], a[1])
                    }
                    (BinOp::FloorDiv, true) => {
                        format!("{}({} / {})", d.math_fn("floor", s), a[0], a[1])
                    }
                    (BinOp::FloorMod, true) => format!(
                        "({0} - {2}({0} / {1}) * {1})",
                        a[0],
                        a[1],
                        d.math_fn("floor", s)
                    ),
                    _ => format!("{}({}, {})", d.math_fn("fmod", s), a[0], a[1]),
                })
            }
        })
    }

    /// A vector load: one vector access where the lanes are contiguous, a broadcast where
    /// they read one element, else a gather lane by lane.
    fn vector_load(
        &mut self,
        buffer: &Buffer,
        indices: &[Expr],
        el: DataType,
        lanes: u16,
    ) -> Result<String, BackendError> {
        let name = self.use_buffer(buffer)?;
        let vt = self.vt(el, lanes);
        match flat_ramp(buffer, indices) {
            Some((base, 1)) => {
                let b = self.scalar(&base)?;
                Ok(self.dialect.vector_load(&vt, &name, &b, lanes))
            }
            Some((base, 0)) => {
                let b = self.scalar(&base)?;
                Ok(self.broadcast_code(format!("{name}[{b}]"), el, lanes))
            }
            _ => {
                let (idx, idx_t) = self.flat_vector(buffer, indices, lanes)?;
                let it = self.vt(idx_t, lanes);
                let ti = self.fresh();
                let elems: Vec<String> = (0..lanes).map(|i| format!("{name}[{ti}[{i}]]")).collect();
                Ok(format!(
                    "({{ {it} {ti} = {idx}; ({vt}){{{}}}; }})",
                    elems.join(", ")
                ))
            }
        }
    }

    /// A comparison of two vectors: a mask of the operands' width. Bools compare as 0/1
    /// (a mask's true, -1, would order below false).
    fn vector_cmp(
        &mut self,
        op: CmpOp,
        a: &Expr,
        b: &Expr,
        lanes: u16,
    ) -> Result<(String, Ty), BackendError> {
        let at = a.dtype().element_of();
        let x = self.vector_as(a, at, lanes)?;
        let y = self.vector_as(b, at, lanes)?;
        let bits = at.bits.max(8);
        self.vt(mask_elem(bits), lanes);
        Ok((format!("({x} {} {y})", op.symbol()), Ty::M(bits, lanes)))
    }

    pub(super) fn vector(&mut self, e: &Expr) -> Result<(String, Ty), BackendError> {
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
        if let Some(code) = self.byte_word_code(e)? {
            return Ok((code, Ty::V(el, lanes)));
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
            ExprNode::Binary { op, a, b } => (
                self.vector_binary(e, op, a, b, el, lanes)?,
                Ty::V(el, lanes),
            ),
            ExprNode::Cmp { op, a, b } => self.vector_cmp(*op, a, b, lanes)?,
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
                let d = self.dialect;
                let code = match d.vector_math(op, el, lanes, &a) {
                    Some(code) => {
                        self.use_vector_math(el, lanes);
                        code
                    }
                    None => self.per_lane(a, el, lanes, |xs| math_call(d, op, el, xs)),
                };
                (code, Ty::V(el, lanes))
            }
            ExprNode::Cast { dtype, value } => {
                let v = self.vector_as(value, dtype.element_of(), lanes)?;
                (v, Ty::V(dtype.element_of(), lanes))
            }
            ExprNode::Load { buffer, indices } => (
                self.vector_load(buffer, indices, el, lanes)?,
                Ty::V(el, lanes),
            ),
            ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => {
                return Err(self.err("a scalar leaf typed as a vector"))
            }
        })
    }
}
