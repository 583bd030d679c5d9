//! Default CPU schedules: hand-written, reasonable for any shape, used when nothing was
//! tuned. Register-blocked (a `local` accumulator tile computed at the output tile,
//! reduction outermost inside it, rows unrolled, columns vectorized), parallel over the
//! outermost tile loop. (Vector loops wider than a register are split by the CPU
//! backend's `split_wide_vectors`, so a schedule vectorizes whole column tiles.)
//!
//! [`default_schedule`] picks each stage's schedule by its operator tag
//! ([`schedule_stages`]); where each family's is:
//! - on a GPU (`CpuParams::gpu_threads` > 0): every stage's spatial axes fused over
//!   `blockIdx.x` × `threadIdx.x` ([`schedule_gpu`], blocks sized by
//!   [`gpu_block_threads`]), padding read through guarded loads, and a row reduction one
//!   block per output with the row over a warp's threads (`reduce.rs`);
//! - matrix products: register tiles ([`schedule_matmul`], [`schedule_product_tiles`]
//!   for `dense_pack` and batch_matmul NN/TN), [`schedule_dense`] by `rfactor` (unpacked
//!   dense, batch_matmul NT, TVM-form Winograd's batched GEMM);
//! - convolutions (`conv.rs`, [`schedule_conv2d_nhwc`] and its siblings): register tiles
//!   of rows × whole vectors, input channels chunked where a tile's weights outgrow L2,
//!   row blocks, and the elementwise epilogue taking the tiles ([`conv_epilogue`]);
//! - attention ([`schedule_attention`]), softmax over the last axis
//!   ([`schedule_softmax`]) and the CPU's Winograd chain ([`schedule_winograd_blocked`]),
//!   each one schedule for all its stages;
//! - pooling and reductions (`reduce.rs`), injective stages ([`schedule_injective`]).
//!
//! Each function's own doc says what was measured to choose its shape.

use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::tensor::{IterVar, Tensor};
use tessera_ir::{StorageScope, ThreadAxis};

mod attention;
mod conv;
mod reduce;
mod softmax;
mod winograd;
pub use attention::schedule_attention;
use conv::conv_weights_outweigh_input;
pub use conv::{
    conv_epilogue, schedule_conv2d_nchw, schedule_conv2d_nhwc, schedule_depthwise,
    schedule_group_conv2d_nhwc,
};
use reduce::{is_identity_pad, is_pool, last_axis_reduced, schedule_row_reduction};
pub use reduce::{schedule_pool, schedule_reduction};
pub use softmax::schedule_softmax;
pub use winograd::schedule_winograd_blocked;

/// What the CPU schedules need to know about the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuParams {
    /// float32 lanes of the widest vector register (16 with AVX-512, 8 with AVX2).
    pub vector_lanes: i64,
    pub num_cores: usize,
    /// Whether to vectorize (off only to measure what vectorization brings).
    pub vectorize: bool,
    /// A GPU's threads per block (its `max_threads_per_block`); 0 on a CPU. When set,
    /// every stage gets [`schedule_gpu`] instead of its CPU schedule.
    pub gpu_threads: i64,
}

impl CpuParams {
    /// Vector registers the ISA names: 32 with AVX-512 (16 float32 lanes), 16 with AVX2
    /// and SSE.
    pub fn vector_registers(&self) -> i64 {
        if self.vector_lanes >= 16 {
            32
        } else {
            16
        }
    }

    /// Most rows of a register tile whose rows are `vectors` registers wide, at most 8:
    /// the accumulators leave two registers for the broadcast input and a weight vector
    /// (the compiler reads the others from memory). On AVX2 the NHWC conv tile of 8
    /// rows × 2 registers spilled: 7 rows ran ResNet's 56×56×64 3×3 conv at 134 GFLOPS
    /// against 103 for 8 rows and 106 for 4.
    pub fn register_rows(&self, vectors: i64) -> i64 {
        ((self.vector_registers() - 2) / vectors.max(1)).clamp(1, 8)
    }
}

/// The largest divisor of `extent` that is at most `target` (at least 1).
pub fn pick_factor(extent: i64, target: i64) -> i64 {
    (1..=target.min(extent))
        .rev()
        .find(|f| extent % f == 0)
        .unwrap_or(1)
}

