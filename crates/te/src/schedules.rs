//! Default CPU schedules: hand-written, reasonable for any shape, used when nothing was
//! tuned. Register-blocked (a `local` accumulator tile computed at the output tile,
//! reduction outermost inside it, rows unrolled, columns vectorized), parallel over the
//! outermost tile loop.

use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::tensor::Tensor;
use tessera_ir::StorageScope;

/// What the CPU schedules need to know about the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuParams {
    /// float32 lanes of the widest vector register (16 with AVX-512, 8 with AVX2).
    pub vector_lanes: i64,
    pub num_cores: usize,
    /// Whether to vectorize (off only to measure what vectorization brings).
    pub vectorize: bool,
}

/// The largest divisor of `extent` that is at most `target` (at least 1).
pub fn pick_factor(extent: i64, target: i64) -> i64 {
    (1..=target.min(extent))
        .rev()
        .find(|f| extent % f == 0)
        .unwrap_or(1)
}

/// The loops of an accumulator tile (`cc`, computed at its consumer's tile): the
/// reduction outermost, then the rows (unrolled), then the columns as whole vector
/// registers (unrolled over registers, vectorized within one). Register-wide vectors
/// and constant offsets let the C compiler keep the whole tile in registers.
fn register_tile(
    s: &mut Schedule,
    cc: &Tensor,
    reduce: &[crate::IterVar],
    rows: &crate::IterVar,
    cols: &crate::IterVar,
    ncols: i64,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let (co, ci) = s.split(cc, cols, pick_factor(ncols, p.vector_lanes))?;
    let mut order: Vec<crate::IterVar> = reduce.to_vec();
    order.extend([rows.clone(), co.clone(), ci.clone()]);
    s.reorder(cc, &order)?;
    s.unroll(cc, rows)?;
    s.unroll(cc, &co)?;
    if p.vectorize {
        s.vectorize(cc, &ci)?;
    }
    Ok(())
}

/// `C[i, j] = Σ_k A[i, k] * B[k, j]`: 8 rows × 2 vectors of columns per register tile.
pub fn schedule_matmul(s: &mut Schedule, c: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let cc = s.cache_write(c, StorageScope::Local)?;
    let ax = s.axis(c)?;
    let (m, n) = (c.shape()[0], c.shape()[1]);
    let (mr, nr) = (pick_factor(m, 8), pick_factor(n, 2 * p.vector_lanes));
    let (io, jo, _ii, ji) = s.tile(c, &ax[0], &ax[1], mr, nr)?;
    if p.vectorize {
        s.vectorize(c, &ji)?;
    }
    s.compute_at(&cc, c, &jo)?;
    let cax = s.axis(&cc)?;
    let k = s.reduce_axis(&cc)?;
    register_tile(s, &cc, &k, &cax[0], &cax[1], nr, p)?;
    if p.num_cores > 1 {
        s.parallel(c, &io)?;
    }
    Ok(())
}

/// conv2d NHWC: output pixels along a row × output channels per register tile; the
/// padded input is computed at root so the inner loop has no bounds checks.
pub fn schedule_conv2d_nhwc(
    s: &mut Schedule,
    conv: &Tensor,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let cc = s.cache_write(conv, StorageScope::Local)?;
    let ax = s.axis(conv)?;
    let (w, f) = (conv.shape()[2], conv.shape()[3]);
    let (xr, fr) = (pick_factor(w, 8), pick_factor(f, 2 * p.vector_lanes));
    let (xo, xi) = s.split(conv, &ax[2], xr)?;
    let (fo, fi) = s.split(conv, &ax[3], fr)?;
    s.reorder(
        conv,
        &[
            ax[0].clone(),
            ax[1].clone(),
            xo.clone(),
            fo.clone(),
            xi,
            fi.clone(),
        ],
    )?;
    if p.vectorize {
        s.vectorize(conv, &fi)?;
    }
    s.compute_at(&cc, conv, &fo)?;
    let cax = s.axis(&cc)?;
    let r = s.reduce_axis(&cc)?;
    register_tile(s, &cc, &r, &cax[2], &cax[3], fr, p)?;
    if p.num_cores > 1 {
        let fused = s.fuse(conv, &ax[0], &ax[1])?;
        s.parallel(conv, &fused)?;
    }
    Ok(())
}

/// An elementwise or injective stage: outer axes fused and parallel, innermost axis
/// vectorized when its extent allows.
pub fn schedule_injective(s: &mut Schedule, t: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let ax = s.axis(t)?;
    let Some(last) = ax.last().cloned() else {
        return Ok(());
    };
    let inner = pick_factor(*t.shape().last().unwrap_or(&1), p.vector_lanes);
    let mut outer = if inner > 1 {
        let (o, i) = s.split(t, &last, inner)?;
        if p.vectorize {
            s.vectorize(t, &i)?;
        }
        vec![o]
    } else {
        vec![last]
    };
    let mut rest: Vec<_> = ax[..ax.len() - 1].to_vec();
    rest.append(&mut outer);
    if p.num_cores > 1 && rest.len() > 1 {
        let mut fused = rest[0].clone();
        for a in &rest[1..rest.len() - 1] {
            fused = s.fuse(t, &fused, a)?;
        }
        s.parallel(t, &fused)?;
    } else if p.num_cores > 1 {
        s.parallel(t, &rest[0])?;
    }
    Ok(())
}
