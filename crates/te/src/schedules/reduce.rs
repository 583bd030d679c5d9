//! The default schedules of pooling and reductions: pooling windows over an output row
//! tile with the channels vectorized, reductions along the last axis (softmax, norms)
//! one row per iteration with the row's loops vectorized, others generic.

use super::*;

/// Whether `t` is a padding (tag `injective,pad`) that adds nothing: a copy of its one
/// input.
pub(super) fn is_identity_pad(t: &Tensor) -> bool {
    t.tag() == crate::ops::TAG_PAD && matches!(t.inputs(), [x] if x.shape() == t.shape())
}

/// Whether `t` is a pooling stage (a max or sum over a window).
pub(super) fn is_pool(t: &Tensor) -> bool {
    matches!(
        t.tag(),
        "pool_max" | "pool_sum" | "adaptive_pool_max" | "adaptive_pool_sum"
    )
}

/// Whether some load of `t`'s body indexes its last dimension with a reduction variable:
/// the last output axis is pooled (NCHW's width), not carried through (NHWC's channels).
pub(super) fn last_axis_reduced(t: &Tensor) -> bool {
    let reduce: Vec<tessera_ir::Var> = t.reduce_axis().iter().map(|r| r.var().clone()).collect();
    let Some(body) = t.body() else {
        return false;
    };
    let mut found = false;
    for e in body.exprs() {
        tessera_ir::visit::post_order_visit(e, &mut |x| {
            if let tessera_ir::ExprNode::Load { indices, .. } = x.node() {
                if let Some(last) = indices.last() {
                    found |= tessera_ir::visit::uses_var(last, &|v| reduce.contains(v));
                }
            }
        });
    }
    found
}

/// Pooling (tags `pool_max`, `pool_sum`, `adaptive_pool_*`): memory-bound, so it reads
/// its input once and keeps nothing else in memory. Its padding stage is inlined by
/// [`schedule_stages`] (a guarded load in the window, not a padded copy of the input).
/// When the last axis is carried through (NHWC's channels), the window accumulates in
/// registers (a `local` cache) over a tile of up to 8 vectors of it, the window's loops
/// outside the tile; the axes before the last spatial one are fused and parallel, the
/// last spatial axis and the tiles loops inside (their indices counters, not
/// divisions). When the last axis is pooled (NCHW's width, read with a stride): a max
/// pool by rows ([`schedule_pool_rows`]), a sum by the reduction schedule, both from a
/// padded copy of the input.
pub fn schedule_pool(s: &mut Schedule, t: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let ax = s.axis(t)?;
    if ax.is_empty() {
        return schedule_reduction(s, t, p);
    }
    if last_axis_reduced(t) {
        // measured: an average pool ran slower by rows than by the reduction schedule
        // (0.49 against 0.40 ms on 56×56×64, 3×3), a max pool faster (4.1–5.0 against
        // 6.7–7.3 ms on ResNet's stem pool)
        return if t.tag().ends_with("pool_max") {
            schedule_pool_rows(s, t, &ax, p)
        } else {
            schedule_reduction(s, t, p)
        };
    }
    schedule_carried_columns(s, t, &ax, p)
}

/// A reduction that carries its last axis through (NHWC's channels: every load indexes
/// its last dimension with the output's last axis, none with a reduction axis): the
/// reduction accumulates in registers (a `local` cache) over a tile of up to 8 vectors
/// of the last axis, the reduction loops outside the tile, so each step reads a
/// contiguous run; the axes before the last spatial one fused and parallel. Pooling's
/// window and a column reduction (instance norm's statistics of an NHWC value, per
/// channel over the pixels) alike — read with the reduction innermost, each step would
/// load one element a cache line, 2 KiB apart for 512 channels.
fn schedule_carried_columns(
    s: &mut Schedule,
    t: &Tensor,
    ax: &[IterVar],
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let Some(last) = ax.last().cloned() else {
        return Ok(());
    };
    let cols = *t.shape().last().unwrap_or(&1);
    let lanes = if p.vectorize {
        pick_vector(cols, p.vector_lanes)
    } else {
        1
    };
    let tile = if lanes > 1 {
        lanes * pick_factor(cols / lanes, 8)
    } else {
        pick_factor(cols, 8)
    };
    let cc = s.cache_write(t, StorageScope::Local)?;
    let (co, ci) = s.split(t, &last, tile)?;
    let (outer, at) = if ax.len() >= 3 {
        (fuse_run(s, t, &ax[0], &ax[1..ax.len() - 2])?, co)
    } else {
        let mut run = ax[..ax.len() - 1].to_vec();
        run.push(co);
        let outer = fuse_run(s, t, &run[0], &run[1..])?;
        (outer.clone(), outer)
    };
    if lanes > 1 {
        s.vectorize(t, &ci)?;
    } else {
        s.unroll(t, &ci)?;
    }
    s.compute_at(&cc, t, &at)?;
    let cax = s.axis(&cc)?;
    let cl = cax
        .last()
        .cloned()
        .expect("the cache has the output's axes");
    let mut order = s.reduce_axis(&cc)?;
    let (lo, li) = s.split(&cc, &cl, lanes)?;
    order.extend([lo.clone(), li.clone()]);
    s.reorder(&cc, &order)?;
    s.unroll(&cc, &lo)?;
    if lanes > 1 {
        s.vectorize(&cc, &li)?;
    }
    if p.num_cores > 1 {
        s.parallel(t, &outer)?;
    }
    Ok(())
}