/// The largest power of two that divides `extent` and is at most `lanes`: a width the
/// vectorizer turns into one vector register (1 when there is none).
pub fn pick_vector(extent: i64, lanes: i64) -> i64 {
    let mut v = 1;
    while v * 2 <= lanes && extent % (v * 2) == 0 {
        v *= 2;
    }
    v
}

/// Rows of a register tile over `rows` when no divisor is near `target` (Inception's
/// 17, 71, 73, 149 pixels, primes): as few tiles as `target` rows allow, the rows shared
/// evenly among them, the last tile guarded (17 = 6 + 6 + 5).
fn guarded_rows(rows: i64, target: i64) -> i64 {
    let tiles = (rows + target - 1) / target.max(1);
    (rows + tiles - 1) / tiles.max(1)
}

/// The columns of a register tile: two vector registers when the extent allows, else the
/// widest vector-friendly divisor, else a divisor.
fn col_tile(n: i64, p: CpuParams) -> i64 {
    let v = pick_vector(n, p.vector_lanes);
    if v > 1 {
        v * pick_factor(n / v, 2)
    } else {
        pick_factor(n, 2 * p.vector_lanes)
    }
}

/// The loops of an accumulator tile (`cc`, computed at its consumer's tile): `outer`
/// outermost (the reduction, or whatever a caller orders around the tile), then the
/// rows (unrolled), then the columns as whole vector registers (unrolled over
/// registers, vectorized within one). Register-wide vectors and constant offsets let
/// the C compiler keep the whole tile in registers.
fn register_tile(
    s: &mut Schedule,
    cc: &Tensor,
    outer: &[crate::IterVar],
    rows: &crate::IterVar,
    cols: &crate::IterVar,
    ncols: i64,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let (co, ci) = s.split(cc, cols, pick_vector(ncols, p.vector_lanes))?;
    let mut order: Vec<crate::IterVar> = outer.to_vec();
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
    let (m, n) = (c.shape()[0], c.shape()[1]);
    register_tiled_product(s, c, pick_factor(m, 8), col_tile(n, p), TileOrder::Rows, p)
}

/// A matrix product whose second operand is contiguous along the output's columns
/// (`batch_matmul` NN and TN, `B[b, k, j]`; `dense_pack`, its weight packed by column
/// blocks): [`register_tiled_product`] with a tile of two vector registers of columns
/// and one row fewer than the registers hold.
pub fn schedule_product_tiles(
    s: &mut Schedule,
    c: &Tensor,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let nd = c.ndim();
    if nd < 2 {
        return schedule_reduction(s, c, p);
    }
    let (m, n) = (c.shape()[nd - 2], c.shape()[nd - 1]);
    let nr = col_tile(n, p);
    let vectors = (nr / pick_vector(n, p.vector_lanes)).max(1);
    // With 16 registers one row fewer than they hold, whether or not it divides the row
    // count (the last row tile is guarded). Measured on an AVX2 EPYC, dense_pack
    // 128×768 · 768×3072 and 197×768 · 768×3072 (ViT's 197 tokens, a prime): 5 or 6 rows
    // ran 4.5–6.3 and 6.7–8.1 ms, 7 rows 7.2–7.7 and 10.9–11.5, 8 rows 6.5–7.1 and
    // 10.1–11.3; the largest divisor (4 rows; 1 for 197) 6.8–7.6 and 20.7–20.9. With
    // AVX-512's 32 every row they hold (8 × 2 vectors leaves 16 free): on a Zen 4,
    // GPT-2's and LLaMA's networks ran 2–3 % faster than with 7 rows in each of six
    // alternating rounds, and slower with 12 or 16.
    let spare = if p.vector_registers() >= 32 { 0 } else { 1 };
    let mr = (p.register_rows(vectors) - spare).clamp(1, m.max(1));
    // a packed dense layer whose weights outweigh its data (ViT's, BERT's: 197 or 128
    // rows, 768 × 3072 weights) runs its column tiles outermost, so each weight block is
    // read once while every row passes; with more data than weights (ConvNeXt's
    // pointwise layers on 3136 pixels) the rows stay outermost and the weights in cache
    // rows known only at run time (a batch and a length) are mostly fewer than their
    // largest, by which the weights are weighed: their column tiles run outermost too
    let ax = c.axis();
    let rows = &ax[nd - 2];
    let runtime_rows = rows.bound().is_some() || rows.block().is_some();
    let order = if c.tag() != "dense_pack" {
        TileOrder::Rows
    } else if conv_weights_outweigh_input(c) || runtime_rows {
        TileOrder::Columns
    } else {
        row_chunks(c, m, mr, p)
    };
    register_tiled_product(s, c, mr, nr, order, p)
}

