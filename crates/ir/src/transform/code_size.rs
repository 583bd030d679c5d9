//! How much code a function body becomes once its unrolled loops are expanded: the
//! number of IR nodes (statements and expressions) after [`auto_unroll`] marks loops,
//! with every constant-extent `Unrolled` loop counted as that many copies of its body.
//!
//! This is what the C compiler is handed (the IR unrolls loops of up to
//! [`MAX_UNROLL`](super::MAX_UNROLL) iterations itself and asks the compiler to unroll
//! longer ones), computed without expanding anything. The auto-scheduler uses it to
//! drop programs whose code is too large before they cost a measurement: such programs
//! take seconds to compile (or hit the build timeout) and are slow when they run.

use super::auto_unroll;
use crate::expr::{Expr, ExprNode};
use crate::stmt::{ForKind, Stmt, StmtNode};

/// The expanded size of `body`: its IR nodes, with the loops that `auto_unroll` pragmas
/// and `Unrolled` loops ask to unroll counted once per iteration. Saturates at
/// `u64::MAX`.
pub fn expanded_size(body: &Stmt) -> u64 {
    stmt_size(&auto_unroll(body))
}

/// The sum of `parts`, saturating.
fn total(parts: impl IntoIterator<Item = u64>) -> u64 {
    parts.into_iter().fold(0, u64::saturating_add)
}

fn stmt_size(s: &Stmt) -> u64 {
    match s.node() {
        StmtNode::For {
            min,
            extent,
            kind,
            body,
            ..
        } => {
            let inner = stmt_size(body);
            match (kind, extent.as_int()) {
                (ForKind::Unrolled, Some(n)) => inner.saturating_mul(n.max(0) as u64),
                _ => total([1, expr_size(min), expr_size(extent), inner]),
            }
        }
        StmtNode::Store { indices, value, .. } => total(
            [1, expr_size(value)]
                .into_iter()
                .chain(indices.iter().map(expr_size)),
        ),
        StmtNode::Allocate { body, .. } => total([1, stmt_size(body)]),
        StmtNode::IfThenElse {
            cond,
            then_case,
            else_case,
        } => total([
            1,
            expr_size(cond),
            stmt_size(then_case),
            else_case.as_ref().map_or(0, stmt_size),
        ]),
        StmtNode::Seq(stmts) => total(stmts.iter().map(stmt_size)),
        StmtNode::Attr { body, .. } => stmt_size(body),
        StmtNode::Let { value, body, .. } => total([1, expr_size(value), stmt_size(body)]),
        StmtNode::Evaluate(e) => total([1, expr_size(e)]),
        StmtNode::StorageSync(_) => 1,
    }
}

/// Expressions are trees here (the C is printed from them as trees), so a node count
/// cannot overflow before the statements multiplying it do.
fn expr_size(e: &Expr) -> u64 {
    let children: u64 = match e.node() {
        ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => 0,
        ExprNode::Binary { a, b, .. }
        | ExprNode::Cmp { a, b, .. }
        | ExprNode::And(a, b)
        | ExprNode::Or(a, b) => expr_size(a) + expr_size(b),
        ExprNode::Not(a)
        | ExprNode::Cast { value: a, .. }
        | ExprNode::Broadcast { value: a, .. } => expr_size(a),
        ExprNode::Select {
            cond,
            then_value,
            else_value,
        } => expr_size(cond) + expr_size(then_value) + expr_size(else_value),
        ExprNode::Load { indices, .. } => indices.iter().map(expr_size).sum(),
        ExprNode::Ramp { base, stride, .. } => expr_size(base) + expr_size(stride),
        ExprNode::Call { args, .. } => args.iter().map(expr_size).sum(),
    };
    1 + children
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Buffer;
    use crate::dtype::DataType;
    use crate::expr::Var;
    use crate::transform::unroll_loops;

    /// `O[i] = O[i] + 1.0` in a loop of `kind` over `n`.
    fn loop_of(kind: ForKind, n: i64) -> Stmt {
        let o = Buffer::global("O", DataType::float32(), &[256]);
        let i = Var::int("i");
        let value = Expr::load(&o, vec![i.to_expr()]) + Expr::float(1.0);
        let store = Stmt::store(&o, vec![i.to_expr()], value);
        Stmt::for_loop(i, Expr::int(0), Expr::int(n), kind, store)
    }

    /// The node count of `s` once `unroll_loops` has expanded it.
    fn counted_after_unrolling(s: &Stmt) -> u64 {
        stmt_size(&unroll_loops(s))
    }

    #[test]
    fn an_unrolled_loop_counts_its_body_once_per_iteration() {
        let serial = expanded_size(&loop_of(ForKind::Serial, 16));
        let unrolled = expanded_size(&loop_of(ForKind::Unrolled, 16));
        // serial: the loop, its min and extent, and a body of 6 nodes (store, index,
        // add, load, its index, the constant)
        assert_eq!(serial, 3 + 6);
        assert_eq!(unrolled, 16 * 6);
        // the expansion really is that large (the index is a constant in each copy)
        assert_eq!(
            counted_after_unrolling(&loop_of(ForKind::Unrolled, 16)),
            unrolled
        );
    }

    #[test]
    fn the_auto_unroll_pragma_counts_the_loops_it_unrolls() {
        let pragma = |step: i64, n: i64| {
            Stmt::attr(
                crate::transform::AUTO_UNROLL_PRAGMA,
                Expr::int(step),
                loop_of(ForKind::Serial, n),
            )
        };
        // 64 stores are within a step limit of 512: unrolled
        assert_eq!(expanded_size(&pragma(512, 64)), 64 * 6);
        // but not within 16: the loop stays
        assert_eq!(expanded_size(&pragma(16, 64)), 3 + 6);
    }

    #[test]
    fn a_huge_unrolled_nest_saturates_instead_of_overflowing() {
        let mut s = loop_of(ForKind::Unrolled, 1 << 20);
        for k in 0..5 {
            s = Stmt::for_loop(
                Var::int(format!("j{k}")),
                Expr::int(0),
                Expr::int(1 << 20),
                ForKind::Unrolled,
                s,
            );
        }
        assert_eq!(expanded_size(&s), u64::MAX);
        // a serial loop around it adds to a saturated count
        let outer = Stmt::for_loop(
            Var::int("o"),
            Expr::int(0),
            Expr::int(2),
            ForKind::Serial,
            s,
        );
        assert_eq!(expanded_size(&outer), u64::MAX);
    }
}