/// A pool whose last axis is pooled (NCHW): every axis but the last fused and parallel,
/// and per output row the window's loops outside a loop over the row's outputs, which
/// accumulate in a `local` row.
fn schedule_pool_rows(
    s: &mut Schedule,
    t: &Tensor,
    ax: &[IterVar],
    p: CpuParams,
) -> Result<(), ScheduleError> {
    if ax.len() < 2 {
        return schedule_reduction(s, t, p);
    }
    let cc = s.cache_write(t, StorageScope::Local)?;
    let outer = fuse_run(s, t, &ax[0], &ax[1..ax.len() - 1])?;
    s.compute_at(&cc, t, &outer)?;
    let cax = s.axis(&cc)?;
    let mut order = s.reduce_axis(&cc)?;
    order.extend(cax.last().cloned());
    s.reorder(&cc, &order)?;
    if p.num_cores > 1 {
        s.parallel(t, &outer)?;
    }
    Ok(())
}

/// Any other reduction: a row reduction ([`schedule_row_reduction`]) where it is one,
/// else parallel over the outermost data-parallel axis.
pub fn schedule_reduction(s: &mut Schedule, t: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    if schedule_row_reduction(s, t, p)? {
        return Ok(());
    }
    let ax = s.axis(t)?;
    if p.vectorize && ax.len() >= 2 && carries_last_axis(t) {
        return schedule_carried_columns(s, t, &ax, p);
    }
    if p.num_cores > 1 {
        if let Some(first) = ax.first() {
            s.parallel(t, first)?;
        }
    }
    Ok(())
}

/// Whether every load of `t`'s body indexes its last dimension with exactly the output's
/// last axis (a column reduction: the channels of NHWC carried through, the reduction
/// over other dimensions), the last axis at least a vector long.
fn carries_last_axis(t: &Tensor) -> bool {
    let (Some(last), Some(body)) = (t.axis().last(), t.body()) else {
        return false;
    };
    if last.extent().is_none_or(|e| e < 4) {
        return false;
    }
    let mut carried = true;
    for e in body.exprs() {
        tessera_ir::visit::post_order_visit(e, &mut |x| {
            if let tessera_ir::ExprNode::Load { indices, .. } = x.node() {
                carried &= matches!(
                    indices.last().map(|i| i.node()),
                    Some(tessera_ir::ExprNode::Var(v)) if v == last.var()
                );
            }
        });
    }
    carried
}

/// The extent of `t`'s one reduction axis when it is a row reduction: every load that
/// uses the axis indexes its last dimension with it and no other dimension (softmax's
/// maximum and sum, layer norm's mean and variance over the last axis, reading rows).
pub(super) fn row_reduction_extent(t: &Tensor) -> Option<i64> {
    match t.reduce_axis() {
        [_] => innermost_reduction_extent(t),
        _ => None,
    }
}

/// The extent of `t`'s innermost reduction axis when the loads read it contiguously:
/// every load that uses it indexes its last dimension with exactly it, and no load indexes
/// its last dimension with another reduction axis. A row reduction
/// ([`row_reduction_extent`]), or one over several trailing axes — a reduction over
/// every axis (DynamicQuantizeLinear's minimum and maximum of a whole activation).
fn innermost_reduction_extent(t: &Tensor) -> Option<i64> {
    let axes = t.reduce_axis();
    let (k, others) = axes.split_last()?;
    let body = t.body()?;
    let is_k = |v: &tessera_ir::Var| v == k.var();
    let is_other = |v: &tessera_ir::Var| others.iter().any(|o| v == o.var());
    let mut contiguous = true;
    for e in body.exprs() {
        tessera_ir::visit::post_order_visit(e, &mut |x| {
            if let tessera_ir::ExprNode::Load { indices, .. } = x.node() {
                let Some((last, rest)) = indices.split_last() else {
                    return;
                };
                let last_is_k = matches!(last.node(), tessera_ir::ExprNode::Var(v) if is_k(v));
                let uses_k = indices
                    .iter()
                    .any(|i| tessera_ir::visit::uses_var(i, &is_k));
                let k_elsewhere = rest.iter().any(|i| tessera_ir::visit::uses_var(i, &is_k));
                let other_last = tessera_ir::visit::uses_var(last, &is_other);
                contiguous &= (!uses_k || (last_is_k && !k_elsewhere)) && !other_last;
            }
        });
    }
    contiguous.then(|| k.extent()).flatten()
}

