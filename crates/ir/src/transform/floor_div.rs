//! Floor division of a non-negative integer by a positive one is C's truncating
//! division: `floordiv(a, b)` becomes `a / b` and `floormod(a, b)` becomes `a % b`
//! wherever the loop and let variables' ranges prove `a >= 0` and `b > 0` (as TVM's C
//! code generators decide with their analyzer). The printed helpers for the general
//! case branch on the signs; inside an inner loop those branches split the loop body
//! into blocks, which keeps the C compiler from fusing multiplies and adds (measured:
//! a Winograd batched GEMM whose row index was `floordiv(fused, 168)` ran at 6 GFLOPS
//! with the helpers).

use crate::arith::Analyzer;
use crate::expr::{BinOp, Expr, ExprNode};
use crate::stmt::{Stmt, StmtNode};
use crate::visit::{mutate_expr_children, mutate_stmt_children, ExprMutator, StmtMutator};

/// Rewrites the floor divisions and modulos of `s` that equal their truncating forms.
pub fn lower_floor_div(s: &Stmt) -> Stmt {
    FloorDiv {
        an: Analyzer::new(),
    }
    .mutate_stmt(s)
}

struct FloorDiv {
    an: Analyzer,
}

impl FloorDiv {
    fn non_negative(&self, e: &Expr) -> bool {
        self.an.const_int_bound(e).min >= 0
    }
}

impl ExprMutator for FloorDiv {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        let e = mutate_expr_children(self, e);
        let ExprNode::Binary { op, a, b } = e.node() else {
            return e;
        };
        let scalar_int = e.dtype().is_scalar() && (e.dtype().is_int() || e.dtype().is_uint());
        let truncating = match op {
            BinOp::FloorDiv => BinOp::Div,
            BinOp::FloorMod => BinOp::Mod,
            _ => return e,
        };
        if scalar_int && self.non_negative(a) && self.an.const_int_bound(b).min > 0 {
            Expr::binary(truncating, a.clone(), b.clone())
        } else {
            e
        }
    }
}

impl StmtMutator for FloorDiv {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.node() {
            StmtNode::For {
                var, min, extent, ..
            } => {
                if self.an.const_int_bound(extent).max <= 0 {
                    // never runs: an empty range would bound nothing soundly
                    return s.clone();
                }
                self.an.bind_range(var, min, extent);
                let out = mutate_stmt_children(self, s);
                self.an.unbind(var);
                out
            }
            StmtNode::Let { var, value, .. } => {
                if value.dtype().is_scalar() && value.dtype().is_int() {
                    let b = self.an.const_int_bound(value);
                    self.an.bind_bound(var, b);
                }
                let out = mutate_stmt_children(self, s);
                self.an.unbind(var);
                out
            }
            _ => mutate_stmt_children(self, s),
        }
    }
}
