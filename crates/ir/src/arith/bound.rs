//! Constant integer bounds of an expression: `min <= e <= max` for every value of the
//! variables within their known ranges. `i64::MIN` / `i64::MAX` stand for unbounded.

use super::Analyzer;
use crate::expr::{BinOp, Expr, ExprNode, Intrinsic};

pub const NEG_INF: i64 = i64::MIN;
pub const POS_INF: i64 = i64::MAX;

/// An inclusive interval of integers; the ends may be infinite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntBound {
    pub min: i64,
    pub max: i64,
}

fn clamp(v: i128) -> i64 {
    if v >= POS_INF as i128 {
        POS_INF
    } else if v <= NEG_INF as i128 {
        NEG_INF
    } else {
        v as i64
    }
}

fn floor_div(a: i64, b: i64) -> i64 {
    if a == NEG_INF || a == POS_INF {
        return if (a > 0) == (b > 0) { POS_INF } else { NEG_INF };
    }
    let (a, b) = (a as i128, b as i128);
    let q = a / b;
    clamp(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

fn trunc_div(a: i64, b: i64) -> i64 {
    if a == NEG_INF || a == POS_INF {
        return if (a > 0) == (b > 0) { POS_INF } else { NEG_INF };
    }
    clamp(a as i128 / b as i128)
}

impl IntBound {
    pub const EVERYTHING: IntBound = IntBound {
        min: NEG_INF,
        max: POS_INF,
    };

    pub fn new(min: i64, max: i64) -> Self {
        IntBound { min, max }
    }
    pub fn point(v: i64) -> Self {
        IntBound { min: v, max: v }
    }
    pub fn is_point(&self) -> bool {
        self.min == self.max && self.min != NEG_INF && self.max != POS_INF
    }
    pub fn is_bounded(&self) -> bool {
        self.min != NEG_INF && self.max != POS_INF
    }
    pub fn union(self, o: IntBound) -> IntBound {
        IntBound {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
    pub fn intersect(self, o: IntBound) -> IntBound {
        IntBound {
            min: self.min.max(o.min),
            max: self.max.min(o.max),
        }
    }

    fn add(self, o: IntBound) -> IntBound {
        let lo = if self.min == NEG_INF || o.min == NEG_INF {
            NEG_INF
        } else {
            clamp(self.min as i128 + o.min as i128)
        };
        let hi = if self.max == POS_INF || o.max == POS_INF {
            POS_INF
        } else {
            clamp(self.max as i128 + o.max as i128)
        };
        IntBound { min: lo, max: hi }
    }
    fn neg(self) -> IntBound {
        let f = |v: i64| {
            if v == NEG_INF {
                POS_INF
            } else if v == POS_INF {
                NEG_INF
            } else {
                -v
            }
        };
        IntBound {
            min: f(self.max),
            max: f(self.min),
        }
    }
    fn mul(self, o: IntBound) -> IntBound {
        let m = |a: i64, b: i64| -> i128 {
            if a == 0 || b == 0 {
                return 0;
            }
            let inf = a == NEG_INF || a == POS_INF || b == NEG_INF || b == POS_INF;
            let pos = (a > 0) == (b > 0);
            if inf {
                return if pos {
                    POS_INF as i128
                } else {
                    NEG_INF as i128
                };
            }
            a as i128 * b as i128
        };
        let c = [
            m(self.min, o.min),
            m(self.min, o.max),
            m(self.max, o.min),
            m(self.max, o.max),
        ];
        IntBound {
            min: clamp(*c.iter().min().unwrap()),
            max: clamp(*c.iter().max().unwrap()),
        }
    }
    fn corners(self, o: IntBound, f: fn(i64, i64) -> i64) -> IntBound {
        let c = [
            f(self.min, o.min),
            f(self.min, o.max),
            f(self.max, o.min),
            f(self.max, o.max),
        ];
        IntBound {
            min: *c.iter().min().unwrap(),
            max: *c.iter().max().unwrap(),
        }
    }
}

impl Analyzer {
    /// The constant bounds of an integer (or bool) expression.
    pub fn const_int_bound(&self, e: &Expr) -> IntBound {
        let dt = e.dtype();
        let (tmin, tmax) = dt.int_range();
        let type_range = if dt.is_float() {
            IntBound::EVERYTHING
        } else {
            IntBound::new(tmin, tmax)
        };
        let b = match e.node() {
            ExprNode::IntImm { value, .. } => IntBound::point(*value),
            ExprNode::Var(v) => self.var_bound(v).unwrap_or(type_range),
            ExprNode::Binary { op, a, b } if dt.is_integer() && dt.is_scalar() => {
                let (x, y) = (self.const_int_bound(a), self.const_int_bound(b));
                match op {
                    BinOp::Add => x.add(y),
                    BinOp::Sub => x.add(y.neg()),
                    BinOp::Mul => x.mul(y),
                    BinOp::Min => IntBound::new(x.min.min(y.min), x.max.min(y.max)),
                    BinOp::Max => IntBound::new(x.min.max(y.min), x.max.max(y.max)),
                    BinOp::FloorDiv | BinOp::Div => {
                        if y.min > 0 || y.max < 0 {
                            let f = if *op == BinOp::FloorDiv {
                                floor_div
                            } else {
                                trunc_div
                            };
                            x.corners(y, f)
                        } else {
                            type_range
                        }
                    }
                    BinOp::FloorMod => {
                        if y.min > 0 {
                            if x.min >= 0 && x.max < y.min {
                                x
                            } else {
                                IntBound::new(0, y.max - 1)
                            }
                        } else {
                            type_range
                        }
                    }
                    BinOp::Mod => {
                        if y.min > 0 {
                            let m = y.max - 1;
                            if x.min >= 0 {
                                IntBound::new(0, m.min(x.max))
                            } else if x.max <= 0 {
                                IntBound::new((-m).max(x.min), 0)
                            } else {
                                IntBound::new(-m, m)
                            }
                        } else {
                            type_range
                        }
                    }
                }
            }
            ExprNode::Select {
                then_value,
                else_value,
                ..
            } => self
                .const_int_bound(then_value)
                .union(self.const_int_bound(else_value)),
            ExprNode::Call {
                op: Intrinsic::IfThenElse,
                args,
                ..
            } => self
                .const_int_bound(&args[1])
                .union(self.const_int_bound(&args[2])),
            ExprNode::Cast { value, .. }
                if value.dtype().is_integer() || value.dtype().is_bool() =>
            {
                // A narrowing cast wraps: the value's bound holds only when it fits the type.
                let v = self.const_int_bound(value);
                if v.min >= type_range.min && v.max <= type_range.max {
                    v
                } else {
                    type_range
                }
            }
            ExprNode::Cmp { .. } | ExprNode::And(..) | ExprNode::Or(..) | ExprNode::Not(..) => {
                IntBound::new(0, 1)
            }
            _ => type_range,
        };
        // A result outside its type's range wraps around: nothing is known then.
        if b.min >= type_range.min && b.max <= type_range.max {
            b
        } else {
            type_range
        }
    }
}
