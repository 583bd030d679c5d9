//! Runtime extents in step 3 of lowering: the loops of a stage whose root axes have a
//! runtime extent ([`IterVarNode::bound`](crate::tensor::IterVarNode::bound)) run to an
//! extent the kernel reads when it starts, and guards keep what those loops cannot
//! bound exactly.
//!
//! A root axis's runtime extent `n` flows down the stage's relations as its static
//! extent does: a split's outer loop runs `⌈n / inner⌉` times, a fused loop whose outer
//! part has a runtime extent runs `n · inner` times (the inner part keeps its static
//! extent, so the fused index still decomposes as it did), one whose inner part has it
//! under an outer part of one iteration runs `n` times. A loop that must stay static —
//! vectorized, unrolled or bound to a GPU thread, a fused loop whose inner part has the
//! runtime extent — runs its static extent.
//!
//! Past `n`, a data-parallel axis computes what its loops reach (the rest of a tile or
//! of a vector): storage keeps the static extents, and nothing valid reads those
//! indices but through a reduction. A reduction must not take them: where its loops do
//! not stop exactly at `n`, its source is masked, `select(index < n, source, identity)`
//! — a blend the vectorizer keeps in vector form, where a guard would leave the loop
//! scalar — and the values past `n`, whatever they hold, are never combined.
//!
//! An axis is bounded where the stage covers it whole (at the root, or computed inside
//! a consumer's loop that needs every index of it: an attention block's keys); a stage
//! covering part of an axis (a tile) computes that part, which its consumer's bounds
//! already limit.
//!
//! An axis whose valid indices lie in blocks ([`Block`](crate::tensor::Block): a batch
//! and a length merged into a product's rows, `valid` of every `radix`) runs over the
//! tiles that hold valid indices only, where its splits make whole tiles of `T` that
//! divide the radix and the loop over them (`o`, the outermost part of the axis) runs
//! to a runtime extent exactly (a plain or parallel loop, or the outer part of fused
//! ones): `o` runs `blocks · c` times, `c = ⌈valid / T⌉` tiles a block, and its tile
//! `o` starts at index `(o / c) · radix + (o % c) · T` — the split's `o · T` plus
//! `(radix − T · c) · (o / c)` ([`Remap`]), wherever the axis's index is rebuilt (the
//! stage's own indices, and the regions of the stages computed inside its loops). The
//! rest of a tile past `valid` is computed, as past a runtime extent.

use super::*;

/// The runtime extents of a stage's loops, and the masks its reduction needs.
#[derive(Default)]
pub(super) struct RuntimeExtents {
    /// Leaf loops that run to a runtime extent.
    pub(super) loops: HashMap<IterVar, Expr>,
    /// Reduce axes whose loops do not stop exactly at the runtime extent: `(axis, n)`,
    /// the source masked by `index < n`.
    pub(super) masked: Vec<(IterVar, Expr)>,
    /// Axes in blocks whose tiles of valid indices are all the loop runs over.
    pub(super) remaps: Vec<Remap>,
    /// Fused loops whose inner part has a runtime extent, run compacted: the fused index
    /// decomposes by that extent (at least 1), not by the inner part's static one.
    pub(super) divisors: HashMap<IterVar, Expr>,
}

impl RuntimeExtents {
    /// The root (and every other) values of stage `st` (bounds `b`) from its leaf loops,
    /// compacted and remapped as these runtime extents say, and the guards of its
    /// splits ([`Lowerer::pass_up`]).
    pub(super) fn root_values(
        &self,
        st: &Stage,
        b: &StageBounds,
    ) -> (HashMap<IterVar, Expr>, Vec<Expr>) {
        let leaf_val: HashMap<IterVar, Expr> = st
            .leaf_iter_vars
            .iter()
            .map(|l| (l.clone(), l.expr()))
            .collect();
        let (mut rel, guards) = Lowerer::pass_up(st, &b.leaf_ext, &leaf_val, &self.divisors);
        for r in &self.remaps {
            let shifted = rel[&r.root].clone() + r.shift(&rel[&r.tile]);
            rel.insert(r.root.clone(), shifted);
        }
        (rel, guards)
    }

    /// The roots of stage `st` (leaf extents `ext`) whose loops run compacted or
    /// remapped, each with its extent: their index stays in it (their splits divide it
    /// and their runtime loops run exactly), which bounds on the decomposed indices
    /// cannot show.
    pub(super) fn roots_in_extent(
        &self,
        st: &Stage,
        ext: &HashMap<IterVar, i64>,
    ) -> Vec<(Var, i64)> {
        let mut out = Vec::new();
        for root in st.root_iter_vars() {
            let mut derived = vec![root.clone()];
            let mut exact = true;
            for r in &st.relations {
                match r {
                    Relation::Split {
                        parent,
                        outer,
                        inner,
                        ..
                    } if derived.contains(parent) => {
                        let (o, i, p) = (ext.get(outer), ext.get(inner), ext.get(parent));
                        exact &= matches!((o, i, p), (Some(o), Some(i), Some(p)) if o * i == *p);
                        derived.extend([outer.clone(), inner.clone()]);
                    }
                    Relation::Fuse {
                        outer,
                        inner,
                        fused,
                    } if derived.contains(outer) || derived.contains(inner) => {
                        derived.push(fused.clone())
                    }
                    _ => {}
                }
            }
            let runtime = derived
                .iter()
                .any(|v| self.divisors.contains_key(v) || self.remaps.iter().any(|r| r.tile == *v));
            if let (true, true, Some(e)) = (exact, runtime, root.extent()) {
                out.push((root.var().clone(), e));
            }
        }
        out
    }
}

