//! The simplifier: constant folding, canonical linear forms of integer sums,
//! floordiv/floormod rules that use bounds and modular sets, min/max/select and
//! comparison simplification. Every rule is exact for all integers (negative values
//! included); floats are only constant-folded.

use super::linear::Linear;
use super::{Analyzer, IntBound};
use crate::dtype::DataType;
use crate::expr::{BinOp, CmpOp, Expr, ExprNode, Intrinsic};
use crate::stmt::{Stmt, StmtNode};
use crate::visit::{mutate_expr_children, mutate_stmt_children, ExprMutator, StmtMutator};

fn floordiv_i(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    Some(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}
fn floormod_i(a: i64, b: i64) -> Option<i64> {
    let q = floordiv_i(a, b)?;
    a.checked_sub(q.checked_mul(b)?)
}

/// Wraps an integer into the range of `dtype` (two's complement for signed types).
pub(crate) fn wrap_int(dtype: DataType, v: i64) -> i64 {
    if dtype.is_bool() {
        return (v != 0) as i64;
    }
    if dtype.bits >= 64 {
        return v;
    }
    let bits = dtype.bits as u32;
    let mask = (1u64 << bits) - 1;
    let u = (v as u64) & mask;
    if dtype.is_int() && u >> (bits - 1) == 1 {
        (u | !mask) as i64
    } else {
        u as i64
    }
}

/// Rounds a float to the precision of `dtype`, as the interpreter does.
fn round_float(dtype: DataType, v: f64) -> f64 {
    match dtype.bits {
        32 => v as f32 as f64,
        16 => half::f16::from_f64(v).to_f64(),
        _ => v,
    }
}

struct Simplifier<'a> {
    an: &'a Analyzer,
}

impl Analyzer {
    /// The simplified form of `e`, equal to `e` for every value of the variables within
    /// their known ranges.
    pub fn simplify(&self, e: &Expr) -> Expr {
        Simplifier { an: self }.mutate_expr(e)
    }
}

fn is_int_scalar(e: &Expr) -> bool {
    let t = e.dtype();
    t.is_integer() && t.is_scalar()
}

