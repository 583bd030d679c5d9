//! Lowering of a cross-thread reduction (a reduce loop bound to a `threadIdx` axis):
//! per-thread partial results in a shared buffer, the allreduce tree of
//! `tessera_ir::transform::thread_allreduce`, and the result written by thread 0.

use super::{Lowerer, StageBounds};
use crate::error::LowerError;
use crate::schedule::{Annotation, Attach, Stage};
use crate::tensor::{IterVar, ReduceOp};
use tessera_ir::transform::thread_allreduce;
use tessera_ir::{BinOp, Buffer, Expr, ForKind, Stmt, StorageScope, ThreadAxis, Var};

/// What a cross-thread reduction's emission needs of the stage's body, already
/// substituted and relocated.
pub(super) struct AllreduceParts {
    pub(super) op: ReduceOp,
    pub(super) source: Expr,
    pub(super) condition: Option<Expr>,
    pub(super) init: Option<Expr>,
    pub(super) out_buf: Buffer,
    pub(super) out_idx: Vec<Expr>,
    pub(super) guards: Vec<Expr>,
}

impl Lowerer<'_> {
    /// A reduction spread over the threads of a block (a reduce loop bound to a
    /// `threadIdx` axis, TVM's cross-thread reduction): per point of the stage's spatial
    /// loops, each thread folds its share of the other reduce loops into its slot of a
    /// shared buffer, the slots are combined by [`thread_allreduce`], and thread 0 writes
    /// the result (combined with the reduction's initial value, if it has one).
    ///
    /// Refused (rather than computed wrong): spatial loops inside the reduce loops, a
    /// spatial loop bound to a thread, a stage computed inside thread loops, two reduce
    /// loops bound to threads, a stage attached at one of its reduce loops.
    pub(super) fn emit_allreduce(
        &mut self,
        i: usize,
        st: &Stage,
        b: &StageBounds,
        rt: usize,
        parts: AllreduceParts,
    ) -> Result<Stmt, LowerError> {
        let refuse = |reason: String| LowerError::Invalid {
            stage: st.name().to_string(),
            reason: format!("cross-thread reduction: {reason}"),
        };
        let leaves = st.leaf_iter_vars.clone();
        let fr = leaves
            .iter()
            .position(|l| l.is_reduce())
            .expect("a reduce leaf");
        if let Some(l) = leaves[fr..].iter().find(|l| !l.is_reduce()) {
            return Err(refuse(format!(
                "spatial loop `{}` is inside the reduction",
                l.name()
            )));
        }
        let bound = |l: &IterVar| matches!(st.annotation(l), Annotation::Bind(t) if t.rank() == 1);
        if let Some(l) = leaves[..fr].iter().find(|l| bound(l)) {
            return Err(refuse(format!(
                "spatial loop `{}` is bound to a thread",
                l.name()
            )));
        }
        if leaves[fr..].iter().filter(|l| bound(l)).count() > 1 {
            return Err(refuse("two reduce loops are bound to threads".into()));
        }
        if let Some(t) = self.enclosing_threads(i).first() {
            return Err(refuse(format!("it is computed inside a loop bound to {t}")));
        }
        let target = st.op.buffer().clone();
        if self.sch.stages.iter().any(|c| {
            matches!(&c.attach, Attach::At { target: t, axis } if *t == target && axis.is_reduce())
        }) {
            return Err(refuse("a stage is computed at one of its reduce loops".into()));
        }
        let Annotation::Bind(axis) = st.annotation(&leaves[rt]) else {
            unreachable!("the leaf is bound")
        };
        let threads = b.leaf_ext[&leaves[rt]];
        let dtype = st.op.dtype();
        let red = Buffer::new(
            format!("{}.red", st.name()),
            dtype,
            vec![Expr::int(threads)],
            StorageScope::Shared,
        );
        let reduce_vars: Vec<Var> = leaves[fr..].iter().map(|l| l.var().clone()).collect();
        let spatial_guards: Vec<Expr> = parts
            .guards
            .iter()
            .filter(|g| !tessera_ir::visit::uses_var(g, &|v| reduce_vars.contains(v)))
            .cloned()
            .collect();
        let all = |gs: &[Expr], s: Stmt| {
            if gs.is_empty() {
                s
            } else {
                Stmt::if_then(Expr::all(gs.iter().cloned()), s)
            }
        };
        let tx = leaves[rt].expr();
        let slot = Expr::load(&red, vec![tx.clone()]);
        let mut upd = Stmt::store(&red, vec![tx.clone()], parts.op.combine(slot, parts.source));
        if let Some(c) = parts.condition {
            upd = Stmt::if_then(c, upd);
        }
        let mut fold = all(&parts.guards, upd);
        for p in (fr..leaves.len()).rev() {
            if p != rt {
                fold = self.make_loop(st, &leaves[p], None, fold, b.leaf_ext[&leaves[p]]);
            }
        }
        let start = Stmt::store(&red, vec![tx], parts.op.identity(dtype));
        let partials = self.make_loop(st, &leaves[rt], None, Stmt::seq(vec![start, fold]), threads);
        let combine = match parts.op {
            ReduceOp::Sum => BinOp::Add,
            ReduceOp::Prod => BinOp::Mul,
            ReduceOp::Max => BinOp::Max,
            ReduceOp::Min => BinOp::Min,
        };
        let tree = thread_allreduce(&red, combine, axis, threads);
        let result = Expr::load(&red, vec![Expr::int(0)]);
        let value = match parts.init {
            Some(init) => parts.op.combine(init, result),
            None => result,
        };
        let t0 = Var::int(format!("{}.t", st.name()));
        let write = Stmt::for_loop(
            t0.clone(),
            Expr::int(0),
            Expr::int(threads),
            ForKind::ThreadBinding(axis),
            Stmt::if_then(
                t0.to_expr().eq(0),
                all(
                    &spatial_guards,
                    Stmt::store(&parts.out_buf, parts.out_idx, value),
                ),
            ),
        );
        let sync = || Stmt::storage_sync(StorageScope::Shared);
        let mut stmt = Stmt::allocate(red, Stmt::seq(vec![partials, sync(), tree, write, sync()]));
        for p in (0..fr).rev() {
            stmt = self.attach_children(i, &leaves[p], stmt)?;
            stmt = self.make_loop(st, &leaves[p], None, stmt, b.leaf_ext[&leaves[p]]);
        }
        Ok(stmt)
    }

    /// The thread axes of the loops (of the stages it is computed in) around stage `i`.
    fn enclosing_threads(&self, i: usize) -> Vec<ThreadAxis> {
        let mut out = Vec::new();
        let mut cur = i;
        while let Attach::At { target, axis } = &self.stage(cur).attach {
            let Some(a) = self.sch.index_of_buffer(target) else {
                break;
            };
            let st = self.stage(a);
            let pos = st
                .leaf_iter_vars
                .iter()
                .position(|l| l == axis)
                .unwrap_or(0);
            for lv in &st.leaf_iter_vars[..=pos] {
                if let Annotation::Bind(t) = st.annotation(lv) {
                    if t.rank() == 1 && t != ThreadAxis::VThread {
                        out.push(t);
                    }
                }
            }
            cur = a;
        }
        out
    }
}
