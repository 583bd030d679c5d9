//! Default CPU schedules: hand-written, reasonable for any shape, used when nothing was
//! tuned. Register-blocked (a `local` accumulator tile computed at the output tile,
//! reduction outermost inside it, rows unrolled, columns vectorized), parallel over the
//! outermost tile loop. (Vector loops wider than a register are split by the CPU
//! backend's `split_wide_vectors`, so a schedule vectorizes whole column tiles.)

use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::tensor::{IterVar, Tensor};
use tessera_ir::{StorageScope, ThreadAxis};

mod attention;
mod winograd;
pub use attention::schedule_attention;
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
    register_tiled_product(s, c, pick_factor(m, 8), col_tile(n, p), false, p)
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
    // One row fewer than the registers hold, whether or not it divides the row count
    // (the last row tile is guarded). Measured on an AVX2 EPYC, dense_pack 128×768 ·
    // 768×3072 and 197×768 · 768×3072 (ViT's 197 tokens, a prime): 5 or 6 rows ran
    // 4.5–6.3 and 6.7–8.1 ms, 7 rows 7.2–7.7 and 10.9–11.5, 8 rows 6.5–7.1 and
    // 10.1–11.3; the largest divisor (4 rows; 1 for 197) 6.8–7.6 and 20.7–20.9.
    let mr = (p.register_rows(vectors) - 1).clamp(1, m.max(1));
    // a packed dense layer whose weights outweigh its data (ViT's, BERT's: 197 or 128
    // rows, 768 × 3072 weights) runs its column tiles outermost, so each weight block is
    // read once while every row passes; with more data than weights (ConvNeXt's
    // pointwise layers on 3136 pixels) the rows stay outermost and the weights in cache
    let columns_outer = c.tag() == "dense_pack" && conv_weights_outweigh_input(c);
    register_tiled_product(s, c, mr, nr, columns_outer, p)
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
    columns_outer: bool,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let cc = s.cache_write(c, StorageScope::Local)?;
    let ax = s.axis(c)?;
    let nd = ax.len();
    let (io, jo, ii, ji) = s.tile(c, &ax[nd - 2], &ax[nd - 1], mr, nr)?;
    // the tile loop that runs in parallel, and the one the accumulators are computed at
    let (outer, inner) = if columns_outer {
        s.reorder(c, &[jo.clone(), io.clone(), ii, ji.clone()])?;
        (jo, io)
    } else {
        (io, jo)
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
/// loop, left to right.
fn fuse_run(
    s: &mut Schedule,
    t: &Tensor,
    first: &IterVar,
    rest: &[IterVar],
) -> Result<IterVar, ScheduleError> {
    let mut fused = first.clone();
    for a in rest {
        fused = s.fuse(t, &fused, a)?;
    }
    Ok(fused)
}

/// An elementwise or injective stage: outer axes fused and parallel, innermost axis
/// vectorized when its extent allows.
pub fn schedule_injective(s: &mut Schedule, t: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let ax = s.axis(t)?;
    let Some(last) = ax.last().cloned() else {
        return Ok(());
    };
    let inner = pick_vector(*t.shape().last().unwrap_or(&1), p.vector_lanes);
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

/// The register tile of [`schedule_conv_tile`].
#[derive(Clone, Copy, Debug)]
struct ConvTile {
    /// The output axis of the tile's rows (unrolled).
    rows_axis: usize,
    /// The most rows.
    row_target: i64,
    /// The columns (the last axis, vectorized): a divisor of its extent.
    cols: i64,
    /// Whether the column tiles go outermost when the weights outweigh the input.
    columns_outer: bool,
}

impl ConvTile {
    /// Up to `row_target` rows along `rows_axis` × [`col_tile`]'s columns, the pixels
    /// outermost whatever the weights weigh.
    fn pixels_outer(rows_axis: usize, row_target: i64, conv: &Tensor, p: CpuParams) -> Self {
        ConvTile {
            rows_axis,
            row_target,
            cols: col_tile(conv.shape()[3], p),
            columns_outer: false,
        }
    }
}

/// A convolution-like output of rank 4 whose last axis is contiguous: a register tile of
/// rows (axis `tile.rows_axis`, up to `tile.row_target`) × `tile.cols` columns (the last
/// axis, whole vector registers), the accumulator tile (a `local` cache) computed at the column tile with
/// the whole reduction outermost, the two outer axes fused and parallel. Producers (a
/// dense conv's padded input) stay at root, so the inner loop has no bounds checks (a
/// depthwise or grouped conv's padding is inlined by [`schedule_stages`]). With an
/// `epilogue` (an elementwise output of the conv's shape, [`conv_epilogue`]), the tiles
/// are the epilogue's: each accumulator tile leaves the registers through it (bias,
/// residual, activation), and the conv's result is never stored.
fn schedule_conv_tile(
    s: &mut Schedule,
    conv: &Tensor,
    epilogue: Option<&Tensor>,
    tile: ConvTile,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let ConvTile {
        rows_axis,
        row_target,
        cols: cr,
        columns_outer,
    } = tile;
    let cc = s.cache_write(conv, StorageScope::Local)?;
    // the conv stage is now a copy of the accumulator: inlined into the epilogue
    let out = match epilogue {
        Some(e) => {
            s.compute_inline(conv)?;
            e.clone()
        }
        None => conv.clone(),
    };
    let out = &out;
    let ax = s.axis(out)?;
    let (rows, cols) = (out.shape()[rows_axis], out.shape()[3]);
    let (mut rr, mut cr) = (pick_factor(rows, row_target), cr);
    // A row count with no divisor near the target (13, 7, 11): the whole row, one vector
    // of columns, keeps about as many accumulators in registers as the usual tile
    // instead of a tile of one row.
    if rr * 2 <= row_target && rows <= 2 * row_target {
        rr = rows;
        cr = pick_vector(cols, p.vector_lanes).max(pick_factor(cols, 2));
    } else if rr * 2 <= row_target {
        rr = guarded_rows(rows, row_target);
    }
    let (ro, ri) = s.split(out, &ax[rows_axis], rr)?;
    let (co, ci) = s.split(out, &ax[3], cr)?;
    let outer: Vec<IterVar> = (0..3)
        .filter(|d| *d != rows_axis)
        .map(|d| ax[d].clone())
        .collect();
    // When the weights outweigh the input (the deep layers: few pixels, many channels),
    // the column (output-channel) tiles go outermost and parallel, so each weight block
    // is read once and reused over every pixel while it is in cache; otherwise the
    // pixels go outermost and each thread streams the weights once per row.
    let weights_outer = columns_outer && conv_weights_outweigh_input(conv);
    // Weights past half of L2 with the pixels outermost would stream from L3 once per
    // row tile: a row of pixels is then the block, its columns tiles outside its row
    // tiles, so each row's input stays in L2 while every weight column block passes.
    let row_blocks = !weights_outer && conv_weight_bytes(conv) > ROW_BLOCK_WEIGHTS_ABOVE;
    let (o0, o1) = (outer[0].clone(), outer[1].clone());
    let tiles = if weights_outer {
        [co.clone(), o0, o1, ro.clone()]
    } else if row_blocks {
        [o0, o1, co.clone(), ro.clone()]
    } else {
        [o0, o1, ro.clone(), co.clone()]
    };
    let mut order = tiles.to_vec();
    order.extend([ri, ci.clone()]);
    s.reorder(out, &order)?;
    if p.vectorize {
        s.vectorize(out, &ci)?;
    }
    // the conv's input channels are its last reduction axis
    let channels = s.reduce_axis(&cc)?.last().and_then(|a| a.extent());
    let chunk = channel_chunk(conv, cr).filter(|c| weights_outer && channels == Some(c.1));
    match chunk.map(|c| c.0) {
        Some(chunk) => {
            s.compute_at(&cc, out, &co)?;
            if let Some(rco) = chunked_register_tile(s, &cc, rr, cr, chunk, p)? {
                pack_chunk_weights(s, conv, &cc, &rco, p)?;
            }
        }
        None => {
            let at = if weights_outer || row_blocks {
                &ro
            } else {
                &co
            };
            s.compute_at(&cc, out, at)?;
            let cax = s.axis(&cc)?;
            let r = s.reduce_axis(&cc)?;
            register_tile(s, &cc, &r, &cax[rows_axis], &cax[3], cr, p)?;
        }
    }
    if p.num_cores > 1 {
        if weights_outer {
            s.parallel(out, &co)?;
        } else {
            let fused = s.fuse(out, &outer[0], &outer[1])?;
            s.parallel(out, &fused)?;
        }
    }
    Ok(())
}

/// The weights one column tile of an NHWC convolution reads, in bytes, past which its
/// reduction is chunked (about half of a core's L2): ResNet's 7×7×512 3×3 conv reads
/// 288 KiB per 16 output channels, re-read for every output row, and ran at 40–55
/// GFLOPS on an AVX2 VM with the whole reduction inside the row tile, 65–75 chunked.
const CHUNK_WEIGHTS_ABOVE: i64 = 256 << 10;
/// The weights of one chunk, in bytes: they stay in L1 while every output pixel of
/// the column tile takes them.
const CHUNK_WEIGHTS_BYTES: i64 = 32 << 10;
/// The accumulator tile of a chunked conv, in elements: the whole image × one column
/// tile, kept in L1.
const CHUNK_TILE_ELEMS: i64 = 4096;

/// The input-channel chunk for an NHWC conv whose column tile (`cr` output channels)
/// reads more weights than [`CHUNK_WEIGHTS_ABOVE`] and whose image × column tile fits
/// [`CHUNK_TILE_ELEMS`], with the input channel count; `None` otherwise (also for a
/// weight that is neither HWIO nor packed OHWI{b}o).
fn channel_chunk(conv: &Tensor, cr: i64) -> Option<(i64, i64)> {
    let [_, kernel, ..] = conv.inputs() else {
        return None;
    };
    let (kh, kw, ci) = match kernel.shape() {
        &[kh, kw, ci, _] | &[_, kh, kw, ci, _] => (kh, kw, ci),
        _ => return None,
    };
    let per_channel = kh * kw * cr * conv.dtype().bytes() as i64;
    let tile: i64 = conv.shape()[..3].iter().product::<i64>() * cr;
    if per_channel * ci <= CHUNK_WEIGHTS_ABOVE || tile > CHUNK_TILE_ELEMS {
        return None;
    }
    let chunk = pick_factor(ci, (CHUNK_WEIGHTS_BYTES / per_channel).max(1));
    (chunk < ci).then_some((chunk, ci))
}

/// The accumulator tile `cc` of a whole image × `cr` columns, computed at the column
/// tile, its input channels (the last reduction axis) in chunks of `chunk`: for each
/// chunk and filter tap, every row of pixels takes a register tile of `rr` pixels × the
/// columns over the chunk, so a chunk's weights are read from L1 by every pixel.
fn chunked_register_tile(
    s: &mut Schedule,
    cc: &Tensor,
    rr: i64,
    cr: i64,
    chunk: i64,
    p: CpuParams,
) -> Result<Option<IterVar>, ScheduleError> {
    let cax = s.axis(cc)?;
    let r = s.reduce_axis(cc)?;
    let Some((rc, taps)) = r.split_last() else {
        return Ok(None);
    };
    let (rco, rci) = s.split(cc, rc, chunk)?;
    let (xo, xi) = s.split(cc, &cax[2], rr)?;
    let mut outer = vec![rco];
    outer.extend(taps.iter().cloned());
    outer.extend([cax[0].clone(), cax[1].clone(), xo, rci]);
    register_tile(s, cc, &outer, &xi, &cax[3], cr, p)?;
    Ok(Some(outer.swap_remove(0)))
}

/// Copies the weights one input-channel chunk of a chunked NHWC conv's column tile
/// reads (HWIO's `[KH, KW, chunk, cr]` slice) into a contiguous buffer at the chunk
/// loop `rco` of the accumulator tile `cc`. In HWIO the slice's rows are `CO` floats
/// apart: a 1 or 2 KiB stride maps every row to the same few L1 sets, so the slice
/// never stays in L1 and every reduction step reads it from L2; copied, it does.
/// (Weights the graph packed at build time, `[O/b, KH, KW, I, b]`, need no copy.)
fn pack_chunk_weights(
    s: &mut Schedule,
    conv: &Tensor,
    cc: &Tensor,
    rco: &IterVar,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    // the accumulator tile reads the conv's kernel; only an input kernel is copied
    let Some(kernel) = conv.inputs().get(1).filter(|k| k.ndim() == 4) else {
        return Ok(());
    };
    if !s.stage(kernel).is_ok_and(|st| st.is_placeholder()) {
        return Ok(());
    }
    let kc = s.cache_read(kernel, StorageScope::Global, std::slice::from_ref(cc))?;
    s.compute_at(&kc, cc, rco)?;
    let kax = s.axis(&kc)?;
    let lanes = pick_vector(kernel.shape()[3], p.vector_lanes);
    if p.vectorize && lanes > 1 {
        let (_o, i) = s.split(&kc, &kax[3], lanes)?;
        s.vectorize(&kc, &i)?;
    }
    Ok(())
}

/// The weight bytes past which an NHWC conv with its pixels outermost blocks them by
/// rows ([`schedule_conv_tile`]): half of a 512 KiB L2.
const ROW_BLOCK_WEIGHTS_ABOVE: i64 = 256 << 10;

/// The bytes of a conv's weights (its second input).
fn conv_weight_bytes(conv: &Tensor) -> i64 {
    conv.inputs().get(1).map_or(0, |k| {
        k.shape().iter().product::<i64>() * k.dtype().bytes() as i64
    })
}

/// Whether the second input of `conv` (a conv's or a packed dense layer's weights) holds
/// more elements than the first (its data).
fn conv_weights_outweigh_input(conv: &Tensor) -> bool {
    let size = |t: &Tensor| t.shape().iter().product::<i64>();
    match conv.inputs() {
        [data, kernel, ..] => size(kernel) > size(data),
        _ => false,
    }
}

/// conv2d NHWC: output pixels of a row × vectors of output channels per register tile,
/// as many as the registers hold ([`conv_vectors`]; the tiles of `epilogue`'s loops
/// when there is one, see [`schedule_conv_tile`]).
pub fn schedule_conv2d_nhwc(
    s: &mut Schedule,
    conv: &Tensor,
    epilogue: Option<&Tensor>,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let co = conv.shape()[3];
    let lanes = pick_vector(co, p.vector_lanes);
    let vectors = conv_vectors(co / lanes);
    let tile = ConvTile {
        rows_axis: 2,
        row_target: p.register_rows(vectors),
        cols: vectors * lanes,
        columns_outer: true,
    };
    schedule_conv_tile(s, conv, epilogue, tile, p)
}

/// Vector registers of columns in an NHWC conv's register tile, out of `count` vectors
/// of output channels: the tile of rows × vectors that fits the registers
/// ([`CpuParams::register_rows`]) with the most FMAs per load (each row broadcasts one
/// input, each vector loads one weight). On AVX2: 7 × 2 (14 FMAs for 9 loads), else
/// 4 × 3 (12 for 7: MobileNet's 24, 72 and 120 channels), 2 × 5 (10 for 7: 40 and 200
/// channels), and a column of 8 × 1 (8 for 9) only when no other divides.
fn conv_vectors(count: i64) -> i64 {
    [2, 3, 5].into_iter().find(|v| count % v == 0).unwrap_or(1)
}

/// Grouped conv2d NHWC (`group_conv2d_nhwc`, kernel HWIO with `I` = input channels per
/// group, or packed OHWI{b}o): the dense conv's register tiles with vectors no wider
/// than a group's output channels, so that every lane of a vector reads the same input
/// channel (the vectorizer makes `ff / group_width` one value per vector, and the input
/// load a broadcast). ResNeXt's 4 channels per group take 4-lane vectors, RegNet's 8
/// and wider full AVX2 ones; a group width with no power-of-two divisor stays scalar.
pub fn schedule_group_conv2d_nhwc(
    s: &mut Schedule,
    conv: &Tensor,
    epilogue: Option<&Tensor>,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    // the kernel's input channels per group: HWIO's third axis, packed OHWI{b}o's fourth
    let per_group = match conv.inputs().get(1).map(|k| k.shape()) {
        Some(&[_, _, i, _] | &[_, _, _, i, _]) if i > 0 => {
            let groups = conv.inputs()[0].shape().last().copied().unwrap_or(1) / i;
            conv.shape()[3] / groups.max(1)
        }
        _ => 1,
    };
    let lanes = pick_vector(per_group, p.vector_lanes);
    let p = CpuParams {
        vector_lanes: lanes,
        vectorize: p.vectorize && lanes > 1,
        ..p
    };
    schedule_conv2d_nhwc(s, conv, epilogue, p)
}

/// conv2d NCHW: 8 output channels × output columns per register tile (columns are
/// contiguous in NCHW).
pub fn schedule_conv2d_nchw(
    s: &mut Schedule,
    conv: &Tensor,
    epilogue: Option<&Tensor>,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let tile = ConvTile::pixels_outer(1, 8, conv, p);
    schedule_conv_tile(s, conv, epilogue, tile, p)
}

/// Depthwise conv2d: 4 pixels × channels (NHWC) or 4 rows × columns (NCHW) per tile.
pub fn schedule_depthwise(
    s: &mut Schedule,
    conv: &Tensor,
    epilogue: Option<&Tensor>,
    p: CpuParams,
) -> Result<(), ScheduleError> {
    let tile = ConvTile::pixels_outer(2, 4, conv, p);
    schedule_conv_tile(s, conv, epilogue, tile, p)
}

/// The stage a convolution `conv` of `s` (not itself an output) can leave its tiles
/// through: the one output of `outputs`, not inlined, reached from the conv through
/// elementwise stages only (no reduction, tagged `elemwise` or `broadcast`, of the
/// conv's shape, so each reads its producers where it writes: bias, residual,
/// activation). Every stage that reads the conv or one of them is one of them; all but
/// the output are inlined. Chains (bias → ReLU) and diamonds whose branches meet again
/// (SiLU's `x · sigmoid(x)`, hard-swish's `x · relu6(x + 3) / 6`) both qualify.
pub fn conv_epilogue(s: &Schedule, conv: &Tensor, outputs: &[Tensor]) -> Option<Tensor> {
    if outputs.contains(conv) {
        // stored anyway: its own tiles
        return None;
    }
    let mut exit: Option<Tensor> = None;
    let mut seen: Vec<Tensor> = Vec::new();
    let mut todo = vec![conv.clone()];
    while let Some(at) = todo.pop() {
        let readers = s.stages.iter().filter(|st| {
            !st.is_placeholder()
                && st
                    .op
                    .body()
                    .is_some_and(|b| crate::schedule::body_reads(b).contains(at.buffer()))
        });
        let mut any = false;
        for reader in readers {
            any = true;
            let tag = reader.op.tag();
            let elementwise = (tag == crate::ops::TAG_ELEMWISE || tag == crate::ops::TAG_BROADCAST)
                && reader.op.reduce_axis().is_empty()
                && reader.op.shape() == conv.shape();
            if !elementwise {
                return None;
            }
            if seen.contains(&reader.op) {
                continue;
            }
            seen.push(reader.op.clone());
            if matches!(reader.attach, crate::schedule::Attach::Inline) {
                todo.push(reader.op.clone());
            } else if exit.is_some() || !outputs.contains(&reader.op) {
                // two ways out, or one that is not an output
                return None;
            } else {
                exit = Some(reader.op.clone());
            }
        }
        // an inlined stage no one reads: not a way to an output
        if !any && at != *conv {
            return None;
        }
    }
    exit
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

/// Whether `t` is a padding (tag `injective,pad`) that adds nothing: a copy of its one
/// input.
fn is_identity_pad(t: &Tensor) -> bool {
    t.tag() == crate::ops::TAG_PAD && matches!(t.inputs(), [x] if x.shape() == t.shape())
}

/// Whether `t` is a pooling stage (a max or sum over a window).
fn is_pool(t: &Tensor) -> bool {
    matches!(
        t.tag(),
        "pool_max" | "pool_sum" | "adaptive_pool_max" | "adaptive_pool_sum"
    )
}

/// Whether some load of `t`'s body indexes its last dimension with a reduction variable:
/// the last output axis is pooled (NCHW's width), not carried through (NHWC's channels).
fn last_axis_reduced(t: &Tensor) -> bool {
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
    let Some(last) = ax.last().cloned() else {
        return schedule_reduction(s, t, p);
    };
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
    if p.num_cores > 1 {
        if let Some(first) = ax.first() {
            s.parallel(t, first)?;
        }
    }
    Ok(())
}

/// The extent of `t`'s one reduction axis when it is a row reduction: every load that
/// uses the axis indexes its last dimension with it and no other dimension (softmax's
/// maximum and sum, layer norm's mean and variance over the last axis, reading rows).
fn row_reduction_extent(t: &Tensor) -> Option<i64> {
    let [k] = t.reduce_axis() else {
        return None;
    };
    let body = t.body()?;
    let is_k = |v: &tessera_ir::Var| v == k.var();
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
                contiguous &= !uses_k || (last_is_k && !k_elsewhere);
            }
        });
    }
    contiguous.then(|| k.extent()).flatten()
}

