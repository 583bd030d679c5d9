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
//! [`interval`] holds the interval arithmetic of step 2, [`allreduce`] the emission of
//! a reduction spread over the threads of a block.

mod allreduce;
mod interval;

use crate::error::LowerError;
use crate::schedule::{loaded_buffers, Annotation, Attach, Relation, Schedule, Stage};
use crate::tensor::{ComputeBody, IterVar, Reduce, Tensor};
use allreduce::AllreduceParts;
use interval::{interval, union, Interval};
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
                    let map: HashMap<Var, Expr> = st
                        .op
                        .axis()
                        .iter()
                        .map(|a| a.var().clone())
                        .zip(indices.iter().cloned())
                        .collect();
                    let inlined = substitute(body, &map);
                    return self.mutate_expr(&inlined);
                }
            }
        }
        e
    }
}

/// Rewrites loads of stages whose storage is a region buffer: new buffer, indices
/// shifted by the region's offsets.
struct Relocate<'a> {
    storage: &'a HashMap<Buffer, (Buffer, Vec<Expr>)>,
}

impl ExprMutator for Relocate<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        let e = mutate_expr_children(self, e);
        if let ExprNode::Load { buffer, indices } = e.node() {
            if let Some((nb, off)) = self.storage.get(buffer) {
                return Expr::load(nb, shift(indices, off));
            }
        }
        e
    }
}