impl Simplifier<'_> {
    fn lit(e: &Expr, v: i64) -> Expr {
        Expr::int_of(e.dtype(), v)
    }

    fn bound(&self, e: &Expr) -> IntBound {
        self.an.const_int_bound(e)
    }

    /// Re-canonicalizes an integer sum.
    fn canonical(&self, e: &Expr) -> Expr {
        match Linear::of(e) {
            // A folded constant wraps to the type, as the arithmetic it replaces does.
            Some(l) if l.is_const() => Expr::int_of(l.dtype, wrap_int(l.dtype, l.constant)),
            Some(l) => {
                let c = l.to_expr();
                if c == *e {
                    e.clone()
                } else {
                    c
                }
            }
            None => e.clone(),
        }
    }

    /// Splits the linear form of `a` into `q * c + r` and returns `(q, r)` with the
    /// constant of `r` in `[0, c)`.
    fn split_by(&self, a: &Expr, c: i64) -> Option<(Linear, Linear)> {
        let l = Linear::of(a)?;
        let mut q = Linear::zero(l.dtype);
        let mut r = Linear::zero(l.dtype);
        for (atom, k) in &l.terms {
            if *k % c == 0 {
                q.terms.push((atom.clone(), k / c));
            } else {
                r.terms.push((atom.clone(), *k));
            }
        }
        q.constant = floordiv_i(l.constant, c)?;
        r.constant = floormod_i(l.constant, c)?;
        Some((q, r))
    }

    fn floordiv(&self, e: &Expr, a: &Expr, b: &Expr) -> Expr {
        let Some(c) = b.as_int() else {
            return e.clone();
        };
        if let Some(x) = a.as_int() {
            return floordiv_i(x, c)
                .map(|v| Self::lit(e, v))
                .unwrap_or_else(|| e.clone());
        }
        if c <= 0 {
            return e.clone();
        }
        if c == 1 {
            return a.clone();
        }
        // floordiv(floordiv(x, c1), c) == floordiv(x, c1 * c) for positive divisors.
        if let ExprNode::Binary {
            op: BinOp::FloorDiv,
            a: x,
            b: c1,
        } = a.node()
        {
            if let Some(c1) = c1.as_int().filter(|c1| *c1 > 0) {
                if let Some(p) = c1.checked_mul(c) {
                    return self.floordiv(e, x, &Self::lit(e, p));
                }
            }
        }
        let Some((q, r)) = self.split_by(a, c) else {
            return e.clone();
        };
        let rb = self.bound(&r.to_expr());
        if rb.is_bounded() {
            if let (Some(lo), Some(hi)) = (floordiv_i(rb.min, c), floordiv_i(rb.max, c)) {
                if lo == hi {
                    let mut q = q;
                    q.constant = match q.constant.checked_add(lo) {
                        Some(v) => v,
                        None => return e.clone(),
                    };
                    return q.to_expr();
                }
            }
        }
        let rest = match self.factor_out(&r, c) {
            // floordiv(g·x + s, g·m) == floordiv(x, m) for 0 <= s < g
            Some((x, _, g)) => {
                let m = Self::lit(e, c / g);
                self.floordiv(&Expr::floordiv(x.to_expr(), m.clone()), &x.to_expr(), &m)
            }
            None => Expr::floordiv(r.to_expr(), b.clone()),
        };
        if q.is_const() && q.constant == 0 {
            return rest;
        }
        self.canonical(&Expr::binary(BinOp::Add, q.to_expr(), rest))
    }

    /// `r` as `g·x + s` with `g` a proper divisor of `c` (the largest that works), every
    /// term of `x` whole and `s` (the other terms and the constant's remainder) within
    /// `[0, g)`: then `floordiv(r, c) == floordiv(x, c/g)` and `floormod(r, c) ==
    /// floormod(x, c/g)·g + s`, for every integer `x` (a vector lane's index `8·o + i`
    /// into blocks of 16 is `floordiv(o, 2)`, with no division left per lane).
    fn factor_out(&self, r: &Linear, c: i64) -> Option<(Linear, Linear, i64)> {
        let gcd = |mut a: i64, mut b: i64| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a.abs()
        };
        let mut divisors: Vec<i64> = r
            .terms
            .iter()
            .map(|(_, k)| gcd(*k, c))
            .filter(|&g| g > 1 && g < c)
            .collect();
        divisors.sort_unstable();
        divisors.dedup();
        for &g in divisors.iter().rev() {
            let mut x = Linear::zero(r.dtype);
            let mut s = Linear::zero(r.dtype);
            for (atom, k) in &r.terms {
                if k % g == 0 {
                    x.terms.push((atom.clone(), k / g));
                } else {
                    s.terms.push((atom.clone(), *k));
                }
            }
            x.constant = floordiv_i(r.constant, g)?;
            s.constant = floormod_i(r.constant, g)?;
            let sb = self.bound(&s.to_expr());
            if sb.is_bounded() && sb.min >= 0 && sb.max < g {
                return Some((x, s, g));
            }
        }
        None
    }

    fn floormod(&self, e: &Expr, a: &Expr, b: &Expr) -> Expr {
        let Some(c) = b.as_int() else {
            return e.clone();
        };
        if let Some(x) = a.as_int() {
            return floormod_i(x, c)
                .map(|v| Self::lit(e, v))
                .unwrap_or_else(|| e.clone());
        }
        if c <= 0 {
            return e.clone();
        }
        if c == 1 {
            return Self::lit(e, 0);
        }
        // floormod(floormod(x, c1), c) == floormod(x, c) when c divides c1.
        if let ExprNode::Binary {
            op: BinOp::FloorMod,
            a: x,
            b: c1,
        } = a.node()
        {
            if c1.as_int().is_some_and(|c1| c1 > 0 && c1 % c == 0) {
                return self.floormod(e, x, b);
            }
        }
        let Some((_, r)) = self.split_by(a, c) else {
            return e.clone();
        };
        let re = r.to_expr();
        let rb = self.bound(&re);
        if rb.is_bounded() {
            if let (Some(lo), Some(hi)) = (floordiv_i(rb.min, c), floordiv_i(rb.max, c)) {
                if lo == hi {
                    let Some(shift) = lo.checked_mul(c) else {
                        return e.clone();
                    };
                    let mut r = r;
                    let Some(k) = r.constant.checked_sub(shift) else {
                        return e.clone();
                    };
                    r.constant = k;
                    return r.to_expr();
                }
            }
        }
        let m = self.an.modular_set(&re);
        if m.coeff != 0 && m.coeff % c == 0 {
            return Self::lit(e, m.base.rem_euclid(c));
        }
        if let Some((x, s, g)) = self.factor_out(&r, c) {
            let m = Self::lit(e, c / g);
            let xe = x.to_expr();
            let inner = self.floormod(&Expr::floormod(xe.clone(), m.clone()), &xe, &m);
            let scaled = Expr::binary(BinOp::Mul, inner, Self::lit(e, g));
            return self.canonical(&Expr::binary(BinOp::Add, scaled, s.to_expr()));
        }
        Expr::floormod(re, b.clone())
    }

    fn trunc_divmod(&self, e: &Expr, op: BinOp, a: &Expr, b: &Expr) -> Expr {
        if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
            let v = if op == BinOp::Div {
                x.checked_div(y)
            } else {
                x.checked_rem(y)
            };
            return v.map(|v| Self::lit(e, v)).unwrap_or_else(|| e.clone());
        }
        // On non-negative operands truncation and flooring agree.
        if self.bound(a).min >= 0 && b.as_int().is_some_and(|c| c > 0) {
            return if op == BinOp::Div {
                self.floordiv(e, a, b)
            } else {
                self.floormod(e, a, b)
            };
        }
        e.clone()
    }

    fn min_max(&self, e: &Expr, op: BinOp, a: &Expr, b: &Expr) -> Expr {
        let is_min = op == BinOp::Min;
        if a == b {
            return a.clone();
        }
        if let (Some(x), Some(y)) = (a.as_float(), b.as_float()) {
            return Expr::float_of(e.dtype(), if is_min { x.min(y) } else { x.max(y) });
        }
        if !is_int_scalar(e) {
            return e.clone();
        }
        if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
            return Self::lit(e, if is_min { x.min(y) } else { x.max(y) });
        }
        // Decide by the bounds of the difference (not for unsigned types, where the
        // difference wraps).
        if a.dtype().is_uint() {
            return e.clone();
        }
        if let Some(d) =
            Linear::of(a).and_then(|la| Linear::of(b).and_then(|lb| la.add_scaled(&lb, -1)))
        {
            let db = self.bound(&d.to_expr());
            if db.max <= 0 {
                return if is_min { a.clone() } else { b.clone() };
            }
            if db.min >= 0 {
                return if is_min { b.clone() } else { a.clone() };
            }
        }
        // min(min(x, c1), c2) == min(x, min(c1, c2)), likewise for max.
        if let (
            ExprNode::Binary {
                op: op2,
                a: x,
                b: c1,
            },
            Some(c2),
        ) = (a.node(), b.as_int())
        {
            if *op2 == op {
                if let Some(c1) = c1.as_int() {
                    let c = if is_min { c1.min(c2) } else { c1.max(c2) };
                    return Expr::binary(op, x.clone(), Self::lit(e, c));
                }
            }
        }
        e.clone()
    }

    fn float_arith(&self, e: &Expr, op: BinOp, a: &Expr, b: &Expr) -> Expr {
        let (Some(x), Some(y)) = (a.as_float(), b.as_float()) else {
            return e.clone();
        };
        let v = match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div if y != 0.0 => x / y,
            _ => return e.clone(),
        };
        Expr::float_of(e.dtype(), round_float(e.dtype(), v))
    }

    fn binary(&self, e: &Expr, op: BinOp, a: &Expr, b: &Expr) -> Expr {
        match op {
            BinOp::Min | BinOp::Max => self.min_max(e, op, a, b),
            _ if e.dtype().is_float() => self.float_arith(e, op, a, b),
            _ if !is_int_scalar(e) => e.clone(),
            BinOp::Add | BinOp::Sub | BinOp::Mul => self.canonical(e),
            BinOp::FloorDiv => self.floordiv(e, a, b),
            BinOp::FloorMod => self.floormod(e, a, b),
            BinOp::Div | BinOp::Mod => self.trunc_divmod(e, op, a, b),
        }
    }

    fn compare(&self, e: &Expr, op: CmpOp, a: &Expr, b: &Expr) -> Expr {
        let decide = |lo: f64, hi: f64| -> Option<bool> {
            // The range [lo, hi] of a - b decides the comparison when it lies on one side.
            match op {
                CmpOp::Eq if lo == 0.0 && hi == 0.0 => Some(true),
                CmpOp::Eq | CmpOp::Ne if lo > 0.0 || hi < 0.0 => Some(op == CmpOp::Ne),
                CmpOp::Ne if lo == 0.0 && hi == 0.0 => Some(false),
                CmpOp::Lt if hi < 0.0 => Some(true),
                CmpOp::Lt if lo >= 0.0 => Some(false),
                CmpOp::Le if hi <= 0.0 => Some(true),
                CmpOp::Le if lo > 0.0 => Some(false),
                CmpOp::Gt if lo > 0.0 => Some(true),
                CmpOp::Gt if hi <= 0.0 => Some(false),
                CmpOp::Ge if lo >= 0.0 => Some(true),
                CmpOp::Ge if hi < 0.0 => Some(false),
                _ => None,
            }
        };
        if let (Some(x), Some(y)) = (a.as_float(), b.as_float()) {
            let r = match op {
                CmpOp::Eq => x == y,
                CmpOp::Ne => x != y,
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                CmpOp::Ge => x >= y,
            };
            return Expr::bool(r);
        }
        if !is_int_scalar(a) || a.dtype().is_uint() {
            return e.clone();
        }
        let Some(d) =
            Linear::of(a).and_then(|la| Linear::of(b).and_then(|lb| la.add_scaled(&lb, -1)))
        else {
            return e.clone();
        };
        let db = self.bound(&d.to_expr());
        let to_f = |v: i64| v as f64;
        match decide(to_f(db.min), to_f(db.max)) {
            Some(r) => Expr::bool(r),
            None => e.clone(),
        }
    }

    fn cast(&self, e: &Expr, dtype: DataType, v: &Expr) -> Expr {
        if v.dtype() == dtype {
            return v.clone();
        }
        if !dtype.is_scalar() {
            return e.clone();
        }
        if let Some(x) = v.as_int() {
            return if dtype.is_float() {
                Expr::float_of(dtype, round_float(dtype, x as f64))
            } else {
                Expr::int_of(dtype, wrap_int(dtype, x))
            };
        }
        if let Some(x) = v.as_float() {
            if dtype.is_float() {
                return Expr::float_of(dtype, round_float(dtype, x));
            }
        }
        e.clone()
    }
}

