//! The CPU default schedule of [`crate::ops::attention`]: every stage computed per
//! block of query rows, so a block's scores (`rows × N` floats: 6 KiB for ViT's 197
//! keys) are written, reduced twice and read back inside the cache, never in memory.
//!
//! Per block of query rows (the blocks of all heads in parallel), two forms chosen by
//! [`RowPlan`]:
//! - *wide*, where the rows divide into register tiles of 6 (8 with 32 vector
//!   registers) or are so many that a guarded last block costs little (Whisper's 1,500):
//!   blocks of two such tiles (one where an odd number of tiles makes the rows), the scores and the products with `v` both in tiles of
//!   those rows × two vectors of columns — the dense product's 6 × 16 micro-kernel,
//!   eight loads for twelve multiply–adds on AVX2 (Whisper's attention 53 → 41–43 ms);
//! - *narrow* otherwise (GPT-2's 64 rows): blocks of up to 8 rows, the scores in tiles
//!   of the block's rows × one vector of keys, the products with `v` in tiles of half
//!   the rows × two vectors.
//!
//! In both, the `K` products (the `N` keys for `v`) are outermost inside a tile
//! ([`register_tiled_product`]); the row maximum and the row sum are vectors of partial
//! results ([`schedule_row_reduction`]), the exponentials vectorized over the keys; the
//! division by the row sums happens on the way out, vectorized over the value columns.

use super::{
    col_tile, fuse_run, guarded_rows, pick_vector, register_tiled_product, schedule_row_reduction,
    CpuParams, TileOrder,
};
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::tensor::Tensor;

/// The query rows of a block and of the register tiles of its two products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RowPlan {
    /// Query rows per block (the parallel unit; the last block may be guarded).
    block: i64,
    /// Rows of a register tile of the scores.
    score_tile: i64,
    /// Rows of a register tile of the products with `v` (`pv_vectors` wide).
    pv_tile: i64,
    /// Whether the scores' tiles are two vectors of keys wide (else one).
    wide: bool,
}

impl RowPlan {
    /// The most query rows of a narrow block.
    const NARROW_BLOCK: i64 = 8;

    /// The plan for `m` query rows, the products with `v` `pv_vectors` registers wide.
    fn new(m: i64, pv_vectors: i64, p: CpuParams) -> RowPlan {
        // the dense product's tile: two vectors of columns, the rest of the registers rows
        let tile = if p.vector_registers() >= 32 { 8 } else { 6 };
        // blocks of two whole tiles (the last block guarded where they do not divide
        // the rows), or of one where an odd number of tiles does (30 rows: 5 × 6) —
        // never rows shared evenly, which would make the tiles shorter than the kernel's
        let block = if m % (2 * tile) == 0 || m >= 16 * tile {
            Some(2 * tile)
        } else if m % tile == 0 {
            Some(tile)
        } else {
            None
        };
        if let Some(block) = block {
            return RowPlan {
                block,
                score_tile: tile,
                pv_tile: tile,
                wide: true,
            };
        }
        let block = guarded_rows(m, Self::NARROW_BLOCK);
        RowPlan {
            block,
            score_tile: block,
            pv_tile: guarded_rows(block, p.register_rows(pv_vectors) - 2),
            wide: false,
        }
    }
}

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
    let nr = col_tile(d, p);
    let pv_vectors = (nr / pick_vector(d, p.vector_lanes)).max(1);
    let plan = RowPlan::new(m, pv_vectors, p);

    // the output: blocks of rows (all heads' blocks in parallel), value columns vectorized
    let ax = s.axis(out)?;
    let (io, _ii) = s.split(out, &ax[nd - 2], plan.block)?;
    let (_do, di) = s.split(out, &ax[nd - 1], pick_vector(d, p.vector_lanes))?;
    if p.vectorize {
        s.vectorize(out, &di)?;
    }
    let run = ax[..nd - 2].to_vec();
    let heads: i64 = out.shape()[..nd - 2].iter().product();
    let block = if ax[nd - 2].bound().is_some() && !run.is_empty() {
        // query rows known only at run time (`crate::lower`'s runtime extents): the
        // heads in parallel where they are enough to share, each running the blocks
        // the rows need; else the blocks outermost and in parallel with the heads
        if heads >= 2 * p.num_cores.max(1) as i64 {
            let outer = fuse_run(s, out, &run[0], &run[1..])?;
            if p.num_cores > 1 {
                s.parallel(out, &outer)?;
            }
            io
        } else {
            let mut order = vec![io.clone()];
            order.extend(run.iter().cloned());
            s.reorder(out, &order)?;
            let block = fuse_run(s, out, &io, &run)?;
            if p.num_cores > 1 {
                s.parallel(out, &block)?;
            }
            block
        }
    } else {
        let mut run = run;
        run.push(io);
        let block = fuse_run(s, out, &run[0], &run[1..])?;
        if p.num_cores > 1 {
            s.parallel(out, &block)?;
        }
        block
    };
    // (consumers first: a stage goes inside the block once all its readers are there)
    for t in stages.iter().rev() {
        s.compute_at(t, out, &block)?;
    }

    // inside a block, one core each
    let one = CpuParams { num_cores: 1, ..p };
    let n = score.shape()[nd - 1];
    let keys = if plan.wide {
        col_tile(n, p)
    } else {
        pick_vector(n, p.vector_lanes)
    };
    register_tiled_product(s, score, plan.score_tile, keys, TileOrder::Rows, one)?;
    for t in [row_max, row_sum] {
        schedule_row_reduction(s, t, one)?;
    }
    let eax = s.axis(exp)?;
    let (_jo, ji) = s.split(exp, &eax[nd - 1], pick_vector(n, p.vector_lanes))?;
    if p.vectorize {
        s.vectorize(exp, &ji)?;
    }
    register_tiled_product(s, pv, plan.pv_tile, nr, TileOrder::Rows, one)?;
    Ok(stages)
}
