//! Vectorization: a loop of kind `Vectorized` with a constant power-of-two extent becomes
//! straight-line vector code: its variable becomes `ramp(min, 1, lanes)`, scalars meeting
//! vectors are broadcast, and ramp arithmetic stays in ramp form (so contiguous accesses
//! are recognisable by code generators). A comparison every lane answers alike (a
//! unit-stride ramp against a threshold a multiple of the lanes away, e.g. a
//! concatenation's join) stays one scalar test.
//!
//! A loop whose body cannot be expressed that way (a condition or `if_then_else` that
//! varies across lanes, a store that does not vary with the loop, an allocation, a
//! nested vector loop, a non-power-of-two extent) stays a loop: it is returned as a
//! serial loop, and the reason is reported.

use crate::expr::{BinOp, CmpOp, Expr, ExprNode, Intrinsic, Var};
use crate::stmt::{ForKind, Stmt, StmtNode};
use crate::visit::{mutate_stmt_children, ExprMutator, StmtMutator};

/// A vectorized loop that had to stay a scalar loop, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotVectorized {
    pub var: String,
    pub reason: String,
}

/// Vectorizes every `Vectorized` loop it can; returns the new statement and the loops
/// left scalar.
pub fn vectorize_loops(s: &Stmt) -> (Stmt, Vec<NotVectorized>) {
    let mut m = LoopVectorizer {
        skipped: Vec::new(),
    };
    let out = m.mutate_stmt(s);
    (out, m.skipped)
}

struct LoopVectorizer {
    skipped: Vec<NotVectorized>,
}

impl ExprMutator for LoopVectorizer {}

impl StmtMutator for LoopVectorizer {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let s = mutate_stmt_children(self, s);
        let StmtNode::For {
            var,
            min,
            extent,
            kind: ForKind::Vectorized,
            body,
        } = s.node()
        else {
            return s;
        };
        let result = match extent.as_int() {
            Some(n) if (2..=64).contains(&n) && (n as u64).is_power_of_two() => {
                let ramp = Expr::ramp(min.clone(), Expr::int_of(min.dtype(), 1), n as u16);
                Lanes {
                    var: var.clone(),
                    ramp,
                    lanes: n as u16,
                }
                .stmt(body)
            }
            Some(n) => Err(Unvectorizable::Extent(n)),
            None => Err(Unvectorizable::ExtentNotConstant),
        };
        match result {
            Ok(v) => v,
            Err(reason) => {
                self.skipped.push(NotVectorized {
                    var: var.name().to_string(),
                    reason: reason.to_string(),
                });
                Stmt::for_loop(
                    var.clone(),
                    min.clone(),
                    extent.clone(),
                    ForKind::Serial,
                    body.clone(),
                )
            }
        }
    }
}

/// Rewrites a loop body with the loop variable as a vector of `lanes` lanes.
struct Lanes {
    var: Var,
    ramp: Expr,
    lanes: u16,
}

/// Why a vectorized loop stays a scalar loop ([`NotVectorized::reason`] is its text).
#[derive(Debug, thiserror::Error)]
enum Unvectorizable {
    #[error("extent {0} is not a power of two between 2 and 64")]
    Extent(i64),
    #[error("the extent is not a constant")]
    ExtentNotConstant,
    #[error("the body already holds vector expressions")]
    AlreadyVector,
    #[error("an if_then_else condition varies across lanes")]
    IfThenElseCondition,
    /// A value that must be one scalar for all lanes (`what`: a condition, a loop
    /// bound, a let value).
    #[error("{what} varies across lanes")]
    Varies { what: &'static str },
    #[error("the store to `{buffer}` does not vary with the loop")]
    UniformStore { buffer: String },
    #[error("a {0:?} loop is nested inside")]
    Nested(ForKind),
    #[error("the body allocates")]
    Allocates,
    #[error("the body evaluates an expression for effect")]
    Evaluates,
    #[error("the body synchronizes threads")]
    Synchronizes,
}

fn lanes_of(e: &Expr) -> u16 {
    e.dtype().lanes
}

/// The scalar a vector operand stands for: a broadcast's value, or the operand itself
/// when it is scalar.
fn scalar_value(e: &Expr) -> Option<Expr> {
    match e.node() {
        ExprNode::Broadcast { value, .. } => Some(value.clone()),
        _ if lanes_of(e) == 1 => Some(e.clone()),
        _ => None,
    }
}

impl Lanes {
    fn widen(&self, e: Expr) -> Expr {
        if lanes_of(&e) == 1 {
            Expr::broadcast(e, self.lanes)
        } else {
            e
        }
    }