/// Bytes of a packed dense layer's data rows that a chunk of row tiles may hold
/// ([`TileOrder::RowChunks`]): half a Zen 4 core's L2 (a quarter of this Xeon's), so
/// that the chunk and a column tile's weight panel stay in L2 together.
const ROW_CHUNK_BYTES: i64 = 512 << 10;

/// Weights of at most this many bytes stay in L2 (a Zen 4 core's 1 MiB) while the row
/// tiles pass: a dense layer with no more runs its row tiles outermost.
const WEIGHTS_IN_CACHE: i64 = 1 << 20;

/// How a packed dense layer with more data than weights runs its row tiles
/// ([`TileOrder::RowChunks`]): where its weights outgrow [`WEIGHTS_IN_CACHE`], in
/// chunks of as many tiles as hold [`ROW_CHUNK_BYTES`] of its data, at most 16, leaving
/// a chunk per core at least; row tiles outermost ([`TileOrder::Rows`]) where no chunk
/// of two or more divides them, or the weights fit (ConvNeXt-T, whose 147–590 KiB
/// pointwise layers would be chunked, ran 6–8 % slower with them chunked).
///
/// Measured on an Intel Xeon (AVX-512, 2 MiB L2 a core) at 2 threads, BERT's FFN
/// products at 8 × 384 rows, the kernel alone in 6–8 alternating rounds (minima):
/// 3072 × 768 · 768 × 3072 69.6 ms with row tiles outermost, 49.9–50.4 with chunks of
/// 8 to 32 tiles, 55.6 with column tiles outermost (all the data read once per weight
/// panel); 3072 × 3072 · 3072 × 768 83.9 ms, 53.9 with chunks of 4 (512 KiB of rows at
/// 3,072 terms), 48–51 with 8 or 16. Row tiles outermost read every weight panel from
/// L3 once per row tile.
fn row_chunks(c: &Tensor, m: i64, mr: i64, p: CpuParams) -> TileOrder {
    let terms: i64 = c.reduce_axis().iter().filter_map(|k| k.extent()).product();
    let columns = c.shape().last().copied().unwrap_or(1);
    if terms * columns * 4 <= WEIGHTS_IN_CACHE {
        return TileOrder::Rows;
    }
    let tiles = (m + mr - 1) / mr.max(1);
    let by_cache = ROW_CHUNK_BYTES / (mr * terms.max(1) * 4).max(1);
    let target = by_cache.min(16).min(tiles / p.num_cores.max(1) as i64);
    match pick_factor(tiles, target.max(1)) {
        chunk if chunk >= 2 => TileOrder::RowChunks(chunk),
        _ => TileOrder::Rows,
    }
}

/// The order of a register-tiled product's tile loops ([`register_tiled_product`]);
/// the outermost runs in parallel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TileOrder {
    /// Row tiles outermost: each reads the weights of every column tile.
    Rows,
    /// Column tiles outermost: each column tile's weight panel is read once while every
    /// row passes.
    Columns,
    /// Row tiles in chunks of this many: the chunks outermost, then the column tiles,
    /// then the chunk's row tiles, so that a weight panel is read from memory once per
    /// chunk and from cache by the chunk's other tiles.
    RowChunks(i64),
}

