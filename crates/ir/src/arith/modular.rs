//! Modular sets: every value of `e` is `coeff * k + base` for some integer `k`.
//! `coeff == 0` means `e` is the constant `base`; `coeff == 1` says nothing.

use super::Analyzer;
use crate::expr::{BinOp, Expr, ExprNode};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModularSet {
    pub coeff: i64,
    pub base: i64,
}

pub(crate) fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    // Only gcd(i64::MIN, 0 or i64::MIN) = 2^63 does not fit; 2^62 still divides both.
    if a > i64::MAX as u64 {
        1 << 62
    } else {
        a as i64
    }
}

impl ModularSet {
    pub const EVERYTHING: ModularSet = ModularSet { coeff: 1, base: 0 };

    pub fn new(coeff: i64, base: i64) -> Self {
        let coeff = coeff.checked_abs().unwrap_or(1);
        let base = if coeff != 0 {
            base.rem_euclid(coeff)
        } else {
            base
        };
        ModularSet { coeff, base }
    }
    /// Whether every value is divisible by `d`.
    pub fn divisible_by(&self, d: i64) -> bool {
        d != 0 && self.coeff % d == 0 && self.base % d == 0
    }
}

impl Analyzer {
    /// The modular set of an integer expression.
    pub fn modular_set(&self, e: &Expr) -> ModularSet {
        self.modular(e).unwrap_or(ModularSet::EVERYTHING)
    }

    fn modular(&self, e: &Expr) -> Option<ModularSet> {
        if !e.dtype().is_integer() || !e.dtype().is_scalar() {
            return None;
        }
        Some(match e.node() {
            ExprNode::IntImm { value, .. } => ModularSet::new(0, *value),
            ExprNode::Var(v) => match self.var_bound(v) {
                Some(b) if b.is_point() => ModularSet::new(0, b.min),
                _ => ModularSet::EVERYTHING,
            },
            ExprNode::Binary { op, a, b } => {
                let (x, y) = (self.modular_set(a), self.modular_set(b));
                match op {
                    BinOp::Add => {
                        ModularSet::new(gcd(x.coeff, y.coeff), x.base.checked_add(y.base)?)
                    }
                    BinOp::Sub => {
                        ModularSet::new(gcd(x.coeff, y.coeff), x.base.checked_sub(y.base)?)
                    }
                    BinOp::Mul => {
                        let c = gcd(
                            gcd(x.coeff.checked_mul(y.coeff)?, x.coeff.checked_mul(y.base)?),
                            y.coeff.checked_mul(x.base)?,
                        );
                        ModularSet::new(c, x.base.checked_mul(y.base)?)
                    }
                    BinOp::FloorDiv => {
                        let c = b.as_int()?;
                        if c > 0 && x.coeff % c == 0 {
                            ModularSet::new(x.coeff / c, x.base.div_euclid(c))
                        } else {
                            return None;
                        }
                    }
                    BinOp::FloorMod => {
                        let c = b.as_int()?;
                        if c <= 0 {
                            return None;
                        }
                        // A constant (coeff 0) or a multiple of c leaves one residue.
                        if x.coeff % c == 0 {
                            ModularSet::new(0, x.base.rem_euclid(c))
                        } else {
                            ModularSet::new(gcd(x.coeff, c), x.base)
                        }
                    }
                    _ => return None,
                }
            }
            _ => return None,
        })
    }
}
