//! The packed conv2d template (`conv2d_packed.vta`): TVM's knobs — `tile_b`, `tile_h`,
//! `tile_w`, `tile_ci`, `tile_co` (each the inner size of a two-way split, every divisor)
//! and `oc_nthread`, `h_nthread` (virtual threads) — and the instruction stream a
//! configuration gives.
//!
//! The output is computed tile by tile in TVM's order (batch, rows, output channels,
//! columns). A tile's accumulators are reset, then for each block of input channels the
//! load module brings the input window (padding by the LOAD's pad fields) and the
//! weights, and compute runs one GEMM over the tile; then the ALU applies the epilogue
//! (bias, rounding, shift, clip) and the store module writes each channel block's rows.
//! Virtual threads get buffers of their own and run interleaved, so one thread's loads
//! overlap another's GEMM and one's stores the next tile's compute; the tokens between
//! modules follow the buffers (a load waits for the GEMM that last read its buffer, a
//! reset for the store that last read its accumulators). A configuration whose tiles
//! do not fit the buffers or whose splits do not divide is an instantiation error.

use crate::builder::{Arg, Builder, Dir, Program};
use crate::config::VtaConfig;
use crate::error::Unsupported;
use crate::error::VtaError;
use crate::isa::{
    AluInsn, AluOp, Deps, GemmInsn, Insn, Layout, MemInsn, MemOp, MemType, Module, Uop, UopLoop,
};
use serde::{Deserialize, Serialize};

/// The kernel's tensor arguments, in order: data, kernel, the bias when the epilogue
/// adds one, and the output ([`Conv2dPacked::out_arg`]).
pub const DATA: usize = 0;
pub const KERNEL: usize = 1;
pub const BIAS: usize = 2;

/// What follows the convolution on the accumulators: `clip((acc + bias + round) >> shift)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Epilogue {
    /// Add the per-channel int32 bias (argument [`BIAS`], `CO × batch × block`).
    pub bias: bool,
    /// Arithmetic right shift.
    pub shift: u32,
    /// Add `1 << (shift − 1)` before shifting (round half up).
    pub round: bool,
    /// Clip bounds (applied as MIN then MAX), within int8.
    pub clip: (i16, i16),
}

/// A conv2d on packed tensors: data `N × CI × H × W × batch × block` int8 (sizes of N, CI
/// and CO in blocks), kernel `CO × CI × KH × KW × block × block` int8, output
/// `N × CO × OH × OW × batch × block` int8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Conv2dPacked {
    pub n: usize,
    pub ci: usize,
    pub h: usize,
    pub w: usize,
    pub co: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub epilogue: Epilogue,
}

impl Conv2dPacked {
    pub fn out_h(&self) -> usize {
        (self.h + 2 * self.pad.0 - self.kh) / self.stride.0 + 1
    }
    pub fn out_w(&self) -> usize {
        (self.w + 2 * self.pad.1 - self.kw) / self.stride.1 + 1
    }
    /// Operations (two per multiply-add), as TVM counts them.
    pub fn flops(&self, cfg: &VtaConfig) -> u64 {
        let outs =
            (self.n * cfg.batch() * self.co * cfg.block() * self.out_h() * self.out_w()) as u64;
        2 * outs * (self.kh * self.kw * self.ci * cfg.block()) as u64
    }
    /// The output's argument index: after the bias, or in its place without one.
    pub fn out_arg(&self) -> usize {
        if self.epilogue.bias {
            3
        } else {
            2
        }
    }
    /// Checks the shape itself.
    pub fn check(&self) -> Result<(), Unsupported> {
        let sizes = [
            self.n,
            self.ci,
            self.h,
            self.w,
            self.co,
            self.kh,
            self.kw,
            self.stride.0,
            self.stride.1,
        ];
        if sizes.contains(&0) {
            return Err(Unsupported("every size and stride must be positive".into()));
        }
        if self.h + 2 * self.pad.0 < self.kh || self.w + 2 * self.pad.1 < self.kw {
            return Err(Unsupported(
                "the kernel is larger than the padded input".into(),
            ));
        }
        if self.pad.0 >= self.kh || self.pad.1 >= self.kw || self.pad.0 > 15 || self.pad.1 > 15 {
            return Err(Unsupported(
                "padding smaller than the kernel and at most 15 (the LOAD's pad fields)".into(),
            ));
        }
        let e = &self.epilogue;
        if e.shift > 31 || (e.round && e.shift > 15) || e.clip.0 > e.clip.1 {
            return Err(Unsupported(format!(
                "epilogue {e:?}: a shift up to 31 (15 when rounding) and clip low ≤ high"
            )));
        }
        Ok(())
    }
}