fn shift(indices: &[Expr], off: &[Expr]) -> Vec<Expr> {
    indices
        .iter()
        .zip(off)
        .map(|(i, o)| if o.is_const_int(0) { i.clone() } else { i - o })
        .collect()
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

fn loop_kind(ann: Annotation) -> ForKind {
    match ann {
        Annotation::None => ForKind::Serial,
        Annotation::Parallel => ForKind::Parallel,
        Annotation::Vectorize => ForKind::Vectorized,
        Annotation::Unroll => ForKind::Unrolled,
        Annotation::Bind(t) => ForKind::ThreadBinding(t),
    }
}

/// Lowers the schedule into a function whose parameters are `args` (inputs and outputs,
/// in calling order).
pub fn lower(sch: &Schedule, args: &[Tensor], name: &str) -> Result<PrimFunc, LowerError> {
    for st in sch.stages() {
        if let Some(iv) = st.leaf_iter_vars.iter().find(|iv| {
            iv.is_reduce()
                && matches!(st.annotation(iv), Annotation::Bind(t) if t.rank() == 0 || t == ThreadAxis::VThread)
        }) {
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
    let mut lw = Lowerer::with_bounds(sch, args)?;
    let mut roots = Vec::new();
    for (i, st) in sch.stages.iter().enumerate() {
        if st.op.body().is_some() && st.attach == Attach::Root {
            roots.push(lw.emit(i)?);
        }
    }
    let mut body = Stmt::seq(roots);
    for (i, st) in sch.stages.iter().enumerate().rev() {
        if st.op.body().is_some() && st.attach == Attach::Root && !args.contains(&st.op) {
            let (buf, _) = lw.bounds[i]
                .storage
                .clone()
                .expect("root stages have storage");
            body = Stmt::allocate(buf, body);
        }
    }
    let body = substitute_stmt(&body, &lw.unit_vars);
    let params = args.iter().map(|t| t.buffer().clone()).collect();
    Ok(PrimFunc::new(name, params, simplify_stmt(&body)))
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

    /// The ranges of the root axes of stage `c` over one run of loop `axis` of the stage
    /// of `target`, where `c` is computed ([`Schedule::computed_inside`]; its bounds and
    /// those of the stages between inferred): `c`'s own region, in terms of the loops of
    /// the stage it is computed at, with the loops of every stage between `c` and the
    /// target's loop relaxed to their whole range. `None` where a range is not known.
    fn region_env(
        &self,
        c: usize,
        target: &Buffer,
        axis: &IterVar,
    ) -> Option<HashMap<Var, Interval>> {
        let b = &self.bounds[c];
        let st = self.stage(c);
        if b.root_ext.len() != b.root_min.len() || b.root_min.is_empty() {
            return None;
        }
        // the leaf loops of the stages between, each over its whole range
        let mut relaxed: HashMap<Var, Interval> = HashMap::new();
        let mut cur = c;
        while let Attach::At { target: t, axis: a } = &self.stage(cur).attach {
            if t == target && a == axis {
                break;
            }
            let x = self.sch.index_of_buffer(t)?;
            for lv in &self.stage(x).leaf_iter_vars {
                let e = *self.bounds[x].leaf_ext.get(lv)?;
                relaxed.insert(lv.var().clone(), Interval::range(0, e - 1));
            }
            cur = x;
        }
        let mut env = HashMap::new();
        for (k, rv) in st.root_iter_vars().iter().enumerate() {
            let lo = interval(&b.root_min[k], &relaxed)?;
            let hi = lo.hi.clone() + Expr::int(b.root_ext[k] - 1);
            env.insert(rv.var().clone(), Interval { lo: lo.lo, hi });
        }
        Some(env)
    }

    /// Leaf extents from root extents, and the splits that need a guard.
    fn pass_down(st: &Stage, root_ext: &[i64]) -> Result<HashMap<IterVar, i64>, LowerError> {
        let mut ext: HashMap<IterVar, i64> = st
            .root_iter_vars()
            .into_iter()
            .zip(root_ext.iter().copied())
            .collect();
        for r in &st.relations {
            match r {
                Relation::Split {
                    parent,
                    outer,
                    inner,
                    factor,
                    nparts,
                } => {
                    let e = ext[parent];
                    // As TVM does, the part given by the factor (or nparts) is tightened
                    // to the parent's extent when that is smaller (a tile of 8 over a
                    // region of 4 runs 4, not 8 with a guard), unless a thread is bound
                    // below it: a split may set an extent to the threads launched.
                    let (o, i) = match (factor, nparts) {
                        (Some(f), _) => {
                            let f = if derives_thread(st, inner) {
                                *f
                            } else {
                                (*f).min(e)
                            };
                            ((e + f - 1) / f, f)
                        }
                        (None, Some(n)) => {
                            let n = if derives_thread(st, outer) {
                                *n
                            } else {
                                (*n).min(e)
                            };
                            (n, (e + n - 1) / n)
                        }
                        (None, None) => unreachable!("splits have a factor or nparts"),
                    };
                    ext.insert(outer.clone(), o);
                    ext.insert(inner.clone(), i);
                }
                Relation::Fuse {
                    outer,
                    inner,
                    fused,
                } => {
                    let e =
                        ext[outer]
                            .checked_mul(ext[inner])
                            .ok_or_else(|| LowerError::Invalid {
                                stage: st.name().to_string(),
                                reason: "fused extent overflows".into(),
                            })?;
                    ext.insert(fused.clone(), e);
                }
            }
        }
        Ok(ext)
    }

    /// Root values (relative to the region's start) from leaf values, plus the guards of
    /// non-divisible splits.
    fn pass_up(
        st: &Stage,
        ext: &HashMap<IterVar, i64>,
        leaf_val: &HashMap<IterVar, Expr>,
    ) -> (HashMap<IterVar, Expr>, Vec<Expr>) {
        let mut val = leaf_val.clone();
        let mut guards = Vec::new();
        for r in st.relations.iter().rev() {
            match r {
                Relation::Split {
                    parent,
                    outer,
                    inner,
                    ..
                } => {
                    let v = &val[outer] * ext[inner] + val[inner].clone();
                    if ext[outer] * ext[inner] != ext[parent] {
                        guards.push(v.lt(ext[parent]));
                    }
                    val.insert(parent.clone(), v);
                }
                Relation::Fuse {
                    outer,
                    inner,
                    fused,
                } => {
                    let f = val[fused].clone();
                    val.insert(
                        outer.clone(),
                        Expr::floordiv(f.clone(), Expr::int(ext[inner])),
                    );
                    val.insert(inner.clone(), Expr::floormod(f, Expr::int(ext[inner])));
                }
            }
        }
        (val, guards)
    }

    /// The same over intervals.
    fn pass_up_interval(
        st: &Stage,
        ext: &HashMap<IterVar, i64>,
        leaf: HashMap<IterVar, Interval>,
    ) -> HashMap<IterVar, Interval> {
        let mut val = leaf;
        for r in st.relations.iter().rev() {
            match r {
                Relation::Split {
                    parent,
                    outer,
                    inner,
                    ..
                } => {
                    let (o, i) = (val[outer].clone(), val[inner].clone());
                    let k = ext[inner];
                    // Not clipped to the parent's extent: the region keeps a constant
                    // size and the producer gets a domain guard instead.
                    val.insert(
                        parent.clone(),
                        Interval {
                            lo: o.lo * k + i.lo,
                            hi: o.hi * k + i.hi,
                        },
                    );
                }
                Relation::Fuse {
                    outer,
                    inner,
                    fused,
                } => {
                    let f = val[fused].clone();
                    let k = Expr::int(ext[inner]);
                    if f.is_point() {
                        val.insert(
                            outer.clone(),
                            Interval::point(Expr::floordiv(f.lo.clone(), k.clone())),
                        );
                        val.insert(inner.clone(), Interval::point(Expr::floormod(f.lo, k)));
                    } else {
                        val.insert(outer.clone(), Interval::range(0, ext[outer] - 1));
                        val.insert(inner.clone(), Interval::range(0, ext[inner] - 1));
                    }
                }
            }
        }
        val
    }

    fn infer_bounds(&mut self, i: usize, args: &[Tensor]) -> Result<(), LowerError> {
        let st = self.stage(i).clone();
        if self.bodies[i].is_none() {
            return Ok(());
        }
        let shape = st.op.shape().to_vec();
        let ndim = shape.len();
        let reduce_ext: Vec<i64> = st
            .op
            .reduce_axis()
            .iter()
            .map(|r| r.extent().unwrap_or(1))
            .collect();
        let mut root_min: Vec<Expr> = vec![Expr::int(0); ndim];
        let mut root_ext: Vec<i64> = shape.clone();
        let mut domain_guard = vec![false; ndim];
        if let Attach::At { target, axis } = &st.attach {
            let t = self.sch.index_of_buffer(target).expect("checked");
            let tst = self.stage(t).clone();
            let tb = self.bounds[t].clone();
            let pos = tst
                .leaf_iter_vars
                .iter()
                .position(|x| x == axis)
                .expect("checked");
            let mut leaf_iv = HashMap::new();
            for (p, lv) in tst.leaf_iter_vars.iter().enumerate() {
                let e = tb.leaf_ext[lv];
                let relax = p > pos
                    || match tst.annotation(lv) {
                        Annotation::Bind(th) => th.rank() >= self.scopes[i].rank(),
                        _ => false,
                    };
                leaf_iv.insert(
                    lv.clone(),
                    if relax {
                        Interval::range(0, e - 1)
                    } else {
                        Interval::point(lv.expr())
                    },
                );
            }
            let roots = Self::pass_up_interval(&tst, &tb.leaf_ext, leaf_iv);
            // The target's region starts where its own attach point puts it, in terms of
            // the loops of the stages it is computed in: those bound to threads that
            // share this stage's storage are relaxed too (TVM's attach path), else a
            // shared copy made inside a thread loop would cover one thread's part only.
            let outer = self.relaxed_ancestor_threads(t, self.scopes[i]);
            let mut env: HashMap<Var, Interval> = HashMap::new();
            for (k, rv) in tst.root_iter_vars().iter().enumerate() {
                let r = &roots[rv];
                let m = interval(&tb.root_min[k], &outer)
                    .unwrap_or_else(|| Interval::point(tb.root_min[k].clone()));
                env.insert(
                    rv.var().clone(),
                    Interval {
                        lo: m.lo + r.lo.clone(),
                        hi: m.hi + r.hi.clone(),
                    },
                );
            }
            let body = self.bodies[t].clone().expect("target is computed");
            // what the target reads, and what the stages computed beside this one read
            let mut readers = vec![(body, env)];
            for c in self.consumers(i).into_iter().filter(|&c| c != t) {
                let body = self.bodies[c].clone().expect("a consumer is computed");
                match self.region_env(c, target, axis) {
                    Some(env) => readers.push((body, env)),
                    // (unknown: the whole tensor)
                    None => {
                        return Err(LowerError::BadAttach {
                            stage: st.name().to_string(),
                            target: target.name().to_string(),
                            reason: format!(
                                "the region `{}` reads of it is not known where it is computed",
                                self.stage(c).name()
                            ),
                        })
                    }
                }
            }
            let mut region: Vec<Option<Interval>> = vec![None; ndim];
            let mut unknown = vec![false; ndim];
            for (body, env) in &readers {
                for acc in accesses(body, st.op.buffer()) {
                    for (d, idx) in acc.iter().enumerate() {
                        match interval(idx, env) {
                            Some(iv) => {
                                region[d] = Some(match region[d].take() {
                                    None => iv,
                                    Some(r) => union(r, iv).expect("union"),
                                })
                            }
                            None => unknown[d] = true,
                        }
                    }
                }
            }
            for d in 0..ndim {
                let Some(r) = region[d].as_ref().filter(|_| !unknown[d]) else {
                    continue;
                };
                let lo = self.an.simplify(&r.lo);
                let ext = self.an.simplify(&(r.hi.clone() - lo.clone() + 1));
                let e = match ext.as_int() {
                    Some(e) => e,
                    None => self.an.const_int_bound(&ext).max,
                };
                if e <= 0 || e >= shape[d] {
                    continue;
                }
                domain_guard[d] = !(self.an.can_prove(&lo.ge(0))
                    && self.an.can_prove(&(lo.clone() + e).le(shape[d])));
                root_min[d] = lo;
                root_ext[d] = e;
            }
        }
        root_min.extend(reduce_ext.iter().map(|_| Expr::int(0)));
        root_ext.extend(reduce_ext.iter().copied());
        let leaf_ext = Self::pass_down(&st, &root_ext)?;
        for lv in &st.leaf_iter_vars {
            self.an
                .bind_range(lv.var(), &Expr::int(0), &Expr::int(leaf_ext[lv]));
        }
        let storage = if args.contains(&st.op) {
            None
        } else {
            let mut dims: Vec<i64> = root_ext[..ndim].to_vec();
            for &(dim, factor, offset) in &st.storage_align {
                if dim + 1 >= ndim {
                    continue;
                }
                let rest: i64 = dims[dim + 2..].iter().product();
                let base = dims[dim + 1];
                let found = (base..base + factor).find(|n| (n * rest) % factor == offset);
                match found {
                    Some(n) => dims[dim + 1] = n,
                    None => {
                        return Err(LowerError::Invalid { stage: st.name().to_string(), reason: format!("no padding makes the stride of dimension {dim} equal {offset} modulo {factor}") })
                    }
                }
            }
            let buf = Buffer::new(
                st.name(),
                st.op.dtype(),
                dims.iter().map(|d| Expr::int(*d)).collect(),
                self.scopes[i],
            );
            Some((buf, root_min[..ndim].to_vec()))
        };
        self.bounds[i] = StageBounds {
            root_ext,
            root_min,
            leaf_ext,
            domain_guard,
            storage,
        };
        Ok(())
    }

    /// The thread-bound loops of the stages `t` is (transitively) computed in whose
    /// threads share memory of `scope`, each over its whole range.
    fn relaxed_ancestor_threads(&self, t: usize, scope: StorageScope) -> HashMap<Var, Interval> {
        let mut env = HashMap::new();
        let mut cur = t;
        while let Attach::At { target, .. } = &self.stage(cur).attach {
            let Some(a) = self.sch.index_of_buffer(target) else {
                break;
            };
            let st = self.stage(a);
            for lv in &st.leaf_iter_vars {
                if let Annotation::Bind(th) = st.annotation(lv) {
                    if th.rank() >= scope.rank() {
                        if let Some(e) = self.bounds[a].leaf_ext.get(lv) {
                            env.insert(lv.var().clone(), Interval::range(0, e - 1));
                        }
                    }
                }
            }
            cur = a;
        }
        env
    }

    fn storage_map(&self) -> HashMap<Buffer, (Buffer, Vec<Expr>)> {
        self.sch
            .stages
            .iter()
            .zip(&self.bounds)
            .filter_map(|(s, b)| b.storage.clone().map(|st| (s.op.buffer().clone(), st)))
            .collect()
    }

    /// The loop nest of stage `i`, with the stages attached to it inside.
    fn emit(&mut self, i: usize) -> Result<Stmt, LowerError> {
        let st = self.stage(i).clone();
        let b = self.bounds[i].clone();
        let body = self.bodies[i].clone().expect("emitted stages are computed");
        let storage = self.storage_map();
        let (out_buf, out_off) = storage
            .get(st.op.buffer())
            .cloned()
            .unwrap_or_else(|| (st.op.buffer().clone(), vec![Expr::int(0); st.op.ndim()]));

        let leaf_val: HashMap<IterVar, Expr> = st
            .leaf_iter_vars
            .iter()
            .map(|l| (l.clone(), l.expr()))
            .collect();
        let (rel, mut guards) = Self::pass_up(&st, &b.leaf_ext, &leaf_val);
        let roots = st.root_iter_vars();
        let mut vmap: HashMap<Var, Expr> = HashMap::new();
        for (k, rv) in roots.iter().enumerate() {
            let v = if b.root_min[k].is_const_int(0) {
                rel[rv].clone()
            } else {
                b.root_min[k].clone() + rel[rv].clone()
            };
            vmap.insert(rv.var().clone(), v);
        }
        for (d, g) in b.domain_guard.iter().enumerate() {
            if *g {
                let v = vmap[st.op.axis()[d].var()].clone();
                guards.push(v.ge(0));
                guards.push(v.lt(st.op.shape()[d]));
            }
        }
        let mut reloc = Relocate { storage: &storage };
        let out_idx: Vec<Expr> = shift(
            &st.op
                .axis()
                .iter()
                .map(|a| vmap[a.var()].clone())
                .collect::<Vec<_>>(),
            &out_off,
        );
        let prep = |e: &Expr, reloc: &mut Relocate| reloc.mutate_expr(&substitute(e, &vmap));
        if let ComputeBody::Reduce(r) = &body {
            if let Some(rt) = st
                .leaf_iter_vars
                .iter()
                .position(|l| l.is_reduce() && matches!(st.annotation(l), Annotation::Bind(_)))
            {
                let parts = AllreduceParts {
                    op: r.op,
                    source: prep(&r.source, &mut reloc),
                    condition: r.condition.as_ref().map(|c| prep(c, &mut reloc)),
                    init: r.init.as_ref().map(|x| prep(x, &mut reloc)),
                    out_buf,
                    out_idx,
                    guards,
                };
                return self.emit_allreduce(i, &st, &b, rt, parts);
            }
        }
        let (main, init) = match &body {
            ComputeBody::Expr(e) => (
                Stmt::store(&out_buf, out_idx.clone(), prep(e, &mut reloc)),
                None,
            ),
            ComputeBody::Reduce(Reduce {
                op,
                source,
                init,
                condition,
                ..
            }) => {
                let acc = Expr::load(&out_buf, out_idx.clone());
                let upd = Stmt::store(
                    &out_buf,
                    out_idx.clone(),
                    op.combine(acc, prep(source, &mut reloc)),
                );
                let upd = match condition {
                    Some(c) => Stmt::if_then(prep(c, &mut reloc), upd),
                    None => upd,
                };
                let iv = init
                    .as_ref()
                    .map(|x| prep(x, &mut reloc))
                    .unwrap_or_else(|| op.identity(st.op.dtype()));
                (upd, Some(Stmt::store(&out_buf, out_idx.clone(), iv)))
            }
        };
        let guarded = |s: Stmt, gs: &[Expr]| {
            if gs.is_empty() {
                s
            } else {
                Stmt::if_then(Expr::all(gs.iter().cloned()), s)
            }
        };
        let leaves = st.leaf_iter_vars.clone();
        let first_reduce = leaves.iter().position(|l| l.is_reduce());

        // The initialization of a reduction: loops over the data-parallel leaves inside
        // the first reduce loop, with fresh variables.
        let init_nest = match (init, first_reduce) {
            (Some(init), Some(fr)) => {
                let inner: Vec<&IterVar> = leaves[fr..].iter().filter(|l| !l.is_reduce()).collect();
                let mut imap: HashMap<Var, Expr> = HashMap::new();
                let mut fresh = Vec::new();
                for l in &inner {
                    let v = Var::int(format!("{}.init", l.name()));
                    imap.insert(l.var().clone(), v.to_expr());
                    fresh.push((v, (*l).clone()));
                }
                let reduce_vars: Vec<Var> = leaves
                    .iter()
                    .filter(|l| l.is_reduce())
                    .map(|l| l.var().clone())
                    .collect();
                let iguards: Vec<Expr> = guards
                    .iter()
                    .filter(|g| !tessera_ir::visit::uses_var(g, &|v| reduce_vars.contains(v)))
                    .map(|g| substitute(g, &imap))
                    .collect();
                let mut s = guarded(substitute_stmt(&init, &imap), &iguards);
                for (v, l) in fresh.into_iter().rev() {
                    s = self.make_loop(&st, &l, Some(v), s, b.leaf_ext[&l]);
                }
                Some(s)
            }
            (Some(init), None) => Some(guarded(init, &guards)),
            _ => None,
        };

        let mut stmt = guarded(main, &guards);
        if first_reduce.is_none() {
            if let Some(init) = init_nest.clone() {
                stmt = Stmt::seq(vec![init, stmt]);
            }
        }
        for p in (0..leaves.len()).rev() {
            stmt = self.attach_children(i, &leaves[p], stmt)?;
            stmt = self.make_loop(&st, &leaves[p], None, stmt, b.leaf_ext[&leaves[p]]);
            if Some(p) == first_reduce {
                stmt = Stmt::seq(vec![
                    init_nest.clone().expect("reductions have an init"),
                    stmt,
                ]);
            }
        }
        Ok(stmt)
    }

    /// `For` over a leaf axis with its annotation and pragmas; a loop of extent one
    /// (not thread-bound) is dropped and its variable becomes zero.
    fn make_loop(
        &mut self,
        st: &Stage,
        leaf: &IterVar,
        var: Option<Var>,
        body: Stmt,
        ext: i64,
    ) -> Stmt {
        let ann = st.annotation(leaf);
        let var = var.unwrap_or_else(|| leaf.var().clone());
        if ext == 1 && !matches!(ann, Annotation::Bind(_)) {
            self.unit_vars.insert(var, Expr::int(0));
            return body;
        }
        let mut s = Stmt::for_loop(var, Expr::int(0), Expr::int(ext), loop_kind(ann), body);
        for (iv, key, value) in st.pragmas.iter().rev() {
            if iv == leaf {
                s = Stmt::attr(format!("pragma_{key}"), value.clone(), s);
            }
        }
        s
    }

    /// Places the stages attached at `leaf` of stage `i` before `inner`.
    fn attach_children(
        &mut self,
        i: usize,
        leaf: &IterVar,
        inner: Stmt,
    ) -> Result<Stmt, LowerError> {
        let target = self.stage(i).op.buffer().clone();
        let children: Vec<usize> = (0..self.sch.stages.len())
            .filter(|c| matches!(&self.stage(*c).attach, Attach::At { target: t, axis } if *t == target && axis == leaf))
            .collect();
        if children.is_empty() {
            return Ok(inner);
        }
        // Shared-memory producers are fenced: the sync before keeps threads from
        // overwriting what others still read in the previous iteration, the sync after
        // makes the writes visible before they are read.
        let shared = children
            .iter()
            .any(|c| self.scopes[*c] == StorageScope::Shared);
        let mut parts = Vec::new();
        if shared {
            parts.push(Stmt::storage_sync(StorageScope::Shared));
        }
        for &c in &children {
            parts.push(self.emit(c)?);
        }
        if shared {
            parts.push(Stmt::storage_sync(StorageScope::Shared));
        }
        parts.push(inner);
        let mut s = Stmt::seq(parts);
        for &c in children.iter().rev() {
            let (buf, _) = self.bounds[c]
                .storage
                .clone()
                .expect("attached stages have storage");
            s = Stmt::allocate(buf, s);
        }
        Ok(s)
    }
}

/// Whether a relation transforms reduction axes.
/// Whether `iv` or an axis derived from it (by splits and fuses) is bound to a thread.
fn derives_thread(st: &Stage, iv: &IterVar) -> bool {
    let mut family = vec![iv.clone()];
    for r in &st.relations {
        match r {
            Relation::Split {
                parent,
                outer,
                inner,
                ..
            } => {
                if family.contains(parent) {
                    family.extend([outer.clone(), inner.clone()]);
                }
            }
            Relation::Fuse {
                outer,
                inner,
                fused,
            } => {
                if family.contains(outer) || family.contains(inner) {
                    family.push(fused.clone());
                }
            }
        }
    }
    family
        .iter()
        .any(|x| matches!(st.annotation(x), Annotation::Bind(_)))
}

pub(crate) fn relation_is_reduce(r: &Relation) -> bool {
    match r {
        Relation::Split { parent, .. } => parent.is_reduce(),
        Relation::Fuse { outer, .. } => outer.is_reduce(),
    }
}

/// For a stage at root: the extent of every axis, the value of each root reduce variable
/// in terms of the leaf variables, and the guards of non-divisible reduce splits.
pub(crate) fn reduce_leaf_algebra(
    st: &Stage,
) -> (HashMap<IterVar, i64>, HashMap<Var, Expr>, Vec<Expr>) {
    let mut root_ext: Vec<i64> = st.op.shape().to_vec();
    root_ext.extend(st.op.reduce_axis().iter().map(|r| r.extent().unwrap_or(1)));
    let ext = Lowerer::pass_down(st, &root_ext).expect("extents of a root stage are finite");
    let leaf_val: HashMap<IterVar, Expr> = st
        .leaf_iter_vars
        .iter()
        .map(|l| (l.clone(), l.expr()))
        .collect();
    let (vals, guards) = Lowerer::pass_up(st, &ext, &leaf_val);
    let roots = st
        .op
        .reduce_axis()
        .iter()
        .map(|r| (r.var().clone(), vals[r].clone()))
        .collect();
    (ext, roots, guards)
}
