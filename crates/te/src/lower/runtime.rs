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

use super::*;

/// The runtime extents of a stage's loops, and the masks its reduction needs.
#[derive(Default)]
pub(super) struct RuntimeExtents {
    /// Leaf loops that run to a runtime extent.
    pub(super) loops: HashMap<IterVar, Expr>,
    /// Reduce axes whose loops do not stop exactly at the runtime extent: `(axis, n)`,
    /// the source masked by `index < n`.
    pub(super) masked: Vec<(IterVar, Expr)>,
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
    /// Records stage `st`'s runtime loops ([`Lowerer::runtime_extents`]) and returns the
    /// masks of its reduction, in root indices `vmap`.
    pub(super) fn runtime_masks(
        &mut self,
        st: &Stage,
        b: &StageBounds,
        vmap: &HashMap<Var, Expr>,
    ) -> Vec<Expr> {
        let runtime = Self::runtime_extents(st, b);
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
        for (k, r) in roots.iter().enumerate() {
            let Some(n) = r.bound() else { continue };
            let whole = b.root_min[k].is_const_int(0) && Some(b.root_ext[k]) == r.extent();
            if whole {
                dynamic.insert(r.clone(), (n.clone(), r.clone()));
            }
        }
        if dynamic.is_empty() {
            return RuntimeExtents::default();
        }
        let mut inexact: Vec<IterVar> = Vec::new();
        for rel in &st.relations {
            match rel {
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
                    match (dynamic.get(outer).cloned(), dynamic.get(inner).cloned()) {
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
        RuntimeExtents { loops, masked }
    }
}
