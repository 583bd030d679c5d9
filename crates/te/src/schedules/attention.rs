//! The CPU default schedule of [`crate::ops::attention`]: every stage computed per
//! block of query rows, so a block's scores (`rows × N` floats: 6 KiB for ViT's 197
//! keys) are written, reduced twice and read back inside the cache, never in memory.
//!
//! Per block of up to 8 query rows (the blocks of all heads in parallel):
//! - the scores `q · kt` in register tiles of the block's rows × one vector of keys,
//!   the `K` products outermost inside ([`register_tiled_product`]);
//! - the row maximum and the row sum as vectors of partial results
//!   ([`schedule_row_reduction`]), the exponentials vectorized over the keys;
//! - the products with `v` in register tiles of half the rows × two vectors of the
//!   value columns, the keys outermost inside;
//! - the division by the row sums on the way out, vectorized over the value columns.

use super::{
    col_tile, fuse_run, guarded_rows, pick_vector, register_tiled_product, schedule_row_reduction,
    CpuParams,
};
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::tensor::Tensor;

/// The most query rows per block.
const BLOCK_ROWS: i64 = 8;

/// The stage named `name` that `t` reads, directly or through other stages.
fn producer(t: &Tensor, name: &str) -> Result<Tensor, ScheduleError> {
    let mut todo = vec![t.clone()];
    while let Some(x) = todo.pop() {
        if let Some(found) = x.inputs().iter().find(|i| i.name() == name) {
            return Ok(found.clone());
        }
        todo.extend(x.inputs().iter().cloned());
    }
    Err(ScheduleError::UnknownStage(format!(
        "{name} (read by {})",
        t.name()
    )))
}

/// Schedules the attention ending at `out` (stage `T_attention`, see the module's
/// header) and returns the stages it scheduled.
pub fn schedule_attention(
    s: &mut Schedule,
    out: &Tensor,
    p: CpuParams,
) -> Result<Vec<Tensor>, ScheduleError> {
    let names = [
        "T_attn_score",
        "T_attn_max",
        "T_attn_exp",
        "T_attn_sum",
        "T_attn_pv",
    ];
    let stages = names
        .iter()
        .map(|n| producer(out, n))
        .collect::<Result<Vec<_>, _>>()?;
    let [score, row_max, exp, row_sum, pv] = &stages[..] else {
        unreachable!("five names, five stages");
    };
    let nd = out.ndim();
    let (m, d) = (out.shape()[nd - 2], out.shape()[nd - 1]);
    let rows = guarded_rows(m, BLOCK_ROWS);

    // the output: blocks of rows (all heads' blocks in parallel), value columns vectorized
    let ax = s.axis(out)?;
    let (io, _ii) = s.split(out, &ax[nd - 2], rows)?;
    let (_do, di) = s.split(out, &ax[nd - 1], pick_vector(d, p.vector_lanes))?;
    if p.vectorize {
        s.vectorize(out, &di)?;
    }
    let mut run = ax[..nd - 2].to_vec();
    run.push(io);
    let block = fuse_run(s, out, &run[0], &run[1..])?;
    if p.num_cores > 1 {
        s.parallel(out, &block)?;
    }
    // (consumers first: a stage goes inside the block once all its readers are there)
    for t in stages.iter().rev() {
        s.compute_at(t, out, &block)?;
    }

    // inside a block, one core each
    let one = CpuParams { num_cores: 1, ..p };
    let n = score.shape()[nd - 1];
    register_tiled_product(s, score, rows, pick_vector(n, p.vector_lanes), false, one)?;
    for t in [row_max, row_sum] {
        schedule_row_reduction(s, t, one)?;
    }
    let eax = s.axis(exp)?;
    let (_jo, ji) = s.split(exp, &eax[nd - 1], pick_vector(n, p.vector_lanes))?;
    if p.vectorize {
        s.vectorize(exp, &ji)?;
    }
    let nr = col_tile(d, p);
    let vectors = (nr / pick_vector(d, p.vector_lanes)).max(1);
    let mr = guarded_rows(rows, p.register_rows(vectors) - 2);
    register_tiled_product(s, pv, mr, nr, false, one)?;
    Ok(stages)
}