/// A point of the template's space: the inner size of each split and the thread counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Knobs {
    pub tile_b: usize,
    pub tile_h: usize,
    pub tile_w: usize,
    pub tile_ci: usize,
    pub tile_co: usize,
    pub oc_nthread: usize,
    pub h_nthread: usize,
}

impl std::fmt::Display for Knobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tile_b {} tile_h {} tile_w {} tile_ci {} tile_co {} oc_nthread {} h_nthread {}",
            self.tile_b,
            self.tile_h,
            self.tile_w,
            self.tile_ci,
            self.tile_co,
            self.oc_nthread,
            self.h_nthread
        )
    }
}

fn divisors(n: usize) -> Vec<usize> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// The template's configuration space for `w`, in TVM's order (every divisor for each
/// split, 1 or 2 threads each way).
pub fn space(w: &Conv2dPacked) -> Vec<Knobs> {
    let mut out = Vec::new();
    for &tile_b in &divisors(w.n) {
        for &tile_h in &divisors(w.out_h()) {
            for &tile_w in &divisors(w.out_w()) {
                for &tile_ci in &divisors(w.ci) {
                    for &tile_co in &divisors(w.co) {
                        for oc_nthread in [1, 2] {
                            for h_nthread in [1, 2] {
                                out.push(Knobs {
                                    tile_b,
                                    tile_h,
                                    tile_w,
                                    tile_ci,
                                    tile_co,
                                    oc_nthread,
                                    h_nthread,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The sizes of one thread's buffers for a configuration, and where thread `t`'s start.
#[derive(Clone, Copy, Debug)]
struct Slots {
    rows_in: usize,
    cols_in: usize,
    inp: usize,
    wgt: usize,
    /// Accumulators of the output tile, then the bias.
    acc: usize,
    tile_acc: usize,
}

/// One tile of the output, and the thread it runs on.
#[derive(Clone, Copy, Debug)]
struct Tile {
    thread: usize,
    b0: usize,
    i0: usize,
    co0: usize,
    j0: usize,
}

/// Generates the instruction stream of `w` under `k`.
pub fn generate(cfg: &VtaConfig, w: &Conv2dPacked, k: &Knobs) -> Result<Program, VtaError> {
    let fail = |reason: String| VtaError::Instantiate {
        config: k.to_string(),
        reason,
    };
    w.check().map_err(|e| fail(e.to_string()))?;
    let slots = plan(cfg, w, k).map_err(|e| fail(e.to_string()))?;
    let layout = Layout::of(cfg).map_err(|e| fail(e.to_string()))?;
    let threads = k.oc_nthread * k.h_nthread;
    let mut g = Gen {
        b: Builder::new(layout),
        w,
        k,
        s: slots,
        kernels: Vec::new(),
    };
    for t in 0..threads {
        let kern = g.thread_kernels(t);
        g.kernels.push(kern);
    }
    if g.b.uop_count() > cfg.uop_depth() {
        return Err(fail(format!(
            "the micro-op kernels need {} entries, the micro-op buffer has {}",
            g.b.uop_count(),
            cfg.uop_depth()
        )));
    }
    let n_uops = g.b.uop_count() as u32;
    g.b.emit(
        Insn::Mem(mem(MemOp::Load, MemType::Uop, 0, 0, 1, n_uops, n_uops)),
        Some(Arg::Uops),
    );
    let groups = tile_groups(w, k);
    let ko = w.ci / k.tile_ci;
    for (gi, group) in groups.iter().enumerate() {
        let first = gi == 0;
        let last = gi + 1 == groups.len();
        for tile in group {
            g.reset(tile, first);
        }
        for kk in 0..ko {
            let final_use = last && kk + 1 == ko;
            for tile in group {
                g.load(tile, kk, first && kk == 0);
                g.gemm(tile, !final_use);
            }
        }
        for (n, tile) in group.iter().enumerate() {
            g.epilogue(tile);
            // the last tile's store tells FINISH; the others free their accumulators
            let tell = !last || n + 1 == group.len();
            g.store(tile, tell);
        }
    }
    g.b.pop(Module::Compute, Dir::Next);
    g.b.emit(Insn::Finish(Deps::default()), None);
    g.b.finish()
}

/// Why [`plan`] refuses a configuration ([`generate`] makes it the reason of a
/// [`VtaError::Instantiate`]).
#[derive(Debug, thiserror::Error)]
enum PlanError {
    /// A tile size that does not divide its axis.
    #[error("{knob} {tile} does not divide its axis of {axis}")]
    Split {
        knob: &'static str,
        tile: usize,
        axis: usize,
    },
    /// A virtual-thread count that is not 1 or 2 or does not divide its tiles.
    #[error("{knob} {n} does not divide the {outer} {axis} tiles")]
    Threads {
        knob: &'static str,
        n: usize,
        outer: usize,
        axis: &'static str,
    },
    /// Tiles that overflow an on-chip buffer.
    #[error(
        "the tiles need {} {buffer} entries ({per} per thread × {threads}), the buffer has {depth}",
        per * threads
    )]
    Capacity {
        buffer: &'static str,
        per: usize,
        threads: usize,
        depth: usize,
    },
}

/// Checks the splits and the buffer capacities; the per-thread buffer sizes.
fn plan(cfg: &VtaConfig, w: &Conv2dPacked, k: &Knobs) -> Result<Slots, PlanError> {
    let splits = [
        ("tile_b", k.tile_b, w.n),
        ("tile_h", k.tile_h, w.out_h()),
        ("tile_w", k.tile_w, w.out_w()),
        ("tile_ci", k.tile_ci, w.ci),
        ("tile_co", k.tile_co, w.co),
    ];
    for (name, tile, axis) in splits {
        if tile == 0 || axis % tile != 0 {
            return Err(PlanError::Split {
                knob: name,
                tile,
                axis,
            });
        }
    }
    for (name, n, outer, axis) in [
        (
            "oc_nthread",
            k.oc_nthread,
            w.co / k.tile_co,
            "output-channel",
        ),
        ("h_nthread", k.h_nthread, w.out_h() / k.tile_h, "row"),
    ] {
        if !(1..=2).contains(&n) || outer % n != 0 {
            return Err(PlanError::Threads {
                knob: name,
                n,
                outer,
                axis,
            });
        }
    }
    let threads = k.oc_nthread * k.h_nthread;
    let rows_in = (k.tile_h - 1) * w.stride.0 + w.kh;
    let cols_in = (k.tile_w - 1) * w.stride.1 + w.kw;
    let tile_acc = k.tile_b * k.tile_co * k.tile_h * k.tile_w;
    let s = Slots {
        rows_in,
        cols_in,
        inp: k.tile_b * k.tile_ci * rows_in * cols_in,
        wgt: k.tile_co * k.tile_ci * w.kh * w.kw,
        acc: tile_acc + if w.epilogue.bias { k.tile_co } else { 0 },
        tile_acc,
    };
    for (name, per, depth) in [
        ("INP", s.inp, cfg.inp_depth()),
        ("WGT", s.wgt, cfg.wgt_depth()),
        ("ACC", s.acc, cfg.acc_depth()),
    ] {
        if per * threads > depth {
            return Err(PlanError::Capacity {
                buffer: name,
                per,
                threads,
                depth,
            });
        }
    }
    Ok(s)
}

/// The tiles in order, grouped by the virtual threads that run them together.
fn tile_groups(w: &Conv2dPacked, k: &Knobs) -> Vec<Vec<Tile>> {
    let mut groups = Vec::new();
    for b0 in 0..w.n / k.tile_b {
        for io in 0..w.out_h() / k.tile_h / k.h_nthread {
            for coo in 0..w.co / k.tile_co / k.oc_nthread {
                for j0 in 0..w.out_w() / k.tile_w {
                    let mut group = Vec::new();
                    for vh in 0..k.h_nthread {
                        for vc in 0..k.oc_nthread {
                            group.push(Tile {
                                thread: vh * k.oc_nthread + vc,
                                b0,
                                i0: io * k.h_nthread + vh,
                                co0: coo * k.oc_nthread + vc,
                                j0,
                            });
                        }
                    }
                    groups.push(group);
                }
            }
        }
    }
    groups
}

/// One thread's micro-op kernels: `[begin, end)` of each.
#[derive(Clone, Copy, Debug)]
struct Kernels {
    gemm: (u32, u32),
    /// Over the tile's accumulators, `src = dst` (reset and immediate ALU ops).
    tile: (u32, u32),
    /// Over the tile's accumulators, `src` = the bias of the channel block.
    bias: (u32, u32),
}

struct Gen<'a> {
    b: Builder,
    w: &'a Conv2dPacked,
    k: &'a Knobs,
    s: Slots,
    kernels: Vec<Kernels>,
}

fn mem(op: MemOp, mem: MemType, sram: usize, dram: usize, y: u32, x: u32, stride: u32) -> MemInsn {
    MemInsn {
        op,
        deps: Deps::default(),
        mem,
        sram_base: sram as u32,
        dram_base: dram as u32,
        y_size: y,
        x_size: x,
        x_stride: stride,
        y_pad: [0, 0],
        x_pad: [0, 0],
    }
}

impl Gen<'_> {
    fn inp_base(&self, t: usize) -> usize {
        t * self.s.inp
    }
    fn wgt_base(&self, t: usize) -> usize {
        t * self.s.wgt
    }
    fn acc_base(&self, t: usize) -> usize {
        t * self.s.acc
    }

    /// The loops every tile kernel shares: output channel blocks outside, rows inside.
    fn tile_loop(&self, (bgn, end): (u32, u32), reset: bool) -> UopLoop {
        let k = self.k;
        UopLoop {
            reset,
            uop_bgn: bgn,
            uop_end: end,
            iter_out: k.tile_co as u32,
            iter_in: k.tile_h as u32,
            dst_factor: [(k.tile_h * k.tile_w) as u32, k.tile_w as u32],
            src_factor: [0, 0],
        }
    }

    fn thread_kernels(&mut self, t: usize) -> Kernels {
        let (k, w, s) = (self.k, self.w, self.s);
        let (acc, inp, wgt) = (self.acc_base(t), self.inp_base(t), self.wgt_base(t));
        // the batch and the columns innermost: consecutive steps write different
        // accumulators whenever the tile has more than one
        let mut gemm = Vec::new();
        for ci in 0..k.tile_ci {
            for di in 0..w.kh {
                for dj in 0..w.kw {
                    for b in 0..k.tile_b {
                        for j in 0..k.tile_w {
                            gemm.push(Uop {
                                dst: (acc + b * k.tile_co * k.tile_h * k.tile_w + j) as u32,
                                src: (inp
                                    + ((b * k.tile_ci + ci) * s.rows_in + di) * s.cols_in
                                    + j * w.stride.1
                                    + dj) as u32,
                                wgt: (wgt + (ci * w.kh + di) * w.kw + dj) as u32,
                            });
                        }
                    }
                }
            }
        }
        let dst = |b: usize, j: usize| (acc + b * k.tile_co * k.tile_h * k.tile_w + j) as u32;
        let tile: Vec<Uop> = (0..k.tile_b)
            .flat_map(|b| (0..k.tile_w).map(move |j| (b, j)))
            .map(|(b, j)| Uop {
                dst: dst(b, j),
                src: dst(b, j),
                wgt: 0,
            })
            .collect();
        let bias_at = (acc + s.tile_acc) as u32;
        let bias: Vec<Uop> = tile
            .iter()
            .map(|u| Uop {
                dst: u.dst,
                src: bias_at,
                wgt: 0,
            })
            .collect();
        Kernels {
            gemm: self.b.kernel(&gemm),
            tile: self.b.kernel(&tile),
            bias: self.b.kernel(&bias),
        }
    }

    /// Resets the tile's accumulators (after the store that last read them) and loads
    /// its bias.
    fn reset(&mut self, tile: &Tile, first: bool) {
        if !first {
            self.b.pop(Module::Compute, Dir::Next);
        }
        let kern = self.kernels[tile.thread];
        let lp = self.tile_loop(kern.tile, true);
        self.b.emit(
            Insn::Gemm(GemmInsn {
                deps: Deps::default(),
                lp,
                wgt_factor: [0, 0],
            }),
            None,
        );
        if self.w.epilogue.bias {
            let at = self.acc_base(tile.thread) + self.s.tile_acc;
            let n = self.k.tile_co as u32;
            let m = mem(
                MemOp::Load,
                MemType::Acc,
                at,
                tile.co0 * self.k.tile_co,
                1,
                n,
                n,
            );
            self.b.emit(Insn::Mem(m), Some(Arg::Tensor(BIAS)));
        }
    }

    /// The input windows and weights of input-channel block `kk` for `tile` (after the
    /// GEMM that last read the thread's buffers, unless this is their first use).
    fn load(&mut self, tile: &Tile, kk: usize, first: bool) {
        let (w, k, s) = (self.w, self.k, self.s);
        if !first {
            self.b.pop(Module::Load, Dir::Next);
        }
        let y0 = (tile.i0 * k.tile_h * w.stride.0) as isize - w.pad.0 as isize;
        let x0 = (tile.j0 * k.tile_w * w.stride.1) as isize - w.pad.1 as isize;
        let (ypad, ys) = window(y0, s.rows_in, w.h);
        let (xpad, xs) = window(x0, s.cols_in, w.w);
        for b in 0..k.tile_b {
            for ci in 0..k.tile_ci {
                let plane = (tile.b0 * k.tile_b + b) * w.ci + kk * k.tile_ci + ci;
                let dram = (plane * w.h + y0.max(0) as usize) * w.w + x0.max(0) as usize;
                let sram =
                    self.inp_base(tile.thread) + (b * k.tile_ci + ci) * s.rows_in * s.cols_in;
                let mut m = mem(
                    MemOp::Load,
                    MemType::Inp,
                    sram,
                    dram,
                    ys as u32,
                    xs as u32,
                    w.w as u32,
                );
                m.y_pad = ypad;
                m.x_pad = xpad;
                self.b.emit(Insn::Mem(m), Some(Arg::Tensor(DATA)));
            }
        }
        let per_co = w.ci * w.kh * w.kw;
        let dram = tile.co0 * k.tile_co * per_co + kk * k.tile_ci * w.kh * w.kw;
        let x = (k.tile_ci * w.kh * w.kw) as u32;
        let m = mem(
            MemOp::Load,
            MemType::Wgt,
            self.wgt_base(tile.thread),
            dram,
            k.tile_co as u32,
            x,
            per_co as u32,
        );
        self.b.emit(Insn::Mem(m), Some(Arg::Tensor(KERNEL)));
        self.b.push(Module::Load, Dir::Next);
    }

    /// The GEMM of one input-channel block over the tile; `free` hands the thread's
    /// input and weight buffers back to the load module.
    fn gemm(&mut self, tile: &Tile, free: bool) {
        let (w, k, s) = (self.w, self.k, self.s);
        self.b.pop(Module::Compute, Dir::Prev);
        let mut lp = self.tile_loop(self.kernels[tile.thread].gemm, false);
        lp.src_factor = [0, (w.stride.0 * s.cols_in) as u32];
        let wgt_factor = [(k.tile_ci * w.kh * w.kw) as u32, 0];
        self.b.emit(
            Insn::Gemm(GemmInsn {
                deps: Deps::default(),
                lp,
                wgt_factor,
            }),
            None,
        );
        if free {
            self.b.push(Module::Compute, Dir::Prev);
        }
    }

    fn alu(&mut self, kern: (u32, u32), op: AluOp, imm: Option<i16>, bias: bool) {
        let mut lp = self.tile_loop(kern, false);
        if bias {
            lp.src_factor = [1, 0];
        } else {
            lp.src_factor = lp.dst_factor;
        }
        self.b.emit(
            Insn::Alu(AluInsn {
                deps: Deps::default(),
                lp,
                op,
                imm,
            }),
            None,
        );
    }

    /// Bias, rounding, shift and clip on the tile's accumulators; then they go to the
    /// store module.
    fn epilogue(&mut self, tile: &Tile) {
        let e = self.w.epilogue;
        let kern = self.kernels[tile.thread];
        if e.bias {
            self.alu(kern.bias, AluOp::Add, None, true);
        }
        if e.round && e.shift > 0 {
            self.alu(kern.tile, AluOp::Add, Some(1 << (e.shift - 1)), false);
        }
        if e.shift > 0 {
            self.alu(kern.tile, AluOp::Shr, Some(e.shift as i16), false);
        }
        self.alu(kern.tile, AluOp::Min, Some(e.clip.1), false);
        self.alu(kern.tile, AluOp::Max, Some(e.clip.0), false);
        self.b.push(Module::Compute, Dir::Next);
    }

    /// Stores each channel block's rows of the tile; `tell` pushes a token back to
    /// compute afterwards (the accumulators are free, or the work is done).
    fn store(&mut self, tile: &Tile, tell: bool) {
        let (w, k) = (self.w, self.k);
        self.b.pop(Module::Store, Dir::Prev);
        let (oh, ow) = (w.out_h(), w.out_w());
        for b in 0..k.tile_b {
            for co in 0..k.tile_co {
                let sram = self.acc_base(tile.thread) + (b * k.tile_co + co) * k.tile_h * k.tile_w;
                let plane = (tile.b0 * k.tile_b + b) * w.co + tile.co0 * k.tile_co + co;
                let dram = (plane * oh + tile.i0 * k.tile_h) * ow + tile.j0 * k.tile_w;
                let m = mem(
                    MemOp::Store,
                    MemType::Out,
                    sram,
                    dram,
                    k.tile_h as u32,
                    k.tile_w as u32,
                    ow as u32,
                );
                self.b.emit(Insn::Mem(m), Some(Arg::Tensor(w.out_arg())));
            }
        }
        if tell {
            self.b.push(Module::Store, Dir::Prev);
        }
    }
}

/// The padding before and after, and the rows (or columns) read, of a window of `len`
/// starting at `start` over an axis of `size`.
fn window(start: isize, len: usize, size: usize) -> ([u32; 2], usize) {
    let before = (-start).max(0) as usize;
    let end = start + len as isize;
    let after = (end - size as isize).max(0) as usize;
    ([before as u32, after as u32], len - before - after)
}
