//! The CPU default schedule of a softmax over its last axis ([`crate::ops::softmax`]'s
//! four stages, TVM's: the row maximum, the exponentials, their row sum, the division):
//! every stage computed per row of the output, as TVM's x86 `schedule_softmax` does, so
//! that a row (BERT's 384 keys: 1.5 KiB) is read from memory once and written once.
//!
//! Scheduled stage by stage (each its own row reduction or elementwise loop over the
//! whole tensor), the four stages make five passes over the scores and keep the
//! exponentials in a buffer as large as the input: BERT's `[8, 12, 384, 384]` scores
//! (54 MiB) took 29 ms a softmax on an Intel Xeon at 2 threads. Per row, the maximum
//! and the sum are vectors of partial results ([`schedule_row_reduction`]), the
//! exponentials and the division vectorized along the row; the rows (all leading axes
//! fused) run in parallel.

use super::reduce::row_reduction_extent;
use super::{fuse_run, pick_vector, schedule_row_reduction, CpuParams};
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::tensor::Tensor;

/// The stage named `name` among `t`'s inputs.
fn input(t: &Tensor, name: &str) -> Option<Tensor> {
    t.inputs().iter().find(|i| i.name() == name).cloned()
}

/// Schedules the softmax whose output (`T_softmax_norm`) is `norm` per row of it (see
/// the module's header) and returns the stages it scheduled; `None`, scheduling
/// nothing, where it is not a softmax over the last axis of two or more.
pub fn schedule_softmax(
    s: &mut Schedule,
    norm: &Tensor,
    p: CpuParams,
) -> Result<Option<Vec<Tensor>>, ScheduleError> {
    let nd = norm.ndim();
    let (Some(exp), Some(sum)) = (
        input(norm, "T_softmax_exp"),
        input(norm, "T_softmax_expsum"),
    ) else {
        return Ok(None);
    };
    let Some(max) = input(&exp, "T_softmax_maxelem") else {
        return Ok(None);
    };
    // over the last axis: the rows' stages have the output's leading axes and reduce
    // along the rows
    let rows = &norm.shape()[..nd.saturating_sub(1)];
    let n = norm.shape()[nd - 1];
    let over_last = nd >= 2
        && [&max, &sum]
            .iter()
            .all(|t| t.shape() == rows && row_reduction_extent(t) == Some(n));
    let lanes = pick_vector(n, p.vector_lanes);
    if !over_last || !p.vectorize || lanes < 4 {
        return Ok(None);
    }
    let ax = s.axis(norm)?;
    // rows in blocks (a batch and a length merged, `crate::runtime_shape::blocks`) are
    // left to the stage-by-stage schedules: the remapped rows' region of the
    // exponentials is not known to the partial sums computed inside the row
    if ax.iter().any(|a| a.block().is_some()) {
        return Ok(None);
    }
    let row = fuse_run(s, norm, &ax[0], &ax[1..nd - 1])?;
    // the innermost row loop: the fused one, or a leading axis fuse_run left apart
    let leaves = s.leaf_axes(norm)?;
    let at = leaves
        .iter()
        .position(|l| l == &ax[nd - 1])
        .and_then(|k| k.checked_sub(1))
        .map_or(row.clone(), |k| leaves[k].clone());
    let (_jo, ji) = s.split(norm, &ax[nd - 1], lanes)?;
    s.vectorize(norm, &ji)?;
    if p.num_cores > 1 {
        s.parallel(norm, &row)?;
    }
    // (consumers first: a stage goes inside the row once all its readers are there)
    for t in [&sum, &exp, &max] {
        s.compute_at(t, norm, &at)?;
    }
    let one = CpuParams { num_cores: 1, ..p };
    for t in [&max, &sum] {
        schedule_row_reduction(s, t, one)?;
    }
    let eax = s.axis(&exp)?;
    let (_eo, ei) = s.split(&exp, &eax[nd - 1], lanes)?;
    s.vectorize(&exp, &ei)?;
    Ok(Some(vec![max, exp, sum, norm.clone()]))
}
