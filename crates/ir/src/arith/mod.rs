//! Integer arithmetic: bound analysis, modular sets, and the simplifier.
//!
//! An [`Analyzer`] holds what is known about variables (their constant ranges) and
//! answers questions about expressions with it: bounds, divisibility, provability, and
//! simplified forms.

mod bound;
mod linear;
mod modular;
mod simplify;

pub use bound::{IntBound, NEG_INF, POS_INF};
pub use modular::ModularSet;
pub use simplify::simplify_stmt;
pub(crate) use simplify::wrap_int;

use crate::expr::{Expr, Var};
use std::collections::HashMap;

/// Known facts about variables, and the analyses that use them.
#[derive(Clone, Debug, Default)]
pub struct Analyzer {
    bounds: HashMap<Var, IntBound>,
}

impl Analyzer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `v` lies in `[min, max]` (inclusive), replacing what was known.
    pub fn bind_bound(&mut self, v: &Var, bound: IntBound) {
        self.bounds.insert(v.clone(), bound);
    }

    /// Records that `v` iterates over `[min, min + extent)`, using the constant bounds of
    /// `min` and `extent`.
    pub fn bind_range(&mut self, v: &Var, min: &Expr, extent: &Expr) {
        let lo = self.const_int_bound(min);
        let ext = self.const_int_bound(extent);
        let hi = if lo.max == POS_INF || ext.max == POS_INF {
            POS_INF
        } else {
            lo.max.saturating_add(ext.max).saturating_sub(1)
        };
        self.bind_bound(v, IntBound::new(lo.min, hi));
    }

    /// Forgets what was known about `v`.
    pub fn unbind(&mut self, v: &Var) {
        self.bounds.remove(v);
    }

    pub fn var_bound(&self, v: &Var) -> Option<IntBound> {
        self.bounds.get(v).copied()
    }

    /// Whether the boolean `cond` is true for every value of the variables.
    pub fn can_prove(&self, cond: &Expr) -> bool {
        self.simplify(cond).as_int() == Some(1)
    }

    /// Whether `a == b` for every value of the variables.
    pub fn can_prove_equal(&self, a: &Expr, b: &Expr) -> bool {
        self.simplify(&(a - b)).is_const_int(0)
    }
}

/// Simplifies `e` with nothing known about its variables.
pub fn simplify(e: &Expr) -> Expr {
    Analyzer::new().simplify(e)
}