/// A reduction along rows ([`row_reduction_extent`], at least two vectors long, a whole
/// number of them): the row factored (`rfactor`) into a vector of partial results
/// computed per output element, one vector load and one vector operation per step
/// instead of a chain of scalar ones, then reduced across its lanes; the output's axes
/// fused and parallel (layer norm's `[1, 197]` means ran on one core, parallel over
/// the batch). Returns whether it applied.
fn schedule_row_reduction(
    s: &mut Schedule,
    t: &Tensor,
    p: CpuParams,
) -> Result<bool, ScheduleError> {
    let nd = t.ndim();
    let Some(extent) = row_reduction_extent(t).filter(|_| p.vectorize && nd >= 1) else {
        return Ok(false);
    };
    let lanes = pick_vector(extent, p.vector_lanes);
    if lanes < 4 || extent < 2 * lanes {
        return Ok(false);
    }
    let k = s.reduce_axis(t)?;
    let (_ko, ki) = s.split(t, &k[0], lanes)?;
    let rf = s.rfactor(t, &ki, nd)?;
    let ax = s.axis(t)?;
    let row = fuse_run(s, t, &ax[0], &ax[1..])?;
    s.compute_at(&rf, t, &row)?;
    let rax = s.axis(&rf)?;
    let mut order = s.reduce_axis(&rf)?;
    order.extend(rax.iter().cloned());
    s.reorder(&rf, &order)?;
    s.vectorize(&rf, &rax[nd])?;
    if p.num_cores > 1 {
        s.parallel(t, &row)?;
    }
    Ok(true)
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
    // which every output channel tile reads
    let mut inlined: Vec<Tensor> = Vec::new();
    if p.gpu_threads == 0 {
        // (not where the pooled axis is the contiguous one, NCHW: measured, its rows then
        // run faster from a padded copy, average pooling's most)
        for reader in stages.iter().filter(|t| {
            is_pool(t) && !last_axis_reduced(t)
                || matches!(t.tag(), "depthwise_conv2d_nhwc" | "group_conv2d_nhwc")
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
    }
    // a padding of nothing (a 1×1 conv's `pad_temp`) is a copy of its input: read the
    // input instead (EfficientNet's 112×112×16 input copied 0.8 MB per 1×1 conv)
    if p.gpu_threads == 0 {
        for t in stages.iter().filter(|t| is_identity_pad(t)) {
            let at_root = s
                .stage(t)
                .is_ok_and(|st| matches!(st.attach, crate::schedule::Attach::Root));
            if at_root && !outputs.contains(t) && s.compute_inline(t).is_ok() {
                inlined.push(t.clone());
            }
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
        let is_conv = matches!(
            tag.as_str(),
            "conv2d_nhwc"
                | "conv2d_nchw"
                | "group_conv2d_nhwc"
                | "group_conv2d_nchw"
                | "depthwise_conv2d_nhwc"
                | "depthwise_conv2d_nchw"
        );
        let epilogue = if is_conv {
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
            "dense" | "bgemm" => schedule_dense(s, t, p)?,
            "dense_pack" => schedule_product_tiles(s, t, p)?,
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

/// Threads per block of the GPU default schedule (at most): enough to fill a warp many
/// times over, few enough for every device's limit.
pub const GPU_DEFAULT_THREADS: i64 = 256;

/// The GPU default schedule of a stage (TVM's fallback for GPU targets): its spatial
/// axes fused and split into blocks of up to [`GPU_DEFAULT_THREADS`] threads
/// (`blockIdx.x`, `threadIdx.x`), one output element per thread, its reductions serial.
/// Correct for every stage, fast for none but the injective ones: the search does the
/// rest.
pub fn schedule_gpu(s: &mut Schedule, t: &Tensor, p: CpuParams) -> Result<(), ScheduleError> {
    let ax = s.axis(t)?;
    let Some(first) = ax.first().cloned() else {
        return Ok(());
    };
    let fused = fuse_run(s, t, &first, &ax[1..])?;
    let extent: i64 = t.shape().iter().product::<i64>().max(1);
    let threads = p.gpu_threads.min(GPU_DEFAULT_THREADS).min(extent).max(1);
    let (bx, tx) = s.split(t, &fused, threads)?;
    s.bind(t, &bx, ThreadAxis::BlockIdxX)?;
    s.bind(t, &tx, ThreadAxis::ThreadIdxX)?;
    Ok(())
}
