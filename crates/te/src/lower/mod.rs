//! Bound inference and lowering of a scheduled DAG into an `ir` function.
//!
//! 1. Inlined stages are substituted into their readers ("effective bodies").
//! 2. Bound inference walks the stages consumers-first. A stage at root covers its whole
//!    tensor; a stage computed at axis `a` of a consumer covers the region the consumer
//!    reads while the consumer's loops inside `a` run (loops outside `a` are fixed, except
//!    thread-bound loops that share the stage's storage, which are relaxed). Leaf extents
//!    follow from the root ranges through the split/fuse relations.
//! 3. Each stage becomes a loop nest over its leaf axes; the root indices are rebuilt
//!    from the leaves. Non-divisible splits and regions that may leave the tensor get
//!    guards; a reduction gets its initialization above its first reduce loop; attached
//!    stages are emitted inside the loop they are attached to, in an allocation of their
//!    region's size and their scope; shared-memory producers are fenced by syncs.
//! 4. Loops of extent one disappear and the result is simplified.
//!
//! [`lower`] lists these passes in order. One file per pass: this one holds the shared
//! state (`Lowerer`) and steps 0–1, `bounds.rs` step 2, `emit.rs` step 3, with
//! `interval.rs` the interval arithmetic of step 2, `allreduce.rs` the emission of a
//! reduction spread over the threads of a block and `runtime.rs` the loops and guards
//! of axes whose extent a kernel reads when it runs.

mod allreduce;
mod bounds;
mod emit;
mod interval;
mod runtime;

pub(crate) use bounds::reduce_leaf_algebra;
pub(crate) use runtime::mask;

use crate::error::LowerError;
use crate::schedule::{loaded_buffers, Annotation, Attach, Relation, Schedule, Stage};
use crate::tensor::{ComputeBody, IterVar, Reduce, Tensor};
use allreduce::AllreduceParts;
use std::collections::HashMap;
use tessera_ir::arith::{simplify_stmt, Analyzer};
use tessera_ir::visit::{mutate_expr_children, substitute, substitute_stmt, ExprMutator};
use tessera_ir::{Buffer, Expr, ExprNode, ForKind, PrimFunc, Stmt, StorageScope, ThreadAxis, Var};

/// What bound inference found for one stage.
#[derive(Clone, Debug, Default)]
struct StageBounds {
    /// Per root axis (data-parallel, then reduce): the first index computed.
    root_min: Vec<Expr>,
    /// Per root axis: how many indices are computed.
    root_ext: Vec<i64>,
    leaf_ext: HashMap<IterVar, i64>,
    /// Per data-parallel dimension: whether the region may leave the tensor.
    domain_guard: Vec<bool>,
    /// Where the tensor is stored and the offset of its region per dimension.
    storage: Option<(Buffer, Vec<Expr>)>,
}

struct Lowerer<'a> {
    sch: &'a Schedule,
    bodies: Vec<Option<ComputeBody>>,
    bounds: Vec<StageBounds>,
    an: Analyzer,
    /// Loop variables of extent one, replaced by zero.
    unit_vars: HashMap<Var, Expr>,
    /// Each stage's storage scope as lowered (see [`storage_scopes`]).
    scopes: Vec<StorageScope>,
    /// Leaf loops that run to a runtime extent (`runtime.rs`), of the stages emitted.
    runtime_loops: HashMap<IterVar, Expr>,
}

/// Each stage's storage scope: the one the schedule set, except that a stage left in
/// the default (global) scope and computed inside loops bound to GPU threads is local to
/// a thread (under `threadIdx` or `vthread`) or shared by a block (under `blockIdx`
/// only), as TVM infers it: no thread would read another's element of it.
fn storage_scopes(sch: &Schedule) -> Vec<StorageScope> {
    let stages = &sch.stages;
    (0..stages.len())
        .map(|i| {
            let st = &stages[i];
            if st.scope != StorageScope::Global || st.is_output {
                return st.scope;
            }
            let mut rank: Option<u8> = None;
            let mut cur = i;
            for _ in 0..stages.len() {
                let Attach::At { target, axis } = &stages[cur].attach else {
                    break;
                };
                let Some(t) = sch.index_of_buffer(target) else {
                    break;
                };
                let tst = &stages[t];
                let pos = tst.leaf_iter_vars.iter().position(|x| x == axis);
                for lv in &tst.leaf_iter_vars[..pos.map_or(0, |p| p + 1)] {
                    if let Annotation::Bind(th) = tst.annotation(lv) {
                        rank = Some(rank.map_or(th.rank(), |r| r.max(th.rank())));
                    }
                }
                cur = t;
            }
            match rank {
                Some(0) => StorageScope::Shared,
                Some(_) => StorageScope::Local,
                None => StorageScope::Global,
            }
        })
        .collect()
}