fn as_bool(e: &Expr) -> Option<bool> {
    if e.dtype().is_bool() {
        e.as_int().map(|v| v != 0)
    } else {
        None
    }
}

impl ExprMutator for Simplifier<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        let e = mutate_expr_children(self, e);
        match e.node() {
            ExprNode::Binary { op, a, b } => self.binary(&e, *op, a, b),
            ExprNode::Cmp { op, a, b } => self.compare(&e, *op, a, b),
            ExprNode::And(a, b) => match (as_bool(a), as_bool(b)) {
                (Some(false), _) | (_, Some(false)) => Expr::bool(false),
                (Some(true), _) => b.clone(),
                (_, Some(true)) => a.clone(),
                _ if a == b => a.clone(),
                _ => e.clone(),
            },
            ExprNode::Or(a, b) => match (as_bool(a), as_bool(b)) {
                (Some(true), _) | (_, Some(true)) => Expr::bool(true),
                (Some(false), _) => b.clone(),
                (_, Some(false)) => a.clone(),
                _ if a == b => a.clone(),
                _ => e.clone(),
            },
            ExprNode::Not(a) => match (as_bool(a), a.node()) {
                (Some(v), _) => Expr::bool(!v),
                (_, ExprNode::Not(x)) => x.clone(),
                _ => e.clone(),
            },
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => match as_bool(cond) {
                Some(true) => then_value.clone(),
                Some(false) => else_value.clone(),
                None if then_value == else_value => then_value.clone(),
                None => e.clone(),
            },
            ExprNode::Call {
                op: Intrinsic::IfThenElse,
                args,
                ..
            } if args.len() == 3 => match as_bool(&args[0]) {
                Some(true) => args[1].clone(),
                Some(false) => args[2].clone(),
                None if args[1] == args[2] => args[1].clone(),
                None => e.clone(),
            },
            ExprNode::Cast { dtype, value } => self.cast(&e, *dtype, value),
            ExprNode::Broadcast { value, lanes: 1 } => value.clone(),
            _ => e,
        }
    }
}