    /// Combines two operands, one of them a vector, keeping ramps as ramps where the
    /// arithmetic allows.
    fn binary(&self, op: BinOp, a: Expr, b: Expr) -> Expr {
        if lanes_of(&a) == 1 && lanes_of(&b) == 1 {
            return Expr::binary(op, a, b);
        }
        let ramp = |e: &Expr| match e.node() {
            ExprNode::Ramp { base, stride, .. } => Some((base.clone(), stride.clone())),
            _ => None,
        };
        let n = self.lanes;
        // two lane-invariant operands: one scalar operation, broadcast
        if let (Some(x), Some(y)) = (scalar_value(&a), scalar_value(&b)) {
            return Expr::broadcast(Expr::binary(op, x, y), n);
        }
        if a.dtype().is_integer() {
            match (op, ramp(&a), ramp(&b), scalar_value(&a), scalar_value(&b)) {
                (BinOp::Add, Some((b1, s1)), Some((b2, s2)), _, _) => {
                    return Expr::ramp(b1 + b2, s1 + s2, n)
                }
                (BinOp::Sub, Some((b1, s1)), Some((b2, s2)), _, _) => {
                    return Expr::ramp(b1 - b2, s1 - s2, n)
                }
                (BinOp::Add, Some((b1, s1)), _, _, Some(x)) => return Expr::ramp(b1 + x, s1, n),
                (BinOp::Add, _, Some((b2, s2)), Some(x), _) => return Expr::ramp(x + b2, s2, n),
                (BinOp::Sub, Some((b1, s1)), _, _, Some(x)) => return Expr::ramp(b1 - x, s1, n),
                (BinOp::Mul, Some((b1, s1)), _, _, Some(x)) => {
                    return Expr::ramp(&b1 * x.clone(), s1 * x, n)
                }
                (BinOp::Mul, _, Some((b2, s2)), Some(x), _) => {
                    return Expr::ramp(&x * b2, x * s2, n)
                }
                (BinOp::FloorDiv | BinOp::FloorMod, Some((b1, s1)), _, _, Some(c)) => {
                    if let Some(e) = self.aligned_floor(op, &b1, &s1, &c) {
                        return e;
                    }
                }
                _ => {}
            }
        }
        Expr::binary(op, self.widen(a), self.widen(b))
    }

    /// `floordiv` / `floormod` of a unit-stride ramp `ramp(b, 1, n)` by a constant `c`
    /// that the lanes cannot straddle a multiple of (`n` divides both `b` and `c`): the
    /// quotient is the same in every lane, `broadcast(b / c)`, and the remainder a ramp,
    /// `ramp(b % c, 1, n)`. This keeps a grouped convolution's input channel
    /// (`ff / group_width · cin_g + rc`, the output channels vectorized inside one group)
    /// a broadcast instead of a gather.
    fn aligned_floor(&self, op: BinOp, base: &Expr, stride: &Expr, c: &Expr) -> Option<Expr> {
        let n = i64::from(self.lanes);
        let divisor = c.as_int().filter(|c| *c > 0 && c % n == 0)?;
        if stride.as_int() != Some(1) {
            return None;
        }
        let analyzer = crate::arith::Analyzer::new();
        if !analyzer.modular_set(base).divisible_by(n) {
            return None;
        }
        let d = Expr::int_of(base.dtype(), divisor);
        Some(match op {
            BinOp::FloorDiv => Expr::broadcast(Expr::floordiv(base.clone(), d), self.lanes),
            _ => Expr::ramp(
                Expr::floormod(base.clone(), d),
                Expr::int_of(base.dtype(), 1),
                self.lanes,
            ),
        })
    }