/// Whether loop variable `iv` of stage `st` runs to a runtime extent exactly: a plain
/// or parallel leaf, or a part of fused loops that does (its iterations compacted where
/// an inner part has one); not one split further, nor vectorized or unrolled.
fn runs_exactly(st: &Stage, iv: &IterVar) -> bool {
    if st.leaf_iter_vars.contains(iv) {
        return may_run_to_runtime_extent(st, iv);
    }
    st.relations.iter().any(|r| match r {
        Relation::Fuse {
            outer,
            inner,
            fused,
        } => (outer == iv || inner == iv) && runs_exactly(st, fused),
        Relation::Split { .. } => false,
    })
}

/// A root axis in blocks whose outermost part `tile` runs over the tiles (of `size`
/// indices) that hold valid ones: `per_block` of them in each block of `radix`.
#[derive(Clone, Debug)]
pub(super) struct Remap {
    pub(super) root: IterVar,
    pub(super) tile: IterVar,
    pub(super) size: i64,
    pub(super) radix: i64,
    pub(super) per_block: Expr,
}

impl Remap {
    /// What the root's index rebuilt by the splits (`tile · size` plus the rest) gains
    /// where the tile loop's value is `o`.
    pub(super) fn shift(&self, o: &Expr) -> Expr {
        let gap = Expr::int(self.radix) - Expr::int(self.size) * self.per_block.clone();
        gap * Expr::floordiv(o.clone(), self.per_block.clone())
    }
}

/// The remap of stage `st`'s root `root` (covered whole, bounds `b`), where its valid
/// indices lie in blocks and its loops allow it (see the module header): the tile
/// loop's runtime extent, and the variables the splits from the root to it make (which
/// the tile loop replaces).
fn remap_of(st: &Stage, b: &StageBounds, root: &IterVar) -> Option<(Remap, Expr, Vec<IterVar>)> {
    // (one block holds its valid indices first: a runtime extent)
    let block = root.block().filter(|b| Some(b.radix) != root.extent())?;
    let ext = |iv: &IterVar| b.leaf_ext.get(iv).copied();
    // the chain of splits from the root to its outermost part
    let mut tile = root.clone();
    let mut chain = Vec::new();
    let mut size = 1i64;
    while let Some((outer, inner)) = st.relations.iter().find_map(|r| match r {
        Relation::Split {
            parent,
            outer,
            inner,
            ..
        } if *parent == tile => Some((outer.clone(), inner.clone())),
        _ => None,
    }) {
        size *= ext(&inner)?;
        chain.push(tile);
        tile = outer;
    }
    let whole = ext(&tile)? * size == root.extent()?;
    if !whole || size <= 0 || block.radix % size != 0 || root.extent()? % block.radix != 0 {
        return None;
    }
    // the tile loop must run to its runtime extent exactly
    if !runs_exactly(st, &tile) {
        return None;
    }
    let one = Expr::int(1);
    let per_block = Expr::max(
        Expr::floordiv(block.valid.clone() + Expr::int(size - 1), Expr::int(size)),
        one,
    );
    let blocks = match root.bound() {
        Some(n) => Expr::floordiv(
            n.clone() + Expr::int(block.radix - 1),
            Expr::int(block.radix),
        ),
        None => Expr::int(root.extent()? / block.radix),
    };
    let count = blocks * per_block.clone();
    let remap = Remap {
        root: root.clone(),
        tile,
        size,
        radix: block.radix,
        per_block,
    };
    Some((remap, count, chain))
}

/// Whether a leaf loop can run to a runtime extent: a plain or parallel loop.
fn may_run_to_runtime_extent(st: &Stage, leaf: &IterVar) -> bool {
    matches!(st.annotation(leaf), Annotation::None | Annotation::Parallel)
}

/// `source` of a reduction by `op` into `dtype`, its identity where any of `masks`
/// (`index < n`) fails.
pub(crate) fn mask(
    source: Expr,
    masks: &[Expr],
    op: crate::tensor::ReduceOp,
    dtype: tessera_ir::DataType,
) -> Expr {
    if masks.is_empty() {
        source
    } else {
        Expr::select(Expr::all(masks.iter().cloned()), source, op.identity(dtype))
    }
}

