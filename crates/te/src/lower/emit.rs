//! Step 3 of lowering, loop emission: each stage a loop nest over its leaf axes, the
//! root indices rebuilt from the leaves, guards where a split does not divide or a
//! region may leave its tensor, a reduction's initialization above its first reduce
//! loop, attached stages inside their loop in an allocation of their region's size and
//! scope, shared-memory producers fenced by syncs.

use super::*;

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

fn loop_kind(ann: Annotation) -> ForKind {
    match ann {
        Annotation::None => ForKind::Serial,
        Annotation::Parallel => ForKind::Parallel,
        Annotation::Vectorize => ForKind::Vectorized,
        Annotation::Unroll => ForKind::Unrolled,
        Annotation::Bind(t) => ForKind::ThreadBinding(t),
    }
}

impl<'a> Lowerer<'a> {
    /// Every stage computed at the root, in stage order, each in an allocation of its
    /// storage unless it is an argument.
    pub(super) fn emit_roots(&mut self, args: &[Tensor]) -> Result<Stmt, LowerError> {
        let sch = self.sch;
        let at_root = |st: &Stage| st.op.body().is_some() && st.attach == Attach::Root;
        let mut roots = Vec::new();
        for (i, st) in sch.stages.iter().enumerate() {
            if at_root(st) {
                roots.push(self.emit(i)?);
            }
        }
        let mut body = Stmt::seq(roots);
        for (i, st) in sch.stages.iter().enumerate().rev() {
            if at_root(st) && !args.contains(&st.op) {
                let (buf, _) = self.bounds[i]
                    .storage
                    .clone()
                    .expect("root stages have storage");
                body = Stmt::allocate(buf, body);
            }
        }
        Ok(body)
    }

    pub(super) fn storage_map(&self) -> HashMap<Buffer, (Buffer, Vec<Expr>)> {
        self.sch
            .stages
            .iter()
            .zip(&self.bounds)
            .filter_map(|(s, b)| b.storage.clone().map(|st| (s.op.buffer().clone(), st)))
            .collect()
    }

    /// The loop nest of stage `i`, with the stages attached to it inside.
    pub(super) fn emit(&mut self, i: usize) -> Result<Stmt, LowerError> {
        let st = self.stage(i).clone();
        let b = self.bounds[i].clone();
        let body = self.bodies[i].clone().expect("emitted stages are computed");
        let storage = self.storage_map();
        let (out_buf, out_off) = storage
            .get(st.op.buffer())
            .cloned()
            .unwrap_or_else(|| (st.op.buffer().clone(), vec![Expr::int(0); st.op.ndim()]));

        // runtime extents: the loops recorded, fused loops compacted, tiles of blocks
        // remapped, a reduction's source masked past them
        let runtime = Self::runtime_extents(&st, &b);
        let (rel, mut guards) = runtime.root_values(&st, &b);
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
        guards.extend(self.region_guards(&st, &b, &vmap));
        let masks = self.runtime_masks(runtime, &vmap);
        let masked = |source: Expr, op: &crate::tensor::ReduceOp| {
            super::runtime::mask(source, &masks, *op, st.op.dtype())
        };
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
                    source: masked(prep(&r.source, &mut reloc), &r.op),
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
                    op.combine(acc, masked(prep(source, &mut reloc), op)),
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

    /// The guards of stage `st` (bounds `b`, root indices `vmap`) besides its splits':
    /// where its region may leave the tensor, the tensor's bounds.
    fn region_guards(
        &mut self,
        st: &Stage,
        b: &StageBounds,
        vmap: &HashMap<Var, Expr>,
    ) -> Vec<Expr> {
        let mut guards = Vec::new();
        for (d, g) in b.domain_guard.iter().enumerate() {
            if *g {
                let v = vmap[st.op.axis()[d].var()].clone();
                guards.push(v.ge(0));
                guards.push(v.lt(st.op.shape()[d]));
            }
        }
        guards
    }

    /// `For` over a leaf axis with its annotation and pragmas; a loop of extent one
    /// (not thread-bound) is dropped and its variable becomes zero.
    pub(super) fn make_loop(
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
        let extent = match self.runtime_loops.get(leaf) {
            Some(n) => n.clone(),
            None => Expr::int(ext),
        };
        let mut s = Stmt::for_loop(var, Expr::int(0), extent, loop_kind(ann), body);
        for (iv, key, value) in st.pragmas.iter().rev() {
            if iv == leaf {
                s = Stmt::attr(format!("pragma_{key}"), value.clone(), s);
            }
        }
        s
    }

    /// Places the stages attached at `leaf` of stage `i` before `inner`.
    pub(super) fn attach_children(
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
