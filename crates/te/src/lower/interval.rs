//! Interval arithmetic of bound inference: the symbolic inclusive range an index
//! expression takes when some of its variables range over intervals.

use std::collections::HashMap;
use tessera_ir::{BinOp, Expr, ExprNode, Var};

/// A symbolic inclusive interval.
#[derive(Clone, Debug)]
pub(super) struct Interval {
    pub(super) lo: Expr,
    pub(super) hi: Expr,
}

impl Interval {
    pub(super) fn point(e: Expr) -> Self {
        Interval {
            lo: e.clone(),
            hi: e,
        }
    }
    pub(super) fn is_point(&self) -> bool {
        self.lo == self.hi
    }
    pub(super) fn range(lo: i64, hi: i64) -> Self {
        Interval {
            lo: Expr::int(lo),
            hi: Expr::int(hi),
        }
    }
}

/// The interval of an integer index expression when its variables range over `env`
/// (variables not in `env` are fixed). `None` when it cannot be bounded.
pub(super) fn interval(e: &Expr, env: &HashMap<Var, Interval>) -> Option<Interval> {
    match e.node() {
        ExprNode::Var(v) => Some(
            env.get(v)
                .cloned()
                .unwrap_or_else(|| Interval::point(e.clone())),
        ),
        ExprNode::IntImm { .. } => Some(Interval::point(e.clone())),
        ExprNode::Binary { op, a, b } => {
            let x = interval(a, env)?;
            let y = interval(b, env)?;
            if x.is_point() && y.is_point() {
                return Some(Interval::point(Expr::binary(*op, x.lo, y.lo)));
            }
            match op {
                BinOp::Add => Some(Interval {
                    lo: x.lo + y.lo,
                    hi: x.hi + y.hi,
                }),
                BinOp::Sub => Some(Interval {
                    lo: x.lo - y.hi,
                    hi: x.hi - y.lo,
                }),
                BinOp::Mul => {
                    let (v, k) = match (y.lo.as_int(), x.lo.as_int()) {
                        (Some(k), _) if y.is_point() => (x, k),
                        (_, Some(k)) if x.is_point() => (y, k),
                        _ => return None,
                    };
                    if k >= 0 {
                        Some(Interval {
                            lo: v.lo * k,
                            hi: v.hi * k,
                        })
                    } else {
                        Some(Interval {
                            lo: v.hi * k,
                            hi: v.lo * k,
                        })
                    }
                }
                BinOp::FloorDiv => {
                    let k = y.lo.as_int().filter(|k| *k > 0 && y.is_point())?;
                    Some(Interval {
                        lo: Expr::floordiv(x.lo, Expr::int(k)),
                        hi: Expr::floordiv(x.hi, Expr::int(k)),
                    })
                }
                BinOp::FloorMod => {
                    let k = y.lo.as_int().filter(|k| *k > 0 && y.is_point())?;
                    Some(Interval::range(0, k - 1))
                }
                BinOp::Min => Some(Interval {
                    lo: Expr::min(x.lo, y.lo),
                    hi: Expr::min(x.hi, y.hi),
                }),
                BinOp::Max => Some(Interval {
                    lo: Expr::max(x.lo, y.lo),
                    hi: Expr::max(x.hi, y.hi),
                }),
                BinOp::Div | BinOp::Mod => None,
            }
        }
        ExprNode::Select {
            then_value,
            else_value,
            ..
        } => union(interval(then_value, env)?, interval(else_value, env)?),
        ExprNode::Cast { value, .. } if value.dtype().is_integer() => interval(value, env),
        _ => None,
    }
}

pub(super) fn union(a: Interval, b: Interval) -> Option<Interval> {
    Some(Interval {
        lo: Expr::min(a.lo, b.lo),
        hi: Expr::max(a.hi, b.hi),
    })
}