/// A matrix product over the last two axes of `c` (leading axes: a batch), a reduction
/// inside: register tiles of `mr` rows × `nr` columns (the accumulator tile a `local`
/// cache computed at the column tile, the reduction outermost in it), the leading axes
/// and the row tiles fused and parallel. The matmul's schedule and the Winograd batched
/// GEMM's.
pub(crate) fn register_tiled_product(
    s: &mut Schedule,
    c: &Tensor,
    mr: i64,
    nr: i64,
    order: TileOrder,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let cc = s.cache_write(c, StorageScope::Local)?;
    let ax = s.axis(c)?;
    let nd = ax.len();
    let (io, jo, ii, ji) = s.tile(c, &ax[nd - 2], &ax[nd - 1], mr, nr)?;
    // the tile loop that runs in parallel, and the one the accumulators are computed at
    let (outer, inner) = match order {
        TileOrder::Rows => (io, jo),
        TileOrder::Columns => {
            s.reorder(c, &[jo.clone(), io.clone(), ii, ji.clone()])?;
            (jo, io)
        }
        TileOrder::RowChunks(chunk) => {
            let (chunks, io) = s.split(c, &io, chunk)?;
            s.reorder(c, &[chunks.clone(), jo, io.clone(), ii, ji.clone()])?;
            (chunks, io)
        }
    };
    if p.vectorize {
        s.vectorize(c, &ji)?;
    }
    s.compute_at(&cc, c, &inner)?;
    let cax = s.axis(&cc)?;
    let k = s.reduce_axis(&cc)?;
    register_tile(s, &cc, &k, &cax[nd - 2], &cax[nd - 1], nr, p)?;
    if p.num_cores > 1 {
        let mut run = ax[..nd - 2].to_vec();
        run.push(outer);
        let fused = fuse_run(s, c, &run[0], &run[1..])?;
        s.parallel(c, &fused)?;
    }
    Ok(())
}

/// `first` and the axes `rest` after it (consecutive, outermost first) fused into one
/// loop, left to right — up to the first axis with a runtime extent under an axis fused
/// before it without one (other than axes of one: `[1, heads, size]` fuses the heads and
/// stops at the size), which is left as a loop of its own inside:
/// a fused loop whose inner part has a runtime extent runs its static extent
/// (`crate::lower`'s runtime extents), one of its own runs to the size.
fn fuse_run(
    s: &mut Schedule,
    t: &Tensor,
    first: &IterVar,
    rest: &[IterVar],
) -> Result<IterVar, ScheduleError> {
    let runtime: Vec<bool> = std::iter::once(first)
        .chain(rest)
        .map(|iv| follows_runtime_extent(s, t, iv))
        .collect();
    // whether an axis fused so far has a static extent other than 1
    let mut static_outer = !runtime[0] && first.extent() != Some(1);
    let mut fused = first.clone();
    for (a, &r) in rest.iter().zip(&runtime[1..]) {
        if r && static_outer {
            break;
        }
        fused = s.fuse(t, &fused, a)?;
        static_outer |= !r && a.extent() != Some(1);
    }
    Ok(fused)
}

/// Whether leaf `iv` of `t`'s stage derives from an axis with a runtime extent.
fn follows_runtime_extent(s: &Schedule, t: &Tensor, iv: &IterVar) -> bool {
    if iv.bound().is_some() {
        return true;
    }
    let Ok(st) = s.stage(t) else { return false };
    st.relations.iter().any(|r| match r {
        crate::Relation::Split {
            parent,
            outer,
            inner,
            ..
        } => (outer == iv || inner == iv) && follows_runtime_extent(s, t, parent),
        crate::Relation::Fuse {
            outer,
            inner,
            fused,
        } => {
            fused == iv
                && (follows_runtime_extent(s, t, outer) || follows_runtime_extent(s, t, inner))
        }
    })
}

/// An elementwise or injective stage: outer axes fused and parallel, innermost axis
/// vectorized when its extent allows.
pub fn schedule_injective(s: &mut Schedule, t: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let ax = s.axis(t)?;
    let Some(last) = ax.last().cloned() else {
        return Ok(());
    };
    let inner = pick_vector(*t.shape().last().unwrap_or(&1), p.vector_lanes);
    if inner == 1 && p.vectorize {
        if let Some(axis) = strided_vector_axis(t, p) {
            return schedule_injective_along(s, t, &ax, axis, p);
        }
    }
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
        let fused = fuse_run(s, t, &rest[0], &rest[1..rest.len() - 1])?;
        s.parallel(t, &fused)?;
    } else if p.num_cores > 1 {
        s.parallel(t, &rest[0])?;
    }
    Ok(())
}