/// Substitutes inlined stages into the expressions that read them.
struct Inliner<'a> {
    sch: &'a Schedule,
}

impl ExprMutator for Inliner<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        let e = mutate_expr_children(self, e);
        if let ExprNode::Load { buffer, indices } = e.node() {
            if let Some(i) = self.sch.index_of_buffer(buffer) {
                let st = &self.sch.stages[i];
                if let (Attach::Inline, Some(ComputeBody::Expr(body))) = (&st.attach, st.op.body())
                {
                    // an index of another type (a gather's int64 position) cast to the
                    // axis's, so that the body's index arithmetic keeps one type
                    let map: HashMap<Var, Expr> = st
                        .op
                        .axis()
                        .iter()
                        .map(|a| a.var().clone())
                        .zip(indices.iter().cloned())
                        .map(|(v, i)| match i.dtype() == v.dtype() {
                            true => (v, i),
                            false => (v.clone(), Expr::cast(v.dtype(), i)),
                        })
                        .collect();
                    let inlined = substitute(body, &map);
                    return self.mutate_expr(&inlined);
                }
            }
        }
        e
    }
}

fn reads_of(body: &ComputeBody) -> Vec<Buffer> {
    let mut v = Vec::new();
    for e in body.exprs() {
        loaded_buffers(e, &mut v);
    }
    v
}

/// Every index list with which `body` loads `b`.
fn accesses(body: &ComputeBody, b: &Buffer) -> Vec<Vec<Expr>> {
    let mut out = Vec::new();
    for e in body.exprs() {
        tessera_ir::visit::post_order_visit(e, &mut |x| {
            if let ExprNode::Load { buffer, indices } = x.node() {
                if buffer == b {
                    out.push(indices.clone());
                }
            }
        });
    }
    out
}

/// Lowers the schedule into a function whose parameters are `args` (inputs and outputs,
/// in calling order). The passes, in order (the module header says what each does):
pub fn lower(sch: &Schedule, args: &[Tensor], name: &str) -> Result<PrimFunc, LowerError> {
    // 0. refuse what cannot be lowered: a reduction bound to blocks or virtual threads
    check_reduction_bindings(sch)?;
    // 1–2. effective bodies (inlining), the arguments and attachments checked, bound
    // inference (`bounds.rs`)
    let mut lw = Lowerer::with_bounds(sch, args)?;
    // 3. loop emission, each root stage with its storage (`emit.rs`)
    let body = lw.emit_roots(args)?;
    // 4. loops of extent one removed, the result simplified
    let body = simplify_stmt(&substitute_stmt(&body, &lw.unit_vars));
    let params = args.iter().map(|t| t.buffer().clone()).collect();
    Ok(PrimFunc::new(name, params, body))
}

/// Pass 0: a reduction can be spread over the threads of a block only.
fn check_reduction_bindings(sch: &Schedule) -> Result<(), LowerError> {
    for st in sch.stages() {
        let on_blocks = |iv: &&IterVar| {
            iv.is_reduce()
                && matches!(st.annotation(iv), Annotation::Bind(t) if t.rank() == 0 || t == ThreadAxis::VThread)
        };
        if let Some(iv) = st.leaf_iter_vars.iter().find(on_blocks) {
            return Err(LowerError::Invalid {
                stage: st.name().to_string(),
                reason: format!(
                    "reduction loop `{}` is bound to a block or a virtual thread; a \
                     reduction can be spread over the threads of a block only",
                    iv.name()
                ),
            });
        }
    }
    Ok(())
}

