//! Storage synchronization of a device kernel (TVM's `ThreadSync` for `shared` memory):
//! a barrier goes where shared memory written by the block's threads is read by a later
//! statement, and at the top of a loop whose body writes shared memory that the previous
//! iteration read (the write-after-read across the back edge). Barriers already there
//! (lowering fences cache stages) are kept and end the pending writes.
//!
//! Accesses of one thread to its own element (the same indices, one of them the thread's
//! index, as a cross-thread reduction's partial results are) need no barrier; two barriers in
//! a row are one.
//!
//! A barrier must be reached by every thread of the block, so one inside a condition —
//! an `if`, or a thread loop narrower than its axis's launch extent, which runs
//! guarded — is refused, never emitted: TVM's "Cannot insert syncs inside condition".

use super::error::TransformError;
use super::split_host_device::ThreadExtents;
use crate::buffer::{Buffer, StorageScope};
use crate::expr::{Expr, ExprNode, Var};
use crate::stmt::{ForKind, Stmt, StmtNode, ThreadAxis};
use crate::visit::{mutate_stmt_children, ExprMutator, ExprVisitor, StmtMutator, StmtVisitor};
use std::collections::HashSet;

/// Inserts the barriers `body` needs and checks that none is inside a condition.
pub fn storage_sync(
    kernel: &str,
    body: &Stmt,
    launch: &ThreadExtents,
) -> Result<Stmt, TransformError> {
    let planned = Planner {
        threads: thread_vars(body),
    }
    .mutate_stmt(body);
    check(kernel, &planned, launch, None)?;
    Ok(planned)
}

fn is_shared_sync(s: &Stmt) -> bool {
    matches!(s.node(), StmtNode::StorageSync(StorageScope::Shared))
}

/// Whether the first thing `s` does is a shared barrier.
fn starts_with_sync(s: &Stmt) -> bool {
    match s.node() {
        StmtNode::Seq(v) => v.first().is_some_and(starts_with_sync),
        StmtNode::Allocate { body, .. }
        | StmtNode::Attr { body, .. }
        | StmtNode::Let { body, .. } => starts_with_sync(body),
        _ => is_shared_sync(s),
    }
}

/// Whether the last thing `s` does is a shared barrier.
fn ends_with_sync(s: &Stmt) -> bool {
    match s.node() {
        StmtNode::Seq(v) => v.last().is_some_and(ends_with_sync),
        StmtNode::Allocate { body, .. }
        | StmtNode::Attr { body, .. }
        | StmtNode::Let { body, .. } => ends_with_sync(body),
        _ => is_shared_sync(s),
    }
}

/// A shared-memory access: the buffer and its indices.
type Access = (Buffer, Vec<Expr>);

/// The shared-memory accesses (reads, writes) of a statement.
fn shared_accesses(s: &Stmt) -> (Vec<Access>, Vec<Access>) {
    #[derive(Default)]
    struct Acc {
        reads: Vec<Access>,
        writes: Vec<Access>,
    }
    impl ExprVisitor for Acc {
        fn visit_expr(&mut self, e: &Expr) {
            if let ExprNode::Load { buffer, indices } = e.node() {
                if buffer.scope() == StorageScope::Shared {
                    self.reads.push((buffer.clone(), indices.clone()));
                }
            }
            crate::visit::walk_expr(self, e)
        }
    }
    impl StmtVisitor for Acc {
        fn visit_stmt(&mut self, s: &Stmt) {
            if let StmtNode::Store {
                buffer, indices, ..
            } = s.node()
            {
                if buffer.scope() == StorageScope::Shared {
                    self.writes.push((buffer.clone(), indices.clone()));
                }
            }
            crate::visit::walk_stmt(self, s)
        }
    }
    let mut a = Acc::default();
    a.visit_stmt(s);
    (a.reads, a.writes)
}

/// The variables of the loops bound to `threadIdx` in `s`.
fn thread_vars(s: &Stmt) -> HashSet<Var> {
    struct Threads(HashSet<Var>);
    impl ExprVisitor for Threads {}
    impl StmtVisitor for Threads {
        fn visit_stmt(&mut self, s: &Stmt) {
            if let StmtNode::For {
                var,
                kind: ForKind::ThreadBinding(axis),
                ..
            } = s.node()
            {
                if axis.rank() == 1 && *axis != ThreadAxis::VThread {
                    self.0.insert(var.clone());
                }
            }
            crate::visit::walk_stmt(self, s)
        }
    }
    let mut t = Threads(HashSet::new());
    t.visit_stmt(s);
    t.0
}