/// The axis an injective stage `t` whose last axis is too short for a vector (an NHWC
/// image's 3 channels) vectorizes instead: the one before it, where its extent has a
/// vector-wide divisor and some load of `t`'s body reads its operand's last dimension
/// with it — the source of a layout transform from NCHW, contiguous along the width.
fn strided_vector_axis(t: &Tensor, p: CpuParams) -> Option<usize> {
    let shape = t.shape();
    let axis = shape.len().checked_sub(2)?;
    if pick_vector(shape[axis], p.vector_lanes) == 1 || shape.iter().product::<i64>() < 1024 {
        return None;
    }
    let var = t.axis().get(axis)?.var().clone();
    let mut found = false;
    for e in t.body()?.exprs() {
        tessera_ir::visit::post_order_visit(e, &mut |x| {
            if let tessera_ir::ExprNode::Load { indices, .. } = x.node() {
                found |= indices.last().and_then(|i| i.as_var()) == Some(&var);
            }
        });
    }
    found.then_some(axis)
}

/// [`schedule_injective`] along `axis` (see [`strided_vector_axis`]): its vectors inside
/// the last axis's loop (each a strided store, its loads contiguous), the axes before
/// it fused and parallel. The layout transform that quantizes an NCHW image into NHWC
/// bytes computed one element at a time: MobileNet-v2's 224×224×3 took 0.25 ms,
/// onnxruntime's quantize and transpose 0.17.
fn schedule_injective_along(
    s: &mut Schedule,
    t: &Tensor,
    ax: &[IterVar],
    axis: usize,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let lanes = pick_vector(t.shape()[axis], p.vector_lanes);
    let (o, i) = s.split(t, &ax[axis], lanes)?;
    s.reorder(t, &[ax[axis + 1].clone(), o, i.clone()])?;
    s.vectorize(t, &i)?;
    if p.num_cores > 1 && axis > 0 {
        let fused = fuse_run(s, t, &ax[0], &ax[1..axis])?;
        s.parallel(t, &fused)?;
    }
    Ok(())
}

/// dense `out[…, i, j] = Σ_k data[…, i, k] · weight[…, j, k]` (also batch_matmul NT and
/// Winograd's `bgemm`): both operands are contiguous along `k`, so the reduction is
/// factored (`rfactor`) into vector-wide partial sums kept in a register tile of 4 rows ×
/// 4 columns, then summed; leading (batch) axes and the row tiles run in parallel. A
/// reduction that is not one vector-divisible axis gets the generic schedule.
pub fn schedule_dense(s: &mut Schedule, out: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let k = s.reduce_axis(out)?;
    let nd = out.ndim();
    let v = match (k.as_slice(), nd >= 2) {
        ([k0], true) => pick_vector(k0.extent().unwrap_or(1), p.vector_lanes),
        _ => 1,
    };
    if v == 1 {
        return schedule_reduction(s, out, p);
    }
    let (_ko, ki) = s.split(out, &k[0], v)?;
    let rf = s.rfactor(out, &ki, nd)?;
    let ax = s.axis(out)?;
    let (m, n) = (out.shape()[nd - 2], out.shape()[nd - 1]);
    let (io, jo, _ii, _ji) = s.tile(
        out,
        &ax[nd - 2],
        &ax[nd - 1],
        pick_factor(m, 4),
        pick_factor(n, 4),
    )?;
    s.compute_at(&rf, out, &jo)?;
    let rax = s.axis(&rf)?;
    let rk = s.reduce_axis(&rf)?;
    let mut order = rk.clone();
    order.extend([rax[nd - 2].clone(), rax[nd - 1].clone(), rax[nd].clone()]);
    s.reorder(&rf, &order)?;
    s.unroll(&rf, &rax[nd - 2])?;
    s.unroll(&rf, &rax[nd - 1])?;
    if p.vectorize {
        s.vectorize(&rf, &rax[nd])?;
    }
    if p.num_cores > 1 {
        let mut par = io;
        // Fewer row tiles than cores (a matrix–vector product: a classifier's head, one
        // row): the column tiles run in parallel too, else one core streams the whole
        // weight (MobileNet-v3's 960 × 1280 head ran at 10 GB/s on one core).
        let row_tiles = m / pick_factor(m, 4)
            * ax[..nd - 2]
                .iter()
                .map(|a| a.extent().unwrap_or(1))
                .product::<i64>();
        if row_tiles < p.num_cores as i64 {
            par = s.fuse(out, &par, &jo)?;
        }
        for b in ax[..nd - 2].iter().rev() {
            par = s.fuse(out, b, &par)?;
        }
        s.parallel(out, &par)?;
    }
    Ok(())
}