impl Lowerer<'_> {
    /// Records a stage's runtime loops ([`Lowerer::runtime_extents`]) and returns the
    /// masks of its reduction, in root indices `vmap`.
    pub(super) fn runtime_masks(
        &mut self,
        runtime: RuntimeExtents,
        vmap: &HashMap<Var, Expr>,
    ) -> Vec<Expr> {
        self.runtime_loops.extend(runtime.loops);
        runtime
            .masked
            .iter()
            .map(|(root, n)| vmap[root.var()].lt(n))
            .collect()
    }

    /// The runtime extents of stage `st` whose bounds are `b` (see the module header).
    pub(super) fn runtime_extents(st: &Stage, b: &StageBounds) -> RuntimeExtents {
        let roots = st.root_iter_vars();
        // per variable with a runtime extent: that extent, and the root it comes from
        let mut dynamic: HashMap<IterVar, (Expr, IterVar)> = HashMap::new();
        let mut remaps = Vec::new();
        // the splits from a remapped root to its tile loop, which the tile loop replaces
        let mut chain: Vec<IterVar> = Vec::new();
        for (k, r) in roots.iter().enumerate() {
            let whole = b.root_min[k].is_const_int(0) && Some(b.root_ext[k]) == r.extent();
            if !whole {
                continue;
            }
            if let Some((remap, count, splits)) = remap_of(st, b, r) {
                chain.extend(splits);
                dynamic.insert(remap.tile.clone(), (count, r.clone()));
                remaps.push(remap);
                continue;
            }
            // one block (a batch of one): its valid indices come first
            let single = r.block().filter(|b| Some(b.radix) == r.extent());
            if let Some(n) = single.map(|b| &b.valid).or(r.bound()) {
                dynamic.insert(r.clone(), (n.clone(), r.clone()));
            }
        }
        if dynamic.is_empty() {
            return RuntimeExtents::default();
        }
        let mut inexact: Vec<IterVar> = Vec::new();
        let mut divisors = HashMap::new();
        for rel in &st.relations {
            match rel {
                Relation::Split { parent, .. } if chain.contains(parent) => {}
                Relation::Split {
                    parent,
                    outer,
                    inner,
                    ..
                } => {
                    if let Some((n, root)) = dynamic.get(parent).cloned() {
                        let f = b.leaf_ext.get(inner).copied().unwrap_or(1).max(1);
                        let outer_n = Expr::floordiv(n + Expr::int(f - 1), Expr::int(f));
                        dynamic.insert(outer.clone(), (outer_n, root.clone()));
                        inexact.push(root);
                    }
                }
                Relation::Fuse {
                    outer,
                    inner,
                    fused,
                } => {
                    let outer_ext = b.leaf_ext.get(outer).copied().unwrap_or(1);
                    let parts = (dynamic.get(outer).cloned(), dynamic.get(inner).cloned());
                    // a runtime inner part under more than one outer iteration, where
                    // the fused loop runs exactly: the iterations compacted
                    if let (outer_n, Some((n_in, r_in))) = &parts {
                        let compact = (outer_n.is_some() || outer_ext > 1)
                            && !super::relation_is_reduce(rel)
                            && runs_exactly(st, fused);
                        if compact {
                            let (n_out, root) = match outer_n {
                                Some((n, root)) => (n.clone(), root.clone()),
                                None => (Expr::int(outer_ext), r_in.clone()),
                            };
                            dynamic.insert(fused.clone(), (n_out * n_in.clone(), root));
                            let divisor = Expr::max(n_in.clone(), Expr::int(1));
                            divisors.insert(fused.clone(), divisor);
                            continue;
                        }
                    }
                    match parts {
                        // the fused index decomposes by the inner part's static extent:
                        // a runtime outer part keeps the valid iterations first
                        (Some((n, root)), inner_n) => {
                            if let Some((_, r)) = inner_n {
                                inexact.push(r);
                            }
                            let inner_ext = b.leaf_ext.get(inner).copied().unwrap_or(1);
                            dynamic.insert(fused.clone(), (n * Expr::int(inner_ext), root));
                        }
                        // so does a runtime inner part under an outer part of one
                        // iteration ([1, size, …] values fused whole)
                        (None, Some((n, root))) if outer_ext == 1 => {
                            dynamic.insert(fused.clone(), (n, root));
                        }
                        (None, Some((_, root))) => inexact.push(root),
                        (None, None) => {}
                    }
                }
            }
        }
        let mut loops = HashMap::new();
        for leaf in &st.leaf_iter_vars {
            if let Some((n, root)) = dynamic.get(leaf) {
                if may_run_to_runtime_extent(st, leaf) {
                    loops.insert(leaf.clone(), n.clone());
                } else {
                    inexact.push(root.clone());
                }
            }
        }
        let mut masked: Vec<(IterVar, Expr)> = Vec::new();
        for root in inexact.into_iter().filter(|r| r.is_reduce()) {
            if masked.iter().all(|(r, _)| *r != root) {
                let (n, _) = dynamic[&root].clone();
                masked.push((root, n));
            }
        }
        RuntimeExtents {
            loops,
            masked,
            remaps,
            divisors,
        }
    }
}
