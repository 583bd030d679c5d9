//! The `auto_unroll_max_step` pragma (TVM's `UnrollLoop` with `auto_max_step`): inside
//! `pragma_auto_unroll_max_step = N`, a serial loop of constant extent is marked unrolled
//! when no ordinary (non-unrolled) loop is nested in it, at most [`AUTO_MAX_DEPTH`]
//! unrolled loops are, and its extent times the number of stores its body executes
//! stays within `N`. Vectorized loops count as one vector store (they are vectorized
//! before unrolling, as in TVM). [`unroll_loops`](super::unroll_loops) then expands the
//! marked loops.

use crate::stmt::{ForKind, Stmt, StmtNode};

/// At most this many nested loops are unrolled (TVM's `auto_max_depth`).
pub const AUTO_MAX_DEPTH: usize = 8;

/// The pragma key as lowering writes it.
pub const AUTO_UNROLL_PRAGMA: &str = "pragma_auto_unroll_max_step";

/// Marks the loops that `auto_unroll_max_step` pragmas ask to unroll.
pub fn auto_unroll(s: &Stmt) -> Stmt {
    walk(s, None).0
}

/// What a statement executes: stores per run, whether an ordinary loop is inside it,
/// and how deep the unrolled loops inside it nest.
#[derive(Clone, Copy, Default)]
struct Count {
    steps: i64,
    normal_loop: bool,
    unroll_depth: usize,
}

fn walk(s: &Stmt, max_step: Option<i64>) -> (Stmt, Count) {
    match s.node() {
        StmtNode::Attr { key, value, body } => {
            let inner = if key == AUTO_UNROLL_PRAGMA {
                value.as_int().or(max_step)
            } else {
                max_step
            };
            let (b, c) = walk(body, inner);
            (Stmt::attr(key.clone(), value.clone(), b), c)
        }
        StmtNode::For {
            var,
            min,
            extent,
            kind,
            body,
        } => {
            let (b, c) = walk(body, max_step);
            let n = extent.as_int().filter(|n| *n >= 0);
            let (kind, count) = match (kind, max_step, n) {
                (ForKind::Vectorized, _, _) => (*kind, c),
                (ForKind::Serial, Some(m), Some(n))
                    if !c.normal_loop
                        && c.unroll_depth < AUTO_MAX_DEPTH
                        && n.saturating_mul(c.steps.max(1)) <= m =>
                {
                    (
                        ForKind::Unrolled,
                        Count {
                            steps: n * c.steps,
                            normal_loop: false,
                            unroll_depth: c.unroll_depth + 1,
                        },
                    )
                }
                (ForKind::Unrolled, _, Some(n)) => (
                    ForKind::Unrolled,
                    Count {
                        steps: n.saturating_mul(c.steps),
                        normal_loop: c.normal_loop,
                        unroll_depth: c.unroll_depth + 1,
                    },
                ),
                _ => (
                    *kind,
                    Count {
                        normal_loop: true,
                        ..c
                    },
                ),
            };
            let out = Stmt::for_loop(var.clone(), min.clone(), extent.clone(), kind, b);
            (out, count)
        }
        StmtNode::Seq(items) => {
            let mut total = Count::default();
            let mut out = Vec::with_capacity(items.len());
            for it in items {
                let (b, c) = walk(it, max_step);
                total.steps = total.steps.saturating_add(c.steps);
                total.normal_loop |= c.normal_loop;
                total.unroll_depth = total.unroll_depth.max(c.unroll_depth);
                out.push(b);
            }
            (Stmt::seq(out), total)
        }
        StmtNode::Store { .. } => (
            s.clone(),
            Count {
                steps: 1,
                ..Count::default()
            },
        ),
        StmtNode::Allocate { buffer, body } => {
            let (b, c) = walk(body, max_step);
            (Stmt::allocate(buffer.clone(), b), c)
        }
        StmtNode::Let { var, value, body } => {
            let (b, c) = walk(body, max_step);
            (Stmt::let_stmt(var.clone(), value.clone(), b), c)
        }
        StmtNode::IfThenElse {
            cond,
            then_case,
            else_case,
        } => {
            let (t, mut c) = walk(then_case, max_step);
            let e = else_case.as_ref().map(|e| {
                let (e, ce) = walk(e, max_step);
                c.steps = c.steps.saturating_add(ce.steps);
                c.normal_loop |= ce.normal_loop;
                c.unroll_depth = c.unroll_depth.max(ce.unroll_depth);
                e
            });
            (
                Stmt::new(StmtNode::IfThenElse {
                    cond: cond.clone(),
                    then_case: t,
                    else_case: e,
                }),
                c,
            )
        }
        _ => (s.clone(), Count::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Buffer;
    use crate::dtype::DataType;
    use crate::expr::{Expr, Var};

    fn kinds(s: &Stmt, out: &mut Vec<ForKind>) {
        match s.node() {
            StmtNode::For { kind, body, .. } => {
                out.push(*kind);
                kinds(body, out);
            }
            StmtNode::Attr { body, .. } => kinds(body, out),
            StmtNode::Seq(v) => v.iter().for_each(|x| kinds(x, out)),
            _ => {}
        }
    }

    /// for i in 0..a { for j in 0..b { for k in 0..c (kind) { O[0] = 1 } } }
    fn nest(a: i64, b: i64, c: i64, inner: ForKind, max_step: Option<i64>) -> Stmt {
        let o = Buffer::global("O", DataType::float32(), &[1]);
        let st = Stmt::store(
            &o,
            vec![Expr::int(0)],
            Expr::float_of(DataType::float32(), 1.0),
        );
        let l = |n: &str, e: i64, k: ForKind, b: Stmt| {
            Stmt::for_loop(Var::int(n), Expr::int(0), Expr::int(e), k, b)
        };
        let s = l(
            "i",
            a,
            ForKind::Serial,
            l("j", b, ForKind::Serial, l("k", c, inner, st)),
        );
        match max_step {
            Some(m) => Stmt::attr(AUTO_UNROLL_PRAGMA, Expr::int(m), s),
            None => s,
        }
    }

    fn after(s: &Stmt) -> Vec<ForKind> {
        let mut v = Vec::new();
        kinds(&auto_unroll(s), &mut v);
        v
    }

    #[test]
    fn loops_unroll_from_the_inside_while_the_steps_fit() {
        use ForKind::*;
        // k: 4 steps, j: 16, i: 64 > 16
        assert_eq!(
            after(&nest(4, 4, 4, Serial, Some(16))),
            [Serial, Unrolled, Unrolled]
        );
        assert_eq!(
            after(&nest(4, 4, 4, Serial, Some(64))),
            [Unrolled, Unrolled, Unrolled]
        );
        assert_eq!(
            after(&nest(4, 4, 4, Serial, Some(0))),
            [Serial, Serial, Serial]
        );
        // no pragma, nothing changes
        assert_eq!(
            after(&nest(4, 4, 4, Serial, None)),
            [Serial, Serial, Serial]
        );
        // a vectorized inner loop is one vector store
        assert_eq!(
            after(&nest(4, 4, 8, Vectorized, Some(16))),
            [Unrolled, Unrolled, Vectorized]
        );
        // an ordinary loop inside stops every loop around it
        assert_eq!(
            after(&nest(2, 2, 100, Serial, Some(64))),
            [Serial, Serial, Serial]
        );
        assert_eq!(
            after(&nest(2, 2, 4, Parallel, Some(64))),
            [Serial, Serial, Parallel]
        );
    }
}