/// A reduction along rows or over trailing axes ([`innermost_reduction_extent`], the
/// innermost at least two vectors long, a whole number of them — or at least four
/// vectors long, its last step guarded): the innermost factored
/// (`rfactor`) into a vector of partial results computed per output element (at root
/// for a reduction to one value), one vector load and one vector operation per step
/// instead of a chain of scalar ones, then reduced across its lanes; the output's axes
/// fused and parallel (layer norm's `[1, 197]` means ran on one core, parallel over the
/// batch). Returns whether it applied.
pub(super) fn schedule_row_reduction(
    s: &mut Schedule,
    t: &Tensor,
    p: CpuParams,
) -> Result<bool, ScheduleError> {
    let nd = t.ndim();
    let Some(extent) = innermost_reduction_extent(t).filter(|_| p.vectorize) else {
        return Ok(false);
    };
    let mut lanes = pick_vector(extent, p.vector_lanes);
    // An extent that no vector divides (an odd one: wav2vec2's 3,199 frames) still gets
    // a register's worth of partial results, the last step guarded: the vectorizer
    // leaves such a loop scalar, but its partial sums are independent chains instead
    // of one chain of dependent additions (4 cycles each).
    if lanes < 4 && extent >= 4 * p.vector_lanes {
        lanes = p.vector_lanes;
    }
    if lanes < 4 || extent < 2 * lanes {
        return Ok(false);
    }
    let k = s.reduce_axis(t)?;
    let (_ko, ki) = s.split(t, k.last().expect("a reduction axis"), lanes)?;
    let rf = s.rfactor(t, &ki, nd)?;
    let ax = s.axis(t)?;
    // a reduction to one value (over every axis) computes its partial vector at root
    let row = match ax.split_first() {
        Some((first, rest)) => {
            let row = fuse_run(s, t, first, rest)?;
            s.compute_at(&rf, t, &row)?;
            Some(row)
        }
        None => None,
    };
    let rax = s.axis(&rf)?;
    let mut order = s.reduce_axis(&rf)?;
    order.extend(rax.iter().cloned());
    s.reorder(&rf, &order)?;
    s.vectorize(&rf, &rax[nd])?;
    if let (Some(row), true) = (row, p.num_cores > 1) {
        s.parallel(t, &row)?;
    }
    Ok(true)
}

/// Threads a row's reduction is spread over on a GPU: one warp.
pub const GPU_ROW_THREADS: i64 = 32;

/// A row reduction ([`row_reduction_extent`], at least two warps long) on a GPU: one
/// block per output element, the row split over a warp's threads (`threadIdx.x`, a
/// cross-thread reduction: warp shuffles in CUDA), which read it contiguously — TVM's
/// CUDA schedules for softmax and a batch-1 dense. With one thread per output instead,
/// softmax over 1,000 classes ran on one thread and a 1,000 × 512 dense on 16 blocks, each
/// thread walking its own weight row (uncoalesced). Returns whether it applied.
pub(super) fn schedule_gpu_row_reduction(
    s: &mut Schedule,
    t: &Tensor,
    p: CpuParams,
) -> Result<bool, ScheduleError> {
    let Some(extent) = row_reduction_extent(t) else {
        return Ok(false);
    };
    if extent < 2 * GPU_ROW_THREADS || p.gpu_threads < GPU_ROW_THREADS {
        return Ok(false);
    }
    let ax = s.axis(t)?;
    let k = s.reduce_axis(t)?;
    let (_ko, ki) = s.split(t, &k[0], GPU_ROW_THREADS)?;
    if let Some(first) = ax.first() {
        let row = fuse_run(s, t, first, &ax[1..])?;
        s.bind(t, &row, ThreadAxis::BlockIdxX)?;
    }
    s.bind(t, &ki, ThreadAxis::ThreadIdxX)?;
    Ok(true)
}
