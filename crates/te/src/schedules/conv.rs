//! The default schedules of convolutions: a register tile of output rows × whole vector
//! registers of channels, its accumulator (a `local` cache) computed at the column tile
//! with the whole reduction outermost, the outer axes fused and parallel; the reduction
//! chunked by input channels where a column tile's weights outgrow L2; an elementwise
//! epilogue (bias, residual, activation) taking the tiles so the conv's result is never
//! stored. NHWC dense and grouped, NCHW, depthwise.

use super::*;

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
    // A row whose input outgrows L2 itself (a 1-D conv over a long sequence: wav2vec2's
    // 3,199 × 512 input is 6.5 MiB) is cut into blocks of row tiles whose input fits,
    // and the blocks are parallel with the outer axes (a single row leaves nothing else
    // to run in parallel).
    let row_block = row_blocks
        .then(|| row_tiles_per_block(conv, (rows + rr - 1) / rr))
        .flatten();
    let (o0, o1) = (outer[0].clone(), outer[1].clone());
    let (rob, ro) = match row_block {
        Some(b) => {
            let (rob, roi) = s.split(out, &ro, b)?;
            (Some(rob), roi)
        }
        None => (None, ro),
    };
    let mut order = if weights_outer {
        vec![co.clone(), o0, o1, ro.clone()]
    } else if row_blocks {
        let mut v = vec![o0, o1];
        v.extend(rob.clone());
        v.extend([co.clone(), ro.clone()]);
        v
    } else {
        vec![o0, o1, ro.clone(), co.clone()]
    };
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
            let mut fused = s.fuse(out, &outer[0], &outer[1])?;
            if let Some(rob) = &rob {
                fused = s.fuse(out, &fused, rob)?;
            }
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

/// The input bytes of one block of row tiles (the input rows and columns a block's
/// outputs read) when a conv's pixels go outermost in row blocks: half of a 512 KiB L2.
const ROW_BLOCK_INPUT_BYTES: i64 = 256 << 10;

/// How many of a row's `tiles` register tiles make one block whose input fits
/// [`ROW_BLOCK_INPUT_BYTES`], or `None` when the whole row's input does (the input of
/// one output row is the window's rows of the data, whatever the stride).
fn row_tiles_per_block(conv: &Tensor, tiles: i64) -> Option<i64> {
    let [data, kernel, ..] = conv.inputs() else {
        return None;
    };
    let kh = match kernel.shape() {
        &[kh, _, _, _] | &[_, kh, _, _, _] => kh,
        _ => return None,
    };
    let ds = data.shape();
    let (n, h) = (*ds.first()?, *ds.get(1)?);
    let data_bytes = ds.iter().product::<i64>() * data.dtype().bytes() as i64;
    let row_bytes = data_bytes / (n * h).max(1) * kh.min(h);
    (row_bytes > ROW_BLOCK_INPUT_BYTES && tiles > 1)
        .then(|| (tiles * ROW_BLOCK_INPUT_BYTES / row_bytes).clamp(1, tiles))
}

/// The bytes of a conv's weights (its second input).
fn conv_weight_bytes(conv: &Tensor) -> i64 {
    conv.inputs().get(1).map_or(0, |k| {
        k.shape().iter().product::<i64>() * k.dtype().bytes() as i64
    })
}

/// Whether the second input of `conv` (a conv's or a packed dense layer's weights) holds
/// more elements than the first (its data).
pub(super) fn conv_weights_outweigh_input(conv: &Tensor) -> bool {
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
