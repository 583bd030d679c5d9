//! Step 2 of lowering, bound inference: each stage's root ranges (consumers first: the
//! region its consumers read while the loops inside its attachment point run, thread
//! loops sharing its storage relaxed), its leaf extents through the split and fuse
//! relations (`pass_down`), and the root indices rebuilt from the leaves (`pass_up`).

use super::interval::{interval, union, Interval};
use super::*;

/// A dimension of an attached stage narrowed to the region its readers use: its first
/// index, its extent, and whether it may leave the tensor.
#[derive(Clone)]
struct Narrowed {
    min: Expr,
    ext: i64,
    guard: bool,
}

impl<'a> Lowerer<'a> {
    /// The ranges of the root axes of stage `c` over one run of loop `axis` of the stage
    /// of `target`, where `c` is computed ([`Schedule::computed_inside`]; its bounds and
    /// those of the stages between inferred): `c`'s own region, in terms of the loops of
    /// the stage it is computed at, with the loops of every stage between `c` and the
    /// target's loop relaxed to their whole range. `None` where a range is not known.
    pub(super) fn region_env(
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
    pub(super) fn pass_down(
        st: &Stage,
        root_ext: &[i64],
    ) -> Result<HashMap<IterVar, i64>, LowerError> {
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
    /// non-divisible splits. A fused loop in `divisors` (run compacted, `runtime.rs`)
    /// decomposes by its runtime divisor.
    pub(super) fn pass_up(
        st: &Stage,
        ext: &HashMap<IterVar, i64>,
        leaf_val: &HashMap<IterVar, Expr>,
        divisors: &HashMap<IterVar, Expr>,
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
                    let by = divisors
                        .get(fused)
                        .cloned()
                        .unwrap_or_else(|| Expr::int(ext[inner]));
                    val.insert(outer.clone(), Expr::floordiv(f.clone(), by.clone()));
                    val.insert(inner.clone(), Expr::floormod(f, by));
                }
            }
        }
        (val, guards)
    }

    /// The same over intervals.
    pub(super) fn pass_up_interval(
        st: &Stage,
        ext: &HashMap<IterVar, i64>,
        leaf: HashMap<IterVar, Interval>,
        divisors: &HashMap<IterVar, Expr>,
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
                    let k = divisors
                        .get(fused)
                        .cloned()
                        .unwrap_or_else(|| Expr::int(ext[inner]));
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

    pub(super) fn infer_bounds(&mut self, i: usize, args: &[Tensor]) -> Result<(), LowerError> {
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
            let narrowed = self.attached_region(i, &st, target, axis)?;
            for (d, n) in narrowed.into_iter().enumerate() {
                if let Some(n) = n {
                    root_min[d] = n.min;
                    root_ext[d] = n.ext;
                    domain_guard[d] = n.guard;
                }
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
            Some(self.storage_of(i, &st, &root_ext[..ndim], &root_min[..ndim])?)
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

    /// For stage `i` computed at loop `axis` of `target`: per data-parallel dimension,
    /// the region its readers use while that loop runs — its first index, extent and
    /// whether it may leave the tensor — where that region is known and smaller than the
    /// tensor (`None`: the whole dimension).
    fn attached_region(
        &mut self,
        i: usize,
        st: &Stage,
        target: &Buffer,
        axis: &IterVar,
    ) -> Result<Vec<Option<Narrowed>>, LowerError> {
        let shape = st.op.shape().to_vec();
        let ndim = shape.len();
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
        // (fused loops run compacted, and a tile of an axis in blocks starts where its
        // remap puts it: `runtime.rs`)
        let runtime = Self::runtime_extents(&tst, &tb);
        let mut roots = Self::pass_up_interval(&tst, &tb.leaf_ext, leaf_iv, &runtime.divisors);
        // roots whose loops run compacted or remapped lie in their extents
        // (`runtime.rs`), which the bounds of the decomposed indices cannot show
        let in_tiles = runtime.roots_in_extent(&tst, &tb.leaf_ext);
        for r in runtime.remaps {
            // (over every tile: the whole axis, as the splits give it)
            if let Some(o) = roots.get(&r.tile).filter(|o| o.is_point()) {
                let shift = r.shift(&o.lo);
                let a = roots[&r.root].clone();
                let moved = Interval {
                    lo: a.lo + shift.clone(),
                    hi: a.hi + shift,
                };
                roots.insert(r.root.clone(), moved);
            }
        }
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
        // per dimension, whether every read of it is at a remapped root of the target
        // that lies in it
        let mut tiled = vec![!in_tiles.is_empty(); ndim];
        for (body, env) in &readers {
            for acc in accesses(body, st.op.buffer()) {
                for (d, idx) in acc.iter().enumerate() {
                    tiled[d] &= matches!(idx.node(), ExprNode::Var(v)
                        if in_tiles.iter().any(|(r, e)| r == v && *e <= shape[d]));
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
        let mut narrowed = vec![None; ndim];
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
            let inside = tiled[d]
                || (self.an.can_prove(&lo.ge(0))
                    && self.an.can_prove(&(lo.clone() + e).le(shape[d])));
            let guard = !inside;
            narrowed[d] = Some(Narrowed {
                min: lo,
                ext: e,
                guard,
            });
        }
        Ok(narrowed)
    }

    /// Stage `i`'s storage: its region's extents (padded as its `storage_align` asks)
    /// in its scope, and the region's offset per dimension.
    fn storage_of(
        &self,
        i: usize,
        st: &Stage,
        root_ext: &[i64],
        root_min: &[Expr],
    ) -> Result<(Buffer, Vec<Expr>), LowerError> {
        let mut dims: Vec<i64> = root_ext.to_vec();
        let ndim = dims.len();
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
        Ok((buf, root_min.to_vec()))
    }

    /// The thread-bound loops of the stages `t` is (transitively) computed in whose
    /// threads share memory of `scope`, each over its whole range.
    pub(super) fn relaxed_ancestor_threads(
        &self,
        t: usize,
        scope: StorageScope,
    ) -> HashMap<Var, Interval> {
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
}

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
    let (vals, guards) = Lowerer::pass_up(st, &ext, &leaf_val, &HashMap::new());
    let roots = st
        .op
        .reduce_axis()
        .iter()
        .map(|r| (r.var().clone(), vals[r].clone()))
        .collect();
    (ext, roots, guards)
}