    /// A comparison of a unit-stride ramp with a scalar that every lane answers alike,
    /// as its first lane's scalar comparison: `ramp(b, 1, n) >= t` when `b - t` is a
    /// multiple of `n` (the lanes cover `n` consecutive values that cannot straddle
    /// `t`), likewise `<`, and `>` / `<=` with `t + 1`. This is what keeps the channel
    /// loop of a concatenation (`c - 64 >= 0 ? b[…] : a[…]`) a vector loop.
    fn uniform_cmp(&self, op: CmpOp, a: &Expr, b: &Expr) -> Option<Expr> {
        let unit_ramp = |e: &Expr| match e.node() {
            ExprNode::Ramp { base, stride, .. } if stride.as_int() == Some(1) => Some(base.clone()),
            _ => None,
        };
        // normalized to `ramp OP scalar`
        let (op, base, t) = match (unit_ramp(a), scalar_value(b)) {
            (Some(base), Some(t)) => (op, base, t),
            _ => (op.swapped(), unit_ramp(b)?, scalar_value(a)?),
        };
        let threshold = match op {
            CmpOp::Ge | CmpOp::Lt => t.clone(),
            CmpOp::Gt | CmpOp::Le => t.clone() + Expr::int_of(t.dtype(), 1),
            CmpOp::Eq | CmpOp::Ne => return None,
        };
        let gap = crate::arith::Analyzer::new().simplify(&(base.clone() - threshold));
        crate::arith::Analyzer::new()
            .modular_set(&gap)
            .divisible_by(i64::from(self.lanes))
            .then(|| Expr::cmp(op, base, t))
    }

    fn expr(&self, e: &Expr) -> Result<Expr, Unvectorizable> {
        Ok(match e.node() {
            ExprNode::Var(v) if *v == self.var => self.ramp.clone(),
            ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => e.clone(),
            ExprNode::Binary { op, a, b } => self.binary(*op, self.expr(a)?, self.expr(b)?),
            ExprNode::Cmp { op, a, b } => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                if lanes_of(&a) == 1 && lanes_of(&b) == 1 {
                    Expr::cmp(*op, a, b)
                } else if let Some(c) = self.uniform_cmp(*op, &a, &b) {
                    c
                } else {
                    Expr::cmp(*op, self.widen(a), self.widen(b))
                }
            }
            ExprNode::And(a, b) | ExprNode::Or(a, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                let (a, b) = if lanes_of(&a) == 1 && lanes_of(&b) == 1 {
                    (a, b)
                } else {
                    (self.widen(a), self.widen(b))
                };
                if matches!(e.node(), ExprNode::And(..)) {
                    Expr::and(a, b)
                } else {
                    Expr::or(a, b)
                }
            }
            ExprNode::Not(a) => Expr::not(self.expr(a)?),
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => {
                let (c, t, f) = (
                    self.expr(cond)?,
                    self.expr(then_value)?,
                    self.expr(else_value)?,
                );
                if lanes_of(&c) == 1 && lanes_of(&t) == 1 && lanes_of(&f) == 1 {
                    Expr::select(c, t, f)
                } else {
                    // A scalar condition picks a whole vector; a vector one picks per lane.
                    Expr::select(c, self.widen(t), self.widen(f))
                }
            }
            ExprNode::Cast { dtype, value } => {
                let v = self.expr(value)?;
                Expr::cast(dtype.with_lanes(lanes_of(&v)), v)
            }
            ExprNode::Load { buffer, indices } => {
                let idx: Vec<Expr> = indices
                    .iter()
                    .map(|i| self.expr(i))
                    .collect::<Result<_, _>>()?;
                Expr::load(buffer, idx)
            }
            ExprNode::Ramp { .. } | ExprNode::Broadcast { .. } => {
                return Err(Unvectorizable::AlreadyVector)
            }
            ExprNode::Call { dtype, op, args } => {
                let a: Vec<Expr> = args
                    .iter()
                    .map(|x| self.expr(x))
                    .collect::<Result<_, _>>()?;
                if *op == Intrinsic::IfThenElse {
                    if lanes_of(&a[0]) != 1 {
                        return Err(Unvectorizable::IfThenElseCondition);
                    }
                    if lanes_of(&a[1]) == 1 && lanes_of(&a[2]) == 1 {
                        return Ok(Expr::call(*dtype, *op, a));
                    }
                    let (t, f) = (self.widen(a[1].clone()), self.widen(a[2].clone()));
                    return Ok(Expr::call(
                        dtype.with_lanes(self.lanes),
                        *op,
                        vec![a[0].clone(), t, f],
                    ));
                }
                if a.iter().all(|x| lanes_of(x) == 1) {
                    Expr::call(*dtype, *op, a)
                } else {
                    Expr::call(
                        dtype.with_lanes(self.lanes),
                        *op,
                        a.into_iter().map(|x| self.widen(x)).collect(),
                    )
                }
            }
        })
    }

