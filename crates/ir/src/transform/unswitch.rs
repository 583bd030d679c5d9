//! Guards that a serial loop does not change are decided once, before it: the loop is
//! emitted twice, `if (all guards hold) { the loop without them } else { the loop }`
//! (TVM's `LoopPartition` and Halide's loop partitioning make the same steady state).
//!
//! A register tile of a row count that does not divide its axis (a conv over 1,599
//! output columns in tiles of 7) guards every accumulator update with
//! `row < extent`; after unrolling, those guards sit inside the reduction loops although
//! only the tile's position decides them. The C compiler then keeps the accumulators in
//! memory, because each update may not happen: the 3,199-wide 1-D conv of wav2vec2's
//! feature extractor ran at 34 GFLOPS on one AVX2 core, 58 with this pass. With the
//! guards decided once per tile, every full tile runs the unguarded loop and only the
//! last one the guarded copy.
//!
//! A guard is hoisted when its condition reads no memory and calls nothing, and no
//! variable it uses is bound inside the loop. A loop holding a barrier (`StorageSync`)
//! is left alone: threads that took different copies would wait at different barriers.
//! A loop whose body is larger than [`MAX_BODY_NODES`] is left alone too (the copy
//! doubles its code).

use crate::expr::{Expr, ExprNode, Var};
use crate::stmt::{ForKind, Stmt, StmtNode};
use crate::visit::{
    collect_vars, mutate_stmt_children, walk_expr, walk_stmt, ExprMutator, ExprVisitor,
    StmtMutator, StmtVisitor,
};
use std::collections::HashSet;

/// The largest loop body (IR nodes, as written: unrolled loops already expanded) that is
/// copied.
pub const MAX_BODY_NODES: usize = 20_000;

/// Unswitches the serial loops of `s` on the guards they do not change.
pub fn unswitch_guards(s: &Stmt) -> Stmt {
    Unswitch.mutate_stmt(s)
}

struct Unswitch;

impl ExprMutator for Unswitch {}

impl StmtMutator for Unswitch {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let StmtNode::For {
            var,
            min,
            extent,
            kind: ForKind::Serial,
            body,
        } = s.node()
        else {
            return mutate_stmt_children(self, s);
        };
        let mut scan = Scan {
            bound: HashSet::from([var.clone()]),
            guards: Vec::new(),
            barrier: false,
            nodes: 0,
        };
        scan.collect_bound(body);
        scan.visit_stmt(body);
        if scan.guards.is_empty() || scan.barrier || scan.nodes > MAX_BODY_NODES {
            return mutate_stmt_children(self, s);
        }
        let invariant: Vec<Expr> = scan
            .guards
            .into_iter()
            .filter(|c| {
                collect_vars(c)
                    .iter()
                    .all(|v: &Var| !scan.bound.contains(v))
            })
            .collect();
        if invariant.is_empty() {
            return mutate_stmt_children(self, s);
        }
        let fast_body = Drop {
            conds: invariant.clone(),
        }
        .mutate_stmt(body);
        let fast = Stmt::for_loop(
            var.clone(),
            min.clone(),
            extent.clone(),
            ForKind::Serial,
            fast_body,
        );
        // the fast copy's inner loops may have guards of their own to decide
        let fast = mutate_stmt_children(self, &fast);
        Stmt::new(StmtNode::IfThenElse {
            cond: Expr::all(invariant),
            then_case: fast,
            else_case: Some(s.clone()),
        })
    }
}

/// What a loop body holds: the variables bound inside it, the conditions of its
/// else-less guards that read no memory (each once), whether it has a barrier, and its
/// size in statements and expressions.
struct Scan {
    bound: HashSet<Var>,
    guards: Vec<Expr>,
    barrier: bool,
    nodes: usize,
}

impl Scan {
    fn collect_bound(&mut self, s: &Stmt) {
        struct Binders<'a>(&'a mut HashSet<Var>);
        impl ExprVisitor for Binders<'_> {}
        impl StmtVisitor for Binders<'_> {
            fn visit_stmt(&mut self, s: &Stmt) {
                match s.node() {
                    StmtNode::For { var, .. } | StmtNode::Let { var, .. } => {
                        self.0.insert(var.clone());
                    }
                    _ => {}
                }
                walk_stmt(self, s)
            }
        }
        Binders(&mut self.bound).visit_stmt(s);
    }
}