/// The default schedule of a whole DAG: each computed stage by its operator family (its
/// tag), the others (padding, constant matrices, elementwise producers) left at root,
/// the outputs of elementwise families parallel and vectorized.
pub fn default_schedule(outputs: &[Tensor], p: CpuParams) -> Result<Schedule, ScheduleError> {
    default_schedule_inlined(outputs, &[], p)
}

/// [`default_schedule`] after inlining the stages `inline` into their consumers: what a
/// fused network function does with the elementwise and injective operators between its
/// anchor (a conv2d, a dense) and its output.
pub fn default_schedule_inlined(
    outputs: &[Tensor],
    inline: &[Tensor],
    p: CpuParams,
) -> Result<Schedule, ScheduleError> {
    let mut s = Schedule::create(outputs)?;
    // a pooling stage vectorizes over channels only if its window's loads are
    // unconditional across them: an injective producer (a concatenation's select) feeding
    // it through elementwise stages is computed once, not inlined into the window
    let stored = pool_fed_injective(&s, inline);
    let inline: Vec<Tensor> = inline
        .iter()
        .filter(|t| !stored.contains(t))
        .cloned()
        .collect();
    for t in &inline {
        s.compute_inline(t)?;
    }
    let ops = computed_stages(&s, &inline);
    schedule_stages(&mut s, outputs, &ops, p)?;
    Ok(s)
}