/// The extents bound inference gives the leaf axes of every stage of `sch` (in the
/// schedule's stage order, each stage's leaf axes in loop order; empty for placeholders
/// and inlined stages): what a loop nest would run without lowering it. `args` as for
/// [`lower`].
pub fn leaf_extents(sch: &Schedule, args: &[Tensor]) -> Result<Vec<Vec<i64>>, LowerError> {
    let lw = Lowerer::with_bounds(sch, args)?;
    Ok(sch
        .stages
        .iter()
        .enumerate()
        .map(|(i, st)| {
            if lw.bodies[i].is_none() {
                return Vec::new();
            }
            st.leaf_iter_vars
                .iter()
                .map(|iv| lw.bounds[i].leaf_ext.get(iv).copied().unwrap_or(1))
                .collect()
        })
        .collect())
}

impl<'a> Lowerer<'a> {
    /// Steps 1 and 2: the effective bodies, checked arguments and attachments, and
    /// every stage's bounds (consumers first).
    fn with_bounds(sch: &'a Schedule, args: &[Tensor]) -> Result<Lowerer<'a>, LowerError> {
        let mut lw = Lowerer {
            sch,
            bodies: Vec::new(),
            bounds: vec![StageBounds::default(); sch.stages.len()],
            an: Analyzer::new(),
            unit_vars: HashMap::new(),
            scopes: storage_scopes(sch),
            runtime_loops: HashMap::new(),
        };
        lw.effective_bodies();
        lw.check_args(args)?;
        lw.check_attachments()?;
        for i in (0..sch.stages.len()).rev() {
            lw.infer_bounds(i, args)?;
        }
        Ok(lw)
    }

    fn effective_bodies(&mut self) {
        let mut inl = Inliner { sch: self.sch };
        self.bodies = self
            .sch
            .stages
            .iter()
            .map(|s| match (&s.attach, s.op.body()) {
                (Attach::Inline, _) | (_, None) => None,
                (_, Some(b)) => Some(b.map(|e| inl.mutate_expr(e))),
            })
            .collect();
    }

    fn stage(&self, i: usize) -> &Stage {
        &self.sch.stages[i]
    }

    /// The stages that read stage `i` (after inlining).
    fn consumers(&self, i: usize) -> Vec<usize> {
        let b = self.stage(i).op.buffer();
        (0..self.bodies.len())
            .filter(|c| {
                self.bodies[*c]
                    .as_ref()
                    .is_some_and(|body| reads_of(body).contains(b))
            })
            .collect()
    }

    fn check_args(&self, args: &[Tensor]) -> Result<(), LowerError> {
        for a in args {
            let i = self.sch.stage_index(a)?;
            let st = self.stage(i);
            if !st.is_placeholder() && !st.is_output {
                return Err(LowerError::BadArg(a.name().to_string()));
            }
        }
        for (i, st) in self.sch.stages.iter().enumerate() {
            let needed = st.is_output || (st.is_placeholder() && !self.consumers(i).is_empty());
            if needed && !args.contains(&st.op) {
                return Err(LowerError::MissingArg(st.name().to_string()));
            }
        }
        Ok(())
    }

    fn check_attachments(&self) -> Result<(), LowerError> {
        for (i, st) in self.sch.stages.iter().enumerate() {
            let Attach::At { target, axis } = &st.attach else {
                continue;
            };
            let bad = |reason: String| LowerError::BadAttach {
                stage: st.name().to_string(),
                target: target.name().to_string(),
                reason,
            };
            let t = self
                .sch
                .index_of_buffer(target)
                .ok_or_else(|| bad("the target is not in the schedule".into()))?;
            if self.stage(t).attach == Attach::Inline {
                return Err(bad("the target is inlined".into()));
            }
            if !self.stage(t).leaf_iter_vars.contains(axis) {
                return Err(bad(format!("`{}` is no longer a leaf axis of the target (it was split or fused after compute_at)", axis.name())));
            }
            let cons = self.consumers(i);
            if cons.is_empty()
                || cons
                    .iter()
                    .any(|&c| c != t && !self.sch.computed_inside(c, target, axis))
            {
                let names: Vec<&str> = cons.iter().map(|c| self.stage(*c).name()).collect();
                return Err(bad(format!("its consumers are [{}]: a stage computed at another must be read by that stage only, or by stages computed at the same loop of it", names.join(", "))));
            }
        }
        Ok(())
    }
}

/// Whether a relation transforms reduction axes.
pub(crate) fn relation_is_reduce(r: &Relation) -> bool {
    match r {
        Relation::Split { parent, .. } => parent.is_reduce(),
        Relation::Fuse { outer, .. } => outer.is_reduce(),
    }
}