struct Planner {
    threads: HashSet<Var>,
}

impl Planner {
    /// Whether a write and a read may touch the same element from different threads:
    /// the same buffer, unless both use the same indices and one of them is a thread's
    /// index itself (distinct threads then touch distinct elements: each reads back its
    /// own).
    fn conflict(&self, w: &Access, r: &Access) -> bool {
        if w.0 != r.0 {
            return false;
        }
        let own = w.1 == r.1
            && w.1
                .iter()
                .any(|i| matches!(i.node(), ExprNode::Var(v) if self.threads.contains(v)));
        !own
    }

    fn conflicts(&self, writes: &[Access], reads: &[Access]) -> bool {
        writes
            .iter()
            .any(|w| reads.iter().any(|r| self.conflict(w, r)))
    }
}

impl ExprMutator for Planner {}

impl StmtMutator for Planner {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let s = mutate_stmt_children(self, s);
        match s.node() {
            StmtNode::Seq(items) => {
                let mut out: Vec<Stmt> = Vec::with_capacity(items.len());
                let mut pending: Vec<Access> = Vec::new();
                let mut changed = false;
                for x in items {
                    if is_shared_sync(x) {
                        // two barriers in a row are one, also when the first ends a
                        // nested statement (an allreduce's last fence)
                        if out.last().is_some_and(ends_with_sync) {
                            changed = true;
                            continue;
                        }
                        pending.clear();
                        out.push(x.clone());
                        continue;
                    }
                    let (reads, writes) = shared_accesses(x);
                    if self.conflicts(&pending, &reads) {
                        out.push(Stmt::storage_sync(StorageScope::Shared));
                        pending.clear();
                        changed = true;
                    }
                    if ends_with_sync(x) {
                        // its writes are fenced by its own last barrier
                        pending.clear();
                    } else {
                        pending.extend(writes);
                    }
                    out.push(x.clone());
                }
                if changed {
                    Stmt::seq(out)
                } else {
                    s
                }
            }
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } if !matches!(kind, ForKind::ThreadBinding(_)) => {
                let (reads, writes) = shared_accesses(body);
                if starts_with_sync(body) || !self.conflicts(&writes, &reads) {
                    return s;
                }
                Stmt::for_loop(
                    var.clone(),
                    min.clone(),
                    extent.clone(),
                    *kind,
                    Stmt::seq(vec![Stmt::storage_sync(StorageScope::Shared), body.clone()]),
                )
            }
            _ => s,
        }
    }
}

/// Refuses a barrier under `cond` (the innermost condition around it, if any).
fn check(
    kernel: &str,
    s: &Stmt,
    launch: &ThreadExtents,
    cond: Option<&str>,
) -> Result<(), TransformError> {
    match s.node() {
        StmtNode::StorageSync(scope) => match cond {
            Some(c) => Err(TransformError::Unsupported {
                pass: "storage_sync",
                func: kernel.to_string(),
                reason: format!(
                    "a {scope} barrier is needed inside a condition ({c}), where some \
                     threads of the block would not reach it"
                ),
            }),
            None => Ok(()),
        },
        StmtNode::For {
            var,
            extent,
            kind,
            body,
            ..
        } => {
            let guard;
            let inner = match kind {
                ForKind::ThreadBinding(axis)
                    if extent.as_int().is_some_and(|n| launch.guarded(*axis, n)) =>
                {
                    guard = format!(
                        "`{}` bound to {axis} with extent {extent} of {}",
                        var.name(),
                        launch.extent(*axis)
                    );
                    Some(guard.as_str())
                }
                _ => cond,
            };
            check(kernel, body, launch, inner)
        }
        StmtNode::IfThenElse {
            cond: c,
            then_case,
            else_case,
        } => {
            let text = format!("if {c}");
            check(kernel, then_case, launch, Some(&text))?;
            match else_case {
                Some(e) => check(kernel, e, launch, Some(&text)),
                None => Ok(()),
            }
        }
        StmtNode::Seq(v) => v.iter().try_for_each(|x| check(kernel, x, launch, cond)),
        StmtNode::Allocate { body, .. }
        | StmtNode::Attr { body, .. }
        | StmtNode::Let { body, .. } => check(kernel, body, launch, cond),
        StmtNode::Store { .. } | StmtNode::Evaluate(_) => Ok(()),
    }
}