/// Whether `e` only computes on variables and constants (no load, no call).
fn pure(e: &Expr) -> bool {
    struct Pure(bool);
    impl ExprVisitor for Pure {
        fn visit_expr(&mut self, e: &Expr) {
            if matches!(e.node(), ExprNode::Load { .. } | ExprNode::Call { .. }) {
                self.0 = false;
            }
            walk_expr(self, e)
        }
    }
    let mut p = Pure(true);
    p.visit_expr(e);
    p.0
}

impl ExprVisitor for Scan {
    fn visit_expr(&mut self, e: &Expr) {
        self.nodes += 1;
        walk_expr(self, e)
    }
}

impl StmtVisitor for Scan {
    fn visit_stmt(&mut self, s: &Stmt) {
        self.nodes += 1;
        match s.node() {
            StmtNode::StorageSync(_) => self.barrier = true,
            StmtNode::IfThenElse {
                cond,
                else_case: None,
                ..
            } if pure(cond) && !self.guards.contains(cond) => self.guards.push(cond.clone()),
            _ => {}
        }
        walk_stmt(self, s)
    }
}

/// Replaces each else-less guard on one of `conds` by its body.
struct Drop {
    conds: Vec<Expr>,
}

impl ExprMutator for Drop {}

impl StmtMutator for Drop {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        match s.node() {
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case: None,
            } if self.conds.contains(cond) => self.mutate_stmt(then_case),
            _ => mutate_stmt_children(self, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{run, HostBuffer};
    use crate::parser::parse_func;
    use crate::DataType;

    /// Tiles of 3 rows over 10 (the last one partial), each row guarded inside the
    /// reduction loop, and a guard the reduction loop decides.
    const TILE: &str = "func f(a: float32[12], b: float32[8]) {
  for (t, 0, 4) {
    for (k, 0, 8) {
      if ((((t*3) + 0) < 10)) {
        a[((t*3) + 0)] = (a[((t*3) + 0)] + b[k])
      }
      if ((((t*3) + 2) < 10)) {
        a[((t*3) + 2)] = (a[((t*3) + 2)] + b[k])
      }
      if ((k < 5)) {
        a[11] = (a[11] + 1f)
      }
    }
  }
}
";

    #[test]
    fn invariant_guards_are_decided_before_the_loop() {
        let f = parse_func(TILE).unwrap();
        let out = unswitch_guards(&f.body);
        let text = out.to_string();
        // the outer loop binds `t`: nothing hoists above it; the inner loop is copied
        let StmtNode::For { body, .. } = out.node() else {
            panic!("the outer loop stays a loop:\n{text}")
        };
        let StmtNode::IfThenElse {
            cond,
            then_case,
            else_case: Some(_),
        } = body.node()
        else {
            panic!("the inner loop is unswitched:\n{text}")
        };
        assert_eq!(cond.to_string().matches("< 10").count(), 2, "{text}");
        // the fast copy keeps only the guard on `k`
        let fast = then_case.to_string();
        assert_eq!(fast.matches("if (").count(), 1, "{fast}");
        assert!(fast.contains("(k < 5)"), "{fast}");
    }

    #[test]
    fn both_copies_compute_what_the_loop_did() {
        let f = parse_func(TILE).unwrap();
        let mut g = f.clone();
        g.body = unswitch_guards(&f.body);
        let inputs = || {
            let b: Vec<f64> = (0..8).map(|i| i as f64 + 1.0).collect();
            vec![
                HostBuffer::zeros(DataType::float32(), &[12]),
                HostBuffer::from_f64(DataType::float32(), &[8], &b),
            ]
        };
        let (mut want, mut got) = (inputs(), inputs());
        run(&f, &mut want).unwrap();
        run(&g, &mut got).unwrap();
        assert_eq!(want[0].to_f64(), got[0].to_f64());
        // rows 10 and 11 stay untouched but for the counter
        assert_eq!(got[0].to_f64()[10], 0.0);
        assert_eq!(got[0].to_f64()[11], 20.0);
    }

    #[test]
    fn loops_with_barriers_or_guards_on_memory_stay() {
        let f = parse_func(
            "func f(a: float32[4]) {
  for (k, 0, 4) {
    if ((a[0] < 1f)) {
      a[k] = 1f
    }
  }
}
",
        )
        .unwrap();
        assert_eq!(unswitch_guards(&f.body).to_string(), f.body.to_string());
    }
}