    fn scalar(&self, e: &Expr, what: &'static str) -> Result<Expr, Unvectorizable> {
        let v = self.expr(e)?;
        if lanes_of(&v) != 1 {
            return Err(Unvectorizable::Varies { what });
        }
        Ok(v)
    }

    fn stmt(&self, s: &Stmt) -> Result<Stmt, Unvectorizable> {
        Ok(match s.node() {
            StmtNode::Store {
                buffer,
                indices,
                value,
            } => {
                let idx: Vec<Expr> = indices
                    .iter()
                    .map(|i| self.expr(i))
                    .collect::<Result<_, _>>()?;
                let v = self.expr(value)?;
                let vector_index = idx.iter().any(|i| lanes_of(i) > 1);
                if !vector_index && lanes_of(&v) > 1 {
                    return Err(Unvectorizable::UniformStore {
                        buffer: buffer.name().to_string(),
                    });
                }
                let v = if vector_index { self.widen(v) } else { v };
                Stmt::store(buffer, idx, v)
            }
            StmtNode::Seq(v) => {
                Stmt::seq(v.iter().map(|x| self.stmt(x)).collect::<Result<_, _>>()?)
            }
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                if matches!(
                    kind,
                    ForKind::Vectorized | ForKind::Parallel | ForKind::ThreadBinding(_)
                ) {
                    return Err(Unvectorizable::Nested(*kind));
                }
                let (mn, ext) = (
                    self.scalar(min, "an inner loop's start")?,
                    self.scalar(extent, "an inner loop's extent")?,
                );
                Stmt::for_loop(var.clone(), mn, ext, *kind, self.stmt(body)?)
            }
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
                let c = self.scalar(cond, "a condition")?;
                let t = self.stmt(then_case)?;
                let e = else_case.as_ref().map(|x| self.stmt(x)).transpose()?;
                Stmt::new(StmtNode::IfThenElse {
                    cond: c,
                    then_case: t,
                    else_case: e,
                })
            }
            StmtNode::Let { var, value, body } => Stmt::let_stmt(
                var.clone(),
                self.scalar(value, "a let value")?,
                self.stmt(body)?,
            ),
            StmtNode::Attr { key, value, body } => {
                Stmt::attr(key.clone(), value.clone(), self.stmt(body)?)
            }
            StmtNode::Allocate { .. } => return Err(Unvectorizable::Allocates),
            StmtNode::Evaluate(_) => return Err(Unvectorizable::Evaluates),
            StmtNode::StorageSync(_) => return Err(Unvectorizable::Synchronizes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Buffer;
    use crate::dtype::DataType;
    use crate::interp::{run, HostBuffer};
    use crate::stmt::PrimFunc;

    fn vloop(v: &Var, min: i64, extent: i64, body: Stmt) -> Stmt {
        Stmt::for_loop(
            v.clone(),
            Expr::int(min),
            Expr::int(extent),
            ForKind::Vectorized,
            body,
        )
    }

    /// Runs `body` as written and vectorized on the same inputs (the interpreter runs
    /// vector code too) and compares every buffer.
    fn same_results(params: &[Buffer], body: &Stmt) -> Stmt {
        let (vectorized, skipped) = vectorize_loops(body);
        assert!(skipped.is_empty(), "{skipped:?}");
        let inputs: Vec<HostBuffer> = params
            .iter()
            .map(|p| {
                let shape: Vec<usize> = p
                    .const_shape()
                    .unwrap()
                    .iter()
                    .map(|d| *d as usize)
                    .collect();
                let n: usize = shape.iter().product();
                let values: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 4.0).collect();
                HostBuffer::from_f64(p.dtype(), &shape, &values)
            })
            .collect();
        let mut want = inputs.clone();
        run(
            &PrimFunc::new("f", params.to_vec(), body.clone()),
            &mut want,
        )
        .unwrap();
        let mut got = inputs;
        run(
            &PrimFunc::new("f", params.to_vec(), vectorized.clone()),
            &mut got,
        )
        .unwrap();
        assert_eq!(got, want, "{vectorized}");
        vectorized
    }

    /// `out[o*8 + i] = cond(o*8 + i) ? hi[o*8 + i - 16] : lo[o*8 + i]` over 4 × 8 lanes.
    fn concat_like(cond: impl Fn(Expr) -> Expr) -> (Vec<Buffer>, Stmt) {
        let lo = Buffer::global("LO", DataType::float32(), &[16]);
        let hi = Buffer::global("HI", DataType::float32(), &[16]);
        let out = Buffer::global("OUT", DataType::float32(), &[32]);
        let (o, i) = (Var::int("o"), Var::int("i"));
        let c = &o * 8i64 + i.to_expr();
        let body = Stmt::for_loop(
            o.clone(),
            Expr::int(0),
            Expr::int(4),
            ForKind::Serial,
            vloop(
                &i,
                0,
                8,
                Stmt::store(
                    &out,
                    vec![c.clone()],
                    Expr::if_then_else(
                        cond(c.clone()),
                        Expr::load(&hi, vec![c.clone() - 16i64]),
                        Expr::load(&lo, vec![c]),
                    ),
                ),
            ),
        );
        (vec![lo, hi, out], body)
    }

    #[test]
    fn a_condition_every_lane_answers_alike_keeps_the_loop_vector() {
        // the join at 16, a multiple of the 8 lanes, in every form of the comparison
        let forms: [fn(Expr) -> Expr; 5] = [
            |c| (c - 16i64).ge(Expr::int(0)),
            |c| Expr::int(16).le(c),
            |c| c.gt(Expr::int(15)),
            |c| Expr::not(c.lt(Expr::int(16))),
            |c| Expr::int(15).lt(c),
        ];
        for form in forms {
            let (params, body) = concat_like(form);
            let text = same_results(&params, &body).to_string();
            assert!(text.contains("OUT[ramp("), "{text}");
        }
        // a join at 12 splits a vector: the loop stays scalar, with the reason
        let (_, body) = concat_like(|c| c.ge(Expr::int(12)));
        let (_, skipped) = vectorize_loops(&body);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].reason.contains("varies across lanes"),
            "{skipped:?}"
        );
    }

    #[test]
    fn floor_division_that_no_vector_straddles_is_a_broadcast() {
        // out[o*8 + i] = a[(o*8 + i) / 8] + b[(o*8 + i) % 16]: the quotient is one value
        // per vector and the remainder a ramp; by 12, lanes straddle a multiple: a gather
        let a = Buffer::global("A", DataType::float32(), &[8]);
        let b = Buffer::global("B", DataType::float32(), &[16]);
        let out = Buffer::global("OUT", DataType::float32(), &[32]);
        let (o, i) = (Var::int("o"), Var::int("i"));
        let body = |div: i64| {
            let c = &o * 8i64 + i.to_expr();
            Stmt::for_loop(
                o.clone(),
                Expr::int(0),
                Expr::int(4),
                ForKind::Serial,
                vloop(
                    &i,
                    0,
                    8,
                    Stmt::store(
                        &out,
                        vec![c.clone()],
                        Expr::load(&a, vec![Expr::floordiv(c.clone(), Expr::int(div))])
                            + Expr::load(&b, vec![Expr::floormod(c, Expr::int(16))]),
                    ),
                ),
            )
        };
        let params = [a.clone(), b.clone(), out.clone()];
        let text = same_results(&params, &body(8)).to_string();
        assert!(text.contains("A[x8(floordiv("), "{text}");
        assert!(text.contains("B[ramp(floormod("), "{text}");
        let text = same_results(&params, &body(12)).to_string();
        assert!(!text.contains("A[x8("), "{text}");
    }

    #[test]
    fn contiguous_strided_and_offset_accesses_become_ramps() {
        let a = Buffer::global("A", DataType::float32(), &[4, 32]);
        let b = Buffer::global("B", DataType::float32(), &[4, 32]);
        let (i, j, x) = (
            Var::int("i"),
            Var::int("j"),
            Var::new("x", DataType::float32()),
        );
        let body = Stmt::for_loop(
            j.clone(),
            Expr::int(0),
            Expr::int(4),
            ForKind::Serial,
            Stmt::seq(vec![
                // Offset start, stride 2, reversed, broadcast, select with a scalar
                // condition, if_then_else with a scalar condition, a let.
                vloop(
                    &i,
                    3,
                    8,
                    Stmt::let_stmt(
                        x.clone(),
                        Expr::load(&a, vec![j.to_expr(), Expr::int(0)]),
                        Stmt::store(
                            &b,
                            vec![j.to_expr(), &i * 2i64 + 1i64],
                            Expr::load(&a, vec![j.to_expr(), Expr::int(31) - i.to_expr()])
                                * x.to_expr()
                                + Expr::select(
                                    j.to_expr().gt(Expr::int(1)),
                                    Expr::load(&a, vec![j.to_expr(), i.to_expr()]),
                                    Expr::float(0.5),
                                ),
                        ),
                    ),
                ),
                vloop(
                    &i,
                    0,
                    4,
                    Stmt::if_then(
                        j.to_expr().lt(Expr::int(3)),
                        Stmt::store(
                            &b,
                            vec![j.to_expr() + 1i64, i.to_expr()],
                            Expr::if_then_else(
                                j.to_expr().eq(Expr::int(0)),
                                Expr::load(&a, vec![i.to_expr(), j.to_expr()]),
                                Expr::float(-1.0),
                            ),
                        ),
                    ),
                ),
            ]),
        );
        let v = same_results(&[a, b], &body);
        let text = v.to_string();
        assert!(!text.contains("vectorized"), "{text}");
        // The strided index stays a ramp (base 3 * 2 + 1, stride 1 * 2).
        assert!(text.contains("B[j, ramp(((3*2) + 1), (1*2), 8)]"), "{text}");
    }

    #[test]
    fn loops_that_cannot_be_vector_code_stay_scalar_and_say_why() {
        let a = Buffer::global("A", DataType::float32(), &[16]);
        let i = Var::int("i");
        let store = |v: Expr| Stmt::store(&a, vec![i.to_expr()], v);
        let load = || Expr::load(&a, vec![i.to_expr()]);
        let cases = [
            (vloop(&i, 0, 6, store(Expr::float(1.0))), "power of two"),
            (
                vloop(
                    &i,
                    0,
                    8,
                    store(Expr::if_then_else(load().gt(0.0), load(), Expr::float(0.0))),
                ),
                "if_then_else condition",
            ),
            (
                vloop(
                    &i,
                    0,
                    8,
                    Stmt::if_then(load().gt(0.0), store(Expr::float(0.0))),
                ),
                "a condition varies",
            ),
            (
                vloop(&i, 0, 8, Stmt::store(&a, vec![Expr::int(0)], load())),
                "does not vary",
            ),
            (
                vloop(
                    &i,
                    0,
                    8,
                    Stmt::allocate(
                        Buffer::global("t", DataType::float32(), &[1]),
                        store(load()),
                    ),
                ),
                "allocates",
            ),
            (vloop(&i, 0, 8, Stmt::evaluate(load())), "evaluates"),
            (
                vloop(
                    &i,
                    0,
                    4,
                    Stmt::for_loop(
                        Var::int("p"),
                        Expr::int(0),
                        Expr::int(2),
                        ForKind::Parallel,
                        store(load()),
                    ),
                ),
                "Parallel loop is nested",
            ),
        ];
        for (s, why) in cases {
            let (out, skipped) = vectorize_loops(&s);
            assert_eq!(skipped.len(), 1, "{s}");
            assert!(skipped[0].reason.contains(why), "{why}: {:?}", skipped[0]);
            assert!(
                matches!(
                    out.node(),
                    StmtNode::For {
                        kind: ForKind::Serial,
                        ..
                    }
                ),
                "{out}"
            );
        }
    }
}
