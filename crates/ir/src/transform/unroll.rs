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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Buffer;
    use crate::dtype::DataType;
    use crate::expr::Var;
    use crate::interp::{run, HostBuffer};
    use crate::stmt::PrimFunc;

    fn unrolled(v: &Var, min: Expr, extent: i64, body: Stmt) -> Stmt {
        Stmt::for_loop(v.clone(), min, Expr::int(extent), ForKind::Unrolled, body)
    }

    fn run_on(body: &Stmt, o: &Buffer) -> Vec<f64> {
        let mut args = [HostBuffer::zeros(DataType::float32(), &[300])];
        run(
            &PrimFunc::new("f", vec![o.clone()], body.clone()),
            &mut args,
        )
        .unwrap();
        args[0].to_f64()
    }

    #[test]
    fn nested_loops_with_non_zero_starts_unroll_completely() {
        let o = Buffer::global("O", DataType::float32(), &[300]);
        let (i, j, n) = (Var::int("i"), Var::int("j"), Var::int("n"));
        // j starts at a value that depends on the outer loop (through a let).
        let body = Stmt::let_stmt(
            n.clone(),
            Expr::int(2),
            unrolled(
                &i,
                Expr::int(3),
                5,
                unrolled(
                    &j,
                    i.to_expr() + n.to_expr(),
                    4,
                    Stmt::store(
                        &o,
                        vec![&i * 20i64 + j.to_expr()],
                        Expr::cast(DataType::float32(), &j * 3i64 - i.to_expr()),
                    ),
                ),
            ),
        );
        let out = unroll_loops(&body);
        assert!(!out.to_string().contains("for ("), "{out}");
        assert_eq!(run_on(&out, &o), run_on(&body, &o));
    }

    #[test]
    fn long_unknown_and_empty_loops() {
        let o = Buffer::global("O", DataType::float32(), &[300]);
        let (k, e, n) = (Var::int("k"), Var::int("e"), Var::int("n"));
        let store = |v: &Var| Stmt::store(&o, vec![v.to_expr()], Expr::float(1.0));
        let long = unrolled(&k, Expr::int(100), MAX_UNROLL + 1, store(&k));
        let out = unroll_loops(&long);
        assert!(
            matches!(
                out.node(),
                StmtNode::For {
                    kind: ForKind::Unrolled,
                    ..
                }
            ),
            "{out}"
        );
        assert_eq!(run_on(&out, &o), run_on(&long, &o));
        // Exactly MAX_UNROLL iterations unroll.
        let max = unrolled(&k, Expr::int(7), MAX_UNROLL, store(&k));
        let out = unroll_loops(&max);
        assert!(matches!(out.node(), StmtNode::Seq(v) if v.len() == MAX_UNROLL as usize));
        assert_eq!(run_on(&out, &o), run_on(&max, &o));
        // An extent that is not a constant stays a loop.
        let unknown = Stmt::let_stmt(
            n.clone(),
            Expr::int(3),
            Stmt::for_loop(
                e.clone(),
                Expr::int(0),
                n.to_expr(),
                ForKind::Unrolled,
                store(&e),
            ),
        );
        let out = unroll_loops(&unknown);
        assert!(out.to_string().contains("unroll"), "{out}");
        assert_eq!(run_on(&out, &o), run_on(&unknown, &o));
        // No iterations: nothing.
        let empty = unrolled(&e, Expr::int(5), 0, store(&e));
        assert!(unroll_loops(&empty).is_no_op());
    }
}
