//! Storage synchronization of a device kernel (TVM's `ThreadSync` for `shared` memory):
//! a barrier goes where shared memory written by the block's threads is read by a later
//! statement, and at the top of a loop whose body writes shared memory that the previous
//! iteration read (the write-after-read across the back edge). Barriers already there
//! (lowering fences cache stages) are kept and end the pending writes.
//!
//! A barrier must be reached by every thread of the block, so one inside a condition —
//! an `if`, or a thread loop narrower than its axis's launch extent, which runs
//! guarded — is refused, never emitted: TVM's "Cannot insert syncs inside condition".

use super::error::TransformError;
use super::split_host_device::ThreadExtents;
use crate::buffer::{Buffer, StorageScope};
use crate::stmt::{ForKind, Stmt, StmtNode};
use crate::visit::{mutate_stmt_children, ExprMutator, ExprVisitor, StmtMutator, StmtVisitor};

/// Inserts the barriers `body` needs and checks that none is inside a condition.
pub fn storage_sync(
    kernel: &str,
    body: &Stmt,
    launch: &ThreadExtents,
) -> Result<Stmt, TransformError> {
    let planned = Planner.mutate_stmt(body);
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

/// The shared buffers a statement reads and writes.
fn shared_accesses(s: &Stmt) -> (Vec<Buffer>, Vec<Buffer>) {
    #[derive(Default)]
    struct Acc {
        reads: Vec<Buffer>,
        writes: Vec<Buffer>,
    }
    impl ExprVisitor for Acc {
        fn visit_expr(&mut self, e: &crate::Expr) {
            if let crate::ExprNode::Load { buffer, .. } = e.node() {
                if buffer.scope() == StorageScope::Shared && !self.reads.contains(buffer) {
                    self.reads.push(buffer.clone());
                }
            }
            crate::visit::walk_expr(self, e)
        }
    }
    impl StmtVisitor for Acc {
        fn visit_stmt(&mut self, s: &Stmt) {
            if let StmtNode::Store { buffer, .. } = s.node() {
                if buffer.scope() == StorageScope::Shared && !self.writes.contains(buffer) {
                    self.writes.push(buffer.clone());
                }
            }
            crate::visit::walk_stmt(self, s)
        }
    }
    let mut a = Acc::default();
    a.visit_stmt(s);
    (a.reads, a.writes)
}

struct Planner;

impl ExprMutator for Planner {}

impl StmtMutator for Planner {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        let s = mutate_stmt_children(self, s);
        match s.node() {
            StmtNode::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut pending: Vec<Buffer> = Vec::new();
                let mut changed = false;
                for x in items {
                    if is_shared_sync(x) {
                        pending.clear();
                        out.push(x.clone());
                        continue;
                    }
                    let (reads, writes) = shared_accesses(x);
                    if reads.iter().any(|b| pending.contains(b)) {
                        out.push(Stmt::storage_sync(StorageScope::Shared));
                        pending.clear();
                        changed = true;
                    }
                    pending.extend(writes);
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
                if starts_with_sync(body) || !writes.iter().any(|w| reads.contains(w)) {
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