/// Simplifies every expression of a statement with the loop and let variables' ranges
/// known; removes branches whose condition is decided and loops that run zero times.
pub fn simplify_stmt(s: &Stmt) -> Stmt {
    StmtSimplifier {
        an: Analyzer::new(),
    }
    .mutate_stmt(s)
}

struct StmtSimplifier {
    an: Analyzer,
}

impl ExprMutator for StmtSimplifier {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        self.an.simplify(e)
    }
}

impl StmtMutator for StmtSimplifier {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                let (min, extent) = (self.an.simplify(min), self.an.simplify(extent));
                if extent.as_int().is_some_and(|x| x <= 0) {
                    return Stmt::no_op();
                }
                self.an.bind_range(var, &min, &extent);
                let body = self.mutate_stmt(body);
                self.an.unbind(var);
                if body.is_no_op() {
                    return body;
                }
                Stmt::for_loop(var.clone(), min, extent, *kind, body)
            }
            StmtNode::Let { var, value, body } => {
                let value = self.an.simplify(value);
                if is_int_scalar(&value) {
                    let b = self.an.const_int_bound(&value);
                    self.an.bind_bound(var, b);
                }
                let body = self.mutate_stmt(body);
                self.an.unbind(var);
                Stmt::let_stmt(var.clone(), value, body)
            }
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
                let cond = self.an.simplify(cond);
                match as_bool(&cond) {
                    Some(true) => self.mutate_stmt(then_case),
                    Some(false) => else_case
                        .as_ref()
                        .map(|e| self.mutate_stmt(e))
                        .unwrap_or_else(Stmt::no_op),
                    None => {
                        let t = self.mutate_stmt(then_case);
                        let e = else_case.as_ref().map(|e| self.mutate_stmt(e));
                        Stmt::new(StmtNode::IfThenElse {
                            cond,
                            then_case: t,
                            else_case: e,
                        })
                    }
                }
            }
            _ => mutate_stmt_children(self, s),
        }
    }
}
