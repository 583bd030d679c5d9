//! How much code a function body becomes once its unrolled loops are expanded: the
//! number of IR nodes (statements and expressions) after [`auto_unroll`] marks loops,
//! with every constant-extent `Unrolled` loop counted as that many copies of its body.
//!
//! This is what the C compiler is handed (the IR unrolls loops of up to
//! [`MAX_UNROLL`](super::MAX_UNROLL) iterations itself and asks the compiler to unroll
//! longer ones), computed without expanding anything. The auto-scheduler uses it to
//! drop programs whose code is too large before they cost a measurement: such programs
//! take seconds to compile (or hit the build timeout) and are slow when they run.
//!
//! A `select` whose condition an unrolled loop's index decides (Winograd's transforms
//! pick their row's terms so) keeps one branch in each copy, as unrolling and
//! simplification leave it: such a loop is counted copy by copy, its index fixed, each
//! `select` counting only the branch taken (up to [`PER_COPY_LIMIT`] copies in all;
//! beyond, every branch counts, an overestimate).

use super::auto_unroll;
use crate::arith::{Analyzer, IntBound};
use crate::expr::{Expr, ExprNode, Var};
use crate::stmt::{ForKind, Stmt, StmtNode};
use crate::visit::{uses_var, walk_expr, ExprVisitor, StmtVisitor};

/// The most loop copies (the product of the extents of nested unrolled loops) counted one
/// by one.
pub const PER_COPY_LIMIT: u64 = 4096;

/// The expanded size of `body`: its IR nodes, with the loops that `auto_unroll` pragmas
/// and `Unrolled` loops ask to unroll counted once per iteration. Saturates at
/// `u64::MAX`.
pub fn expanded_size(body: &Stmt) -> u64 {
    Sizer {
        an: Analyzer::new(),
        copies: 1,
    }
    .stmt_size(&auto_unroll(body))
}

/// The sum of `parts`, saturating.
fn total(parts: impl IntoIterator<Item = u64>) -> u64 {
    parts.into_iter().fold(0, u64::saturating_add)
}

/// Whether some `select` of `s` has a condition that reads `v`.
fn selects_on(s: &Stmt, v: &Var) -> bool {
    struct Finder<'a> {
        v: &'a Var,
        found: bool,
    }
    impl ExprVisitor for Finder<'_> {
        fn visit_expr(&mut self, e: &Expr) {
            if let ExprNode::Select { cond, .. } = e.node() {
                self.found |= uses_var(cond, &|u| u == self.v);
            }
            if !self.found {
                walk_expr(self, e);
            }
        }
    }
    impl StmtVisitor for Finder<'_> {}
    let mut f = Finder { v, found: false };
    f.visit_stmt(s);
    f.found
}

struct Sizer {
    /// The enclosing loops' ranges; an index counted copy by copy fixed to its value.
    an: Analyzer,
    /// The copies being counted one by one (the product of their loops' extents).
    copies: u64,
}

impl Sizer {
    fn stmt_size(&mut self, s: &Stmt) -> u64 {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => {
                let n = extent.as_int().map(|n| n.max(0) as u64);
                let per_copy = n.filter(|n| {
                    *kind == ForKind::Unrolled
                        && *n > 0
                        && self.copies.saturating_mul(*n) <= PER_COPY_LIMIT
                        && min.as_int().is_some()
                        && selects_on(body, var)
                });
                if let (Some(n), Some(lo)) = (per_copy, min.as_int()) {
                    self.copies *= n;
                    let mut sum = 0u64;
                    for k in 0..n as i64 {
                        self.an.bind_bound(var, IntBound::new(lo + k, lo + k));
                        sum = sum.saturating_add(self.stmt_size(body));
                    }
                    self.an.unbind(var);
                    self.copies /= n;
                    return sum;
                }
                // (a loop that may run zero times bounds nothing soundly: left unknown)
                let runs = self.an.const_int_bound(extent).min > 0;
                if runs {
                    self.an.bind_range(var, min, extent);
                }
                let inner = self.stmt_size(body);
                self.an.unbind(var);
                match (kind, n) {
                    (ForKind::Unrolled, Some(n)) => inner.saturating_mul(n),
                    _ => total([1, self.expr_size(min), self.expr_size(extent), inner]),
                }
            }
            StmtNode::Store { indices, value, .. } => total(
                [1, self.expr_size(value)]
                    .into_iter()
                    .chain(indices.iter().map(|i| self.expr_size(i))),
            ),
            StmtNode::Allocate { body, .. } => total([1, self.stmt_size(body)]),
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
                let c = self.expr_size(cond);
                let t = self.stmt_size(then_case);
                let e = else_case.as_ref().map_or(0, |e| self.stmt_size(e));
                total([1, c, t, e])
            }
            StmtNode::Seq(stmts) => total(stmts.iter().map(|x| self.stmt_size(x))),
            StmtNode::Attr { body, .. } => self.stmt_size(body),
            StmtNode::Let { value, body, .. } => {
                total([1, self.expr_size(value), self.stmt_size(body)])
            }
            StmtNode::Evaluate(e) => total([1, self.expr_size(e)]),
            StmtNode::StorageSync(_) => 1,
        }
    }

    /// Expressions are trees here (the C is printed from them as trees), so a node count
    /// cannot overflow before the statements multiplying it do.
    fn expr_size(&self, e: &Expr) -> u64 {
        let children: u64 = match e.node() {
            ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => 0,
            ExprNode::Binary { a, b, .. }
            | ExprNode::Cmp { a, b, .. }
            | ExprNode::And(a, b)
            | ExprNode::Or(a, b) => self.expr_size(a) + self.expr_size(b),
            ExprNode::Not(a)
            | ExprNode::Cast { value: a, .. }
            | ExprNode::Broadcast { value: a, .. } => self.expr_size(a),
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => {
                if self.copies > 1 {
                    match self.an.simplify(cond).as_int() {
                        Some(0) => return self.expr_size(else_value),
                        Some(_) => return self.expr_size(then_value),
                        None => {}
                    }
                }
                self.expr_size(cond) + self.expr_size(then_value) + self.expr_size(else_value)
            }
            ExprNode::Load { indices, .. } => indices.iter().map(|i| self.expr_size(i)).sum(),
            ExprNode::Ramp { base, stride, .. } => self.expr_size(base) + self.expr_size(stride),
            ExprNode::Call { args, .. } => args.iter().map(|a| self.expr_size(a)).sum(),
        };
        1 + children
    }
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
        Sizer {
            an: Analyzer::new(),
            copies: 1,
        }
        .stmt_size(&unroll_loops(s))
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
    fn a_select_an_unrolled_index_decides_counts_one_branch_per_copy() {
        // O[i] = select(i == 0, O[i] + 1, select(i == 1, O[i] * 2, O[i])), i in 0..4
        let o = Buffer::global("O", DataType::float32(), &[256]);
        let i = Var::int("i");
        let at = || Expr::load(&o, vec![i.to_expr()]);
        let value = Expr::select(
            i.to_expr().eq(0),
            at() + Expr::float(1.0),
            Expr::select(i.to_expr().eq(1), at() * Expr::float(2.0), at()),
        );
        let store = Stmt::store(&o, vec![i.to_expr()], value);
        let s = Stmt::for_loop(i, Expr::int(0), Expr::int(4), ForKind::Unrolled, store);
        // each copy: the store, its index, and one branch (4, 4, 2 and 2 nodes)
        assert_eq!(expanded_size(&s), 4 * 2 + 4 + 4 + 2 + 2);
        assert_eq!(counted_after_unrolling(&s), expanded_size(&s));
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
