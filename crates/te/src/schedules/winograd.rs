//! The CPU default schedule of Winograd conv2d as CPU builds compute it
//! ([`crate::ops::conv2d_winograd_nhwc_blocked`]): one schedule for the whole chain of
//! stages, since each transform only pays off with its rows unrolled (its matrices'
//! entries then fold to constants) and kept in registers next to its consumer.

use super::{
    col_tile, fuse_run, pick_factor, pick_vector, register_tiled_product, CpuParams, TileOrder,
};
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::tensor::{IterVar, Tensor};
use tessera_ir::StorageScope;

/// The input of `t` named `name`: a stage of the Winograd chain.
fn input_named(t: &Tensor, name: &str) -> Result<Tensor, ScheduleError> {
    t.inputs()
        .iter()
        .find(|x| x.name() == name)
        .cloned()
        .ok_or_else(|| ScheduleError::UnknownStage(format!("{name} (read by {})", t.name())))
}

/// Schedules the Winograd chain ending at `conv` (tagged
/// [`crate::ops::TAG_WINOGRAD_BLOCKED`]), its tiles leaving through `epilogue` when there
/// is one (as [`super::schedule_conv2d_nhwc`]'s do), and returns the stages it scheduled:
/// - the input transform per tile and vector of input channels: `data_pack`'s α×α
///   outputs unrolled, `data_pack_t` (`Bᵀ d`, α×α vectors) a `local` block computed
///   inside it; tiles in parallel;
/// - the batched GEMM in [`super::schedule_matmul`]'s register tiles (rows of tiles ×
///   two vectors of output channels, the input channels outermost inside), the α²
///   products × row tiles in parallel;
/// - the inverse transform per tile and column tile of output channels: `inverse_t`
///   (`Aᵀ M`, m×α vectors) a `local` block, the tile's m×m outputs unrolled and written
///   through the epilogue; tiles in parallel.
///
/// (`data_pad` is left to the caller: an injective stage at root.)
pub fn schedule_winograd_blocked(
    s: &mut Schedule,
    conv: &Tensor,
    epilogue: Option<&Tensor>,
    p: CpuParams,
) -> Result<Vec<Tensor>, ScheduleError> {
    let inverse_t = input_named(conv, "inverse_t")?;
    let bgemm = input_named(&inverse_t, "bgemm")?;
    let data_pack = input_named(&bgemm, "data_pack")?;
    let data_pack_t = input_named(&data_pack, "data_pack_t")?;
    input_transform(s, &data_pack, &data_pack_t, p)?;
    batched_gemm(s, &bgemm, p)?;
    inverse_transform(s, conv, &inverse_t, epilogue, p)?;
    let mut done = vec![data_pack_t, data_pack, bgemm, inverse_t, conv.clone()];
    done.extend(epilogue.cloned());
    Ok(done)
}

/// A transform's first stage `block` (`[rows, α, tiles, channels]`: `Bᵀ d` or `Aᵀ M`)
/// as a `local` block computed at `consumer`'s loop `at` (one tile, a run of
/// channels): its two row axes unrolled, its channels vectorized.
fn local_block(
    s: &mut Schedule,
    block: &Tensor,
    consumer: &Tensor,
    at: &IterVar,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    s.set_scope(block, StorageScope::Local)?;
    s.compute_at(block, consumer, at)?;
    let ax = s.axis(block)?;
    s.unroll(block, &ax[0])?;
    s.unroll(block, &ax[1])?;
    if p.vectorize {
        s.vectorize(block, &ax[3])?;
    }
    Ok(())
}

/// `data_pack` `[α, α, P, C]`: per tile `p` and vector of channels, its α×α outputs
/// unrolled from `data_pack_t`'s α×α vectors, computed just before in a `local` block.
fn input_transform(
    s: &mut Schedule,
    data_pack: &Tensor,
    data_pack_t: &Tensor,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let ax = s.axis(data_pack)?;
    let lanes = pick_vector(data_pack.shape()[3], p.vector_lanes);
    let (co, ci) = s.split(data_pack, &ax[3], lanes)?;
    s.reorder(
        data_pack,
        &[
            ax[2].clone(),
            co.clone(),
            ax[0].clone(),
            ax[1].clone(),
            ci.clone(),
        ],
    )?;
    s.unroll(data_pack, &ax[0])?;
    s.unroll(data_pack, &ax[1])?;
    if p.vectorize {
        s.vectorize(data_pack, &ci)?;
    }
    local_block(s, data_pack_t, data_pack, &co, p)?;
    if p.num_cores > 1 {
        s.parallel(data_pack, &ax[2])?;
    }
    Ok(())
}

/// `bgemm` `[α, α, P, CO]` = Σ_ci `data_pack[ε, ν, p, ci]` · `kernel_pack[ε, ν, co/b, ci,
/// co%b]`: α² matrix products, each in register tiles of tiles × output channels.
fn batched_gemm(s: &mut Schedule, bgemm: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let (tiles, cols) = (bgemm.shape()[2], bgemm.shape()[3]);
    let nr = col_tile(cols, p);
    let vectors = nr / pick_vector(cols, p.vector_lanes).max(1);
    let mr = pick_factor(tiles, p.register_rows(vectors));
    register_tiled_product(s, bgemm, mr, nr, TileOrder::Rows, p)
}

/// The output `[N, H, W, CO]` (or the epilogue that reads it, with the output inlined
/// into it): per m×m tile of pixels and column tile of channels, `inverse_t`'s m×α
/// vectors in a `local` block, then the tile's pixels unrolled.
fn inverse_transform(
    s: &mut Schedule,
    conv: &Tensor,
    inverse_t: &Tensor,
    epilogue: Option<&Tensor>,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let out = match epilogue {
        Some(e) => {
            s.compute_inline(conv)?;
            e.clone()
        }
        None => conv.clone(),
    };
    let tile = inverse_t.shape()[0];
    let ax = s.axis(&out)?;
    let cols = out.shape()[3];
    let nr = col_tile(cols, p);
    let (ho, hi) = s.split(&out, &ax[1], tile)?;
    let (wo, wi) = s.split(&out, &ax[2], tile)?;
    let (co, ci) = s.split(&out, &ax[3], nr)?;
    s.reorder(
        &out,
        &[
            ax[0].clone(),
            ho.clone(),
            wo.clone(),
            co.clone(),
            hi.clone(),
            wi.clone(),
            ci.clone(),
        ],
    )?;
    s.unroll(&out, &hi)?;
    s.unroll(&out, &wi)?;
    if p.vectorize {
        s.vectorize(&out, &ci)?;
    }
    local_block(s, inverse_t, &out, &co, p)?;
    if p.num_cores > 1 {
        let outer = fuse_run(s, &out, &ax[0], &[ho, wo])?;
        s.parallel(&out, &outer)?;
    }
    Ok(())
}