/// The injective stages of `inline` that feed a pooling stage of `s` directly or through
/// elementwise stages (its padding).
fn pool_fed_injective(s: &Schedule, inline: &[Tensor]) -> Vec<Tensor> {
    let mut out = Vec::new();
    let mut todo: Vec<Tensor> = s
        .stages
        .iter()
        .filter(|st| is_pool(&st.op))
        .flat_map(|st| st.op.inputs().to_vec())
        .collect();
    while let Some(t) = todo.pop() {
        if t.tag() == "elemwise" {
            todo.extend(t.inputs().iter().cloned());
        } else if inline.contains(&t) && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The computed (non-placeholder) stages of `s` not in `skip`, in stage order.
pub fn computed_stages(s: &Schedule, skip: &[Tensor]) -> Vec<Tensor> {
    s.stages
        .iter()
        .filter(|st| !st.is_placeholder() && !skip.contains(&st.op))
        .map(|st| st.op.clone())
        .collect()
}

/// Gives each of `stages` its default schedule by its operator family: also how a fused
/// function is finished around a stage that a tuned template scheduled (list the stages
/// before the template adds its own).
pub fn schedule_stages(
    s: &mut Schedule,
    outputs: &[Tensor],
    stages: &[Tensor],
    p: CpuParams,
) -> Result<(), ScheduleError> {
    // a pooling stage, and a depthwise or grouped NHWC conv, reads its padding through
    // guarded loads instead of a copy: the guard depends on the pixel only, one
    // conditional load per channel vector, and each input element is read a few times
    // (KH·KW / stride², or once per group's few output channels), so the copy — a read
    // and a write of the whole map — cost as much as the window (EfficientNet's
    // 112×112×96 stride-2 depthwise conv 0.105 → 0.047 ms, ResNeXt's 56×56 stride-2
    // grouped conv 0.274 → 0.182 on an AVX-512 EPYC); a dense conv keeps its copy,
    // which every output channel tile reads. On a GPU every conv and pooling reads its
    // padding through guarded loads, as TVM's CUDA schedules inline `pad_data`: the copy
    // is a kernel of its own, one more launch and one more pass over the map per conv.
    let gpu = p.gpu_threads > 0;
    let mut inlined: Vec<Tensor> = Vec::new();
    // (not where the pooled axis is the contiguous one, NCHW, on the CPU: measured, its
    // rows then run faster from a padded copy, average pooling's most)
    for reader in stages.iter().filter(|t| {
        is_pool(t) && (gpu || !last_axis_reduced(t))
            || matches!(t.tag(), "depthwise_conv2d_nhwc" | "group_conv2d_nhwc")
            || gpu && is_conv_tag(t.tag())
    }) {
        for input in reader.inputs() {
            let tag = input.tag();
            let padding =
                (tag == "elemwise" || tag == crate::ops::TAG_PAD) && stages.contains(input);
            if padding && !outputs.contains(input) && s.compute_inline(input).is_ok() {
                inlined.push(input.clone());
            }
        }
    }
    // a padding of nothing (a 1×1 conv's `pad_temp`) is a copy of its input: read the
    // input instead (EfficientNet's 112×112×16 input copied 0.8 MB per 1×1 conv)
    for t in stages.iter().filter(|t| is_identity_pad(t)) {
        let at_root = s
            .stage(t)
            .is_ok_and(|st| matches!(st.attach, crate::schedule::Attach::Root));
        if at_root && !outputs.contains(t) && s.compute_inline(t).is_ok() {
            inlined.push(t.clone());
        }
    }
    // an int8 product's data packed into words, read by the product (or by its padding
    // copy): inlined, so that each word is read from the data's four bytes in place (one
    // 32-bit load, or one vector load of consecutive words, `cfamily::words`), not
    // packed by a pass over the whole input first (MobileNet-v2's 112×112×32 → 16 1×1
    // conv: 0.29 → 0.09 ms, two thirds of it the pass)
    for t in stages
        .iter()
        .filter(|t| t.name() == crate::ops::integer::WORDS)
    {
        if !outputs.contains(t) && read_only_by_products(s, t) && s.compute_inline(t).is_ok() {
            inlined.push(t.clone());
        }
    }
    // the elementwise output a conv leaves its tiles through: scheduled with the conv
    // (and the stages of a chain that one schedule takes care of)
    let mut epilogues: Vec<Tensor> = Vec::new();
    // a Winograd conv's chain of stages: scheduled from its output
    if p.gpu_threads == 0 {
        for t in stages
            .iter()
            .filter(|t| t.tag() == crate::ops::TAG_WINOGRAD_BLOCKED)
        {
            let epilogue = conv_epilogue(s, t, outputs).filter(|e| stages.contains(e));
            epilogues.extend(schedule_winograd_blocked(s, t, epilogue.as_ref(), p)?);
        }
    }
    // an attention's stages: scheduled from its output, per block of query rows
    if p.gpu_threads == 0 {
        for t in stages
            .iter()
            .filter(|t| t.tag() == crate::ops::TAG_ATTENTION && t.name() == "T_attention")
        {
            epilogues.extend(schedule_attention(s, t, p)?);
            epilogues.push(t.clone());
        }
    }
    // a softmax over its last axis: its four stages per row of its output
    if p.gpu_threads == 0 {
        for t in stages
            .iter()
            .filter(|t| t.tag() == "softmax_output" && t.name() == "T_softmax_norm")
        {
            epilogues.extend(schedule_softmax(s, t, p)?.unwrap_or_default());
        }
    }
    for t in stages.iter().filter(|t| !inlined.contains(t)) {
        if p.gpu_threads > 0 {
            schedule_gpu(s, t, p)?;
            continue;
        }
        if epilogues.contains(t) {
            continue;
        }
        let tag = t.tag().to_string();
        let reduces = !t.reduce_axis().is_empty();
        let epilogue = if is_conv_tag(&tag) {
            conv_epilogue(s, t, outputs).filter(|e| stages.contains(e) && !inlined.contains(e))
        } else {
            None
        };
        epilogues.extend(epilogue.clone());
        let epilogue = epilogue.as_ref();
        match tag.as_str() {
            "conv2d_nhwc" => schedule_conv2d_nhwc(s, t, epilogue, p)?,
            "conv2d_nchw" | "group_conv2d_nchw" => schedule_conv2d_nchw(s, t, epilogue, p)?,
            "group_conv2d_nhwc" => schedule_group_conv2d_nhwc(s, t, epilogue, p)?,
            "depthwise_conv2d_nhwc" | "depthwise_conv2d_nchw" => {
                schedule_depthwise(s, t, epilogue, p)?
            }
            "dense" | "bgemm" | "dense_u8i8" => schedule_dense(s, t, p)?,
            "dense_pack" | "dense_u8i8_pack" => schedule_product_tiles(s, t, p)?,
            "batch_matmul" if t.name().ends_with("_NT") => schedule_dense(s, t, p)?,
            "batch_matmul" if t.name().ends_with('N') => schedule_product_tiles(s, t, p)?,
            "matmul" if t.ndim() == 2 => schedule_matmul(s, t, p)?,
            _ if is_pool(t) => schedule_pool(s, t, p)?,
            _ if reduces => schedule_reduction(s, t, p)?,
            _ if outputs.contains(t)
                || t.ndim() >= 1 && t.shape().iter().product::<i64>() >= 1024 =>
            {
                schedule_injective(s, t, p)?
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `tag` is a convolution's (dense, grouped or depthwise; either layout).
fn is_conv_tag(tag: &str) -> bool {
    matches!(
        tag,
        "conv2d_nhwc"
            | "conv2d_nchw"
            | "group_conv2d_nhwc"
            | "group_conv2d_nchw"
            | "depthwise_conv2d_nhwc"
            | "depthwise_conv2d_nchw"
    )
}

/// Whether every stage of `s` that reads `t`, followed through the stages inlined into
/// their readers (a 1×1 conv's padding of nothing), is an int8 product (a conv or a
/// dense layer on words) or a padding copy that only such products read, and at least
/// one does.
fn read_only_by_products(s: &Schedule, t: &Tensor) -> bool {
    let mut found = false;
    let mut todo = vec![t.clone()];
    while let Some(at) = todo.pop() {
        for reader in s.stages.iter().filter(|st| {
            !st.is_placeholder()
                && st
                    .op
                    .body()
                    .is_some_and(|b| crate::schedule::body_reads(b).contains(at.buffer()))
        }) {
            let tag = reader.op.tag();
            if matches!(reader.attach, crate::schedule::Attach::Inline)
                || tag == crate::ops::TAG_PAD && at == *t
            {
                todo.push(reader.op.clone());
            } else if matches!(tag, "conv2d_nhwc" | "dense_u8i8" | "dense_u8i8_pack") {
                found = true;
            } else {
                return false;
            }
        }
    }
    found
}

/// Threads per block of the GPU default schedule (at most): enough to fill a warp many
/// times over, few enough for every device's limit.
pub const GPU_DEFAULT_THREADS: i64 = 256;

/// The fewest threads per block the GPU default schedule shrinks to: two warps.
pub const GPU_MIN_THREADS: i64 = 64;

/// Threads per block for a stage of `extent` outputs on a device of `cores` SMs: up to
/// [`GPU_DEFAULT_THREADS`] (and the device's limit), halved down to [`GPU_MIN_THREADS`]
/// while that leaves fewer than two blocks per SM. A 7×7×512 conv output (25,088
/// elements) in blocks of 256 is 98 blocks, a quarter of an H100's 132 SMs idle; in
/// blocks of 64 it is 392.
pub fn gpu_block_threads(extent: i64, max_threads: i64, cores: usize) -> i64 {
    let mut threads = max_threads.min(GPU_DEFAULT_THREADS).min(extent).max(1);
    let wanted_blocks = 2 * cores.max(1) as i64;
    while threads / 2 >= GPU_MIN_THREADS && (extent + threads - 1) / threads < wanted_blocks {
        threads /= 2;
    }
    threads
}

/// The GPU default schedule of a stage (TVM's fallback for GPU targets): its spatial
/// axes fused and split into blocks of [`gpu_block_threads`] threads (`blockIdx.x`,
/// `threadIdx.x`), one output element per thread, its reductions serial — except a
/// row reduction (softmax's, a batch-1 dense's), whose rows a warp reads together
/// (`schedule_gpu_row_reduction`). Correct for every stage; the search does the rest.
pub fn schedule_gpu(s: &mut Schedule, t: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    if reduce::schedule_gpu_row_reduction(s, t, p)? {
        return Ok(());
    }
    let ax = s.axis(t)?;
    let Some(first) = ax.first().cloned() else {
        return Ok(());
    };
    let fused = fuse_run(s, t, &first, &ax[1..])?;
    let extent: i64 = t.shape().iter().product::<i64>().max(1);
    let threads = gpu_block_threads(extent, p.gpu_threads, p.num_cores);
    let (bx, tx) = s.split(t, &fused, threads)?;
    s.bind(t, &bx, ThreadAxis::BlockIdxX)?;
    s.bind(t, &tx, ThreadAxis::ThreadIdxX)?;
    Ok(())
}
