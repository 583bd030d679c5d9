//! Unrolling: a loop of kind `Unrolled` with a constant extent becomes the sequence of its
//! bodies, each with the loop variable replaced by its value. Done in the IR (as TVM
//! does) rather than left to the C compiler, so that the accesses to small local
//! buffers have constant offsets early enough for the compiler to keep them in
//! registers.

use crate::arith::simplify_stmt;
use crate::expr::Expr;
use crate::stmt::{ForKind, Stmt, StmtNode};
use crate::visit::{mutate_stmt_children, substitute_stmt, ExprMutator, StmtMutator};
use std::collections::HashMap;

/// Loops with more iterations than this stay loops (marked for the compiler to unroll).
pub const MAX_UNROLL: i64 = 64;

/// Unrolls every `Unrolled` loop with a constant extent of at most [`MAX_UNROLL`].
pub fn unroll_loops(s: &Stmt) -> Stmt {
    simplify_stmt(&Unroller.mutate_stmt(s))
}

struct Unroller;

impl ExprMutator for Unroller {}

impl StmtMutator for Unroller {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let s = mutate_stmt_children(self, s);
        let StmtNode::For {
            var,
            min,
            extent,
            kind: ForKind::Unrolled,
            body,
        } = s.node()
        else {
            return s;
        };
        let Some(n) = extent.as_int().filter(|n| *n <= MAX_UNROLL) else {
            return s;
        };
        let copies = (0..n)
            .map(|i| {
                let value = if min.is_const_int(0) {
                    Expr::int_of(var.dtype(), i)
                } else {
                    min + i
                };
                substitute_stmt(body, &HashMap::from([(var.clone(), value)]))
            })
            .collect();
        Stmt::seq(copies)
    }
}
