//! What each instruction does to the on-chip buffers and DRAM: the reference semantics
//! of TVM's functional simulator (zero padding on loads, int8 sign extension for
//! `ACC8`, truncating int8 stores, wrapping 32-bit GEMM and ALU arithmetic, immediates
//! sign-extended from 16 bits), with every index checked against its buffer's depth and
//! every element access checked for token-ordering hazards ([`crate::hazard`]).

use crate::config::{VtaConfig, UOP_BYTES};
use crate::dram::Dram;
use crate::error::VtaError;
use crate::hazard::{Stamp, Tracker};
use crate::isa::{AluInsn, AluOp, GemmInsn, Insn, Layout, MemInsn, MemOp, MemType, UopLoop};

/// The simulator's byte and operation counters, as TVM's simulator keeps them (padding
/// is not counted), plus the cycle model's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    pub inp_load_nbytes: u64,
    pub wgt_load_nbytes: u64,
    pub acc_load_nbytes: u64,
    pub uop_load_nbytes: u64,
    pub out_store_nbytes: u64,
    pub gemm_counter: u64,
    pub alu_counter: u64,
    /// GEMM and ALU steps that read the accumulator the step before wrote.
    pub acc_raw_steps: u64,
    /// Cycles from the first instruction's start to the last one's end.
    pub cycles: u64,
    /// Busy cycles of the load, compute and store modules.
    pub busy: [u64; 3],
    pub instructions: u64,
}

impl Counters {
    /// Counts what `insn` moves and computes (padding is not counted).
    pub fn count(&mut self, cfg: &VtaConfig, insn: &Insn) {
        match insn {
            Insn::Mem(m) => {
                let moved =
                    (m.x_size * m.y_size) as u64 * crate::builder::elem_bytes(cfg, m.mem) as u64;
                match (m.op, m.mem) {
                    (MemOp::Store, _) => self.out_store_nbytes += moved,
                    (_, MemType::Inp) => self.inp_load_nbytes += moved,
                    (_, MemType::Wgt) => self.wgt_load_nbytes += moved,
                    (_, MemType::Uop) => self.uop_load_nbytes += moved,
                    _ => self.acc_load_nbytes += moved,
                }
            }
            Insn::Gemm(g) => self.gemm_counter += g.lp.iterations(),
            Insn::Alu(a) => self.alu_counter += a.lp.iterations(),
            Insn::Finish(_) => {}
        }
        self.instructions += 1;
    }

    /// The counters by name, TVM's seven first (as its `simulator.stats()` prints them),
    /// then the cycle model's.
    pub fn named(&self) -> Vec<(String, u64)> {
        let pairs = [
            ("inp_load_nbytes", self.inp_load_nbytes),
            ("wgt_load_nbytes", self.wgt_load_nbytes),
            ("acc_load_nbytes", self.acc_load_nbytes),
            ("uop_load_nbytes", self.uop_load_nbytes),
            ("out_store_nbytes", self.out_store_nbytes),
            ("gemm_counter", self.gemm_counter),
            ("alu_counter", self.alu_counter),
            ("acc_raw_steps", self.acc_raw_steps),
            ("instructions", self.instructions),
            ("cycles", self.cycles),
            ("load_busy_cycles", self.busy[0]),
            ("compute_busy_cycles", self.busy[1]),
            ("store_busy_cycles", self.busy[2]),
        ];
        pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    /// Adds `o` (the cycles and busy times too).
    pub fn add(&mut self, o: &Counters) {
        self.inp_load_nbytes += o.inp_load_nbytes;
        self.wgt_load_nbytes += o.wgt_load_nbytes;
        self.acc_load_nbytes += o.acc_load_nbytes;
        self.uop_load_nbytes += o.uop_load_nbytes;
        self.out_store_nbytes += o.out_store_nbytes;
        self.gemm_counter += o.gemm_counter;
        self.alu_counter += o.alu_counter;
        self.acc_raw_steps += o.acc_raw_steps;
        self.cycles += o.cycles;
        for m in 0..3 {
            self.busy[m] += o.busy[m];
        }
        self.instructions += o.instructions;
    }
}

/// The on-chip buffers, one flat vector each (element `e` of a buffer whose elements are
/// `n` values wide is `[e·n, (e+1)·n)`), and their access histories.
#[derive(Debug)]
pub struct Sram {
    pub uop: Vec<u32>,
    pub inp: Vec<i8>,
    pub wgt: Vec<i8>,
    pub acc: Vec<i32>,
    inp_t: Tracker,
    wgt_t: Tracker,
    acc_t: Tracker,
}

impl Sram {
    pub fn new(cfg: &VtaConfig) -> Sram {
        Sram {
            uop: vec![0; cfg.uop_depth()],
            inp: vec![0; cfg.inp_depth() * cfg.inp_elem_bytes()],
            wgt: vec![0; cfg.wgt_depth() * cfg.wgt_elem_bytes()],
            acc: vec![0; cfg.acc_depth() * cfg.batch() * cfg.block()],
            inp_t: Tracker::new("INP", cfg.inp_depth()),
            wgt_t: Tracker::new("WGT", cfg.wgt_depth()),
            acc_t: Tracker::new("ACC", cfg.acc_depth()),
        }
    }

    /// Forgets the access histories (a new program starts with the buffers settled).
    pub fn settle(&mut self, cfg: &VtaConfig) {
        self.inp_t = Tracker::new("INP", cfg.inp_depth());
        self.wgt_t = Tracker::new("WGT", cfg.wgt_depth());
        self.acc_t = Tracker::new("ACC", cfg.acc_depth());
    }
}

/// Runs instructions on the buffers.
pub struct Exec<'a> {
    pub cfg: &'a VtaConfig,
    pub layout: &'a Layout,
    pub sram: &'a mut Sram,
    pub dram: &'a mut Dram,
}

/// Why the simulator refuses an instruction; [`Exec::run`] wraps it into
/// [`VtaError::Insn`] with the instruction's index and text.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("the output buffer cannot be loaded")]
    LoadOut,
    #[error("{mem} buffer overflow: {rows}×{cols} elements from {base} pass its depth {depth}")]
    Overflow {
        mem: MemType,
        rows: usize,
        cols: usize,
        base: u32,
        depth: usize,
    },
    #[error("only the output buffer is stored, not {0}")]
    StoreNotOut(MemType),
    #[error("a store has no padding")]
    StorePadded,
    #[error("micro-op {index} is past the micro-op buffer's depth {depth}")]
    UopPastDepth { index: u32, depth: usize },
    #[error(
        "index out of its buffer at step ({o}, {i}, uop {k}): dst {dst} of {dst_depth}, \
         src {src} of {src_depth}"
    )]
    StepIndex {
        o: u32,
        i: u32,
        k: u32,
        dst: usize,
        dst_depth: usize,
        src: usize,
        src_depth: usize,
    },
    #[error("weight index {index} is past the weight buffer's depth {depth}")]
    WgtPastDepth { index: usize, depth: usize },
    /// A DRAM access outside every allocation, or a token-ordering hazard.
    #[error(transparent)]
    Vta(#[from] VtaError),
}

fn bad(index: usize, insn: &Insn, reason: Refusal) -> VtaError {
    VtaError::Insn {
        index,
        insn: insn.to_string(),
        reason: reason.to_string(),
    }
}

impl Exec<'_> {
    /// Runs `insn`, the program's instruction `at.index`.
    pub fn run(&mut self, insn: &Insn, at: &Stamp) -> Result<(), VtaError> {
        let fail = |reason: Refusal| bad(at.index, insn, reason);
        match insn {
            Insn::Mem(m) if m.x_size == 0 => Ok(()),
            Insn::Mem(m) if m.op == MemOp::Load => self.load(m, at).map_err(fail),
            Insn::Mem(m) => self.store(m, at).map_err(fail),
            Insn::Gemm(g) => self.gemm(g, at).map_err(fail),
            Insn::Alu(a) => self.alu(a, at).map_err(fail),
            Insn::Finish(_) => Ok(()),
        }
    }

    /// Element bytes in DRAM and depth of a buffer.
    fn geometry(&self, mem: MemType) -> (usize, usize) {
        let c = self.cfg;
        match mem {
            MemType::Uop => (UOP_BYTES, c.uop_depth()),
            MemType::Inp => (c.inp_elem_bytes(), c.inp_depth()),
            MemType::Wgt => (c.wgt_elem_bytes(), c.wgt_depth()),
            MemType::Acc => (c.acc_elem_bytes(), c.acc_depth()),
            MemType::Acc8 | MemType::Out => (c.out_elem_bytes(), c.acc_depth()),
        }
    }

    fn load(&mut self, m: &MemInsn, at: &Stamp) -> Result<(), Refusal> {
        if m.mem == MemType::Out {
            return Err(Refusal::LoadOut);
        }
        let (elem, depth) = self.geometry(m.mem);
        let xtotal = (m.x_size + m.x_pad[0] + m.x_pad[1]) as usize;
        let ytotal = (m.y_size + m.y_pad[0] + m.y_pad[1]) as usize;
        let end = m.sram_base as usize + xtotal * ytotal;
        if end > depth {
            return Err(Refusal::Overflow {
                mem: m.mem,
                rows: ytotal,
                cols: xtotal,
                base: m.sram_base,
                depth,
            });
        }
        let mut e = m.sram_base as usize;
        for y in 0..ytotal {
            let row = y
                .checked_sub(m.y_pad[0] as usize)
                .filter(|r| *r < m.y_size as usize);
            for x in 0..xtotal {
                let col = x
                    .checked_sub(m.x_pad[0] as usize)
                    .filter(|c| *c < m.x_size as usize);
                let src = match (row, col) {
                    (Some(r), Some(c)) => {
                        let el = m.dram_base as u64 + (r * m.x_stride as usize + c) as u64;
                        Some(self.dram.read(el * elem as u64, elem)?)
                    }
                    _ => None,
                };
                let bytes: Vec<u8> = src.map_or_else(|| vec![0; elem], <[u8]>::to_vec);
                self.put(m.mem, e, &bytes, at)?;
                e += 1;
            }
        }
        Ok(())
    }

    /// Writes one element of `mem` at index `e` from its DRAM bytes.
    fn put(&mut self, mem: MemType, e: usize, b: &[u8], at: &Stamp) -> Result<(), Refusal> {
        let s = &mut *self.sram;
        let lanes = self.cfg.batch() * self.cfg.block();
        match mem {
            MemType::Uop => s.uop[e] = u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            MemType::Inp => {
                s.inp_t.write(e, at)?;
                let n = b.len();
                for (d, v) in s.inp[e * n..(e + 1) * n].iter_mut().zip(b) {
                    *d = *v as i8;
                }
            }
            MemType::Wgt => {
                s.wgt_t.write(e, at)?;
                let n = b.len();
                for (d, v) in s.wgt[e * n..(e + 1) * n].iter_mut().zip(b) {
                    *d = *v as i8;
                }
            }
            MemType::Acc => {
                s.acc_t.write(e, at)?;
                for (l, d) in s.acc[e * lanes..(e + 1) * lanes].iter_mut().enumerate() {
                    *d = i32::from_le_bytes([b[4 * l], b[4 * l + 1], b[4 * l + 2], b[4 * l + 3]]);
                }
            }
            MemType::Acc8 => {
                s.acc_t.write(e, at)?;
                for (d, v) in s.acc[e * lanes..(e + 1) * lanes].iter_mut().zip(b) {
                    *d = *v as i8 as i32;
                }
            }
            MemType::Out => unreachable!("refused by load"),
        }
        Ok(())
    }

    fn store(&mut self, m: &MemInsn, at: &Stamp) -> Result<(), Refusal> {
        if m.mem != MemType::Out {
            return Err(Refusal::StoreNotOut(m.mem));
        }
        if m.x_pad != [0, 0] || m.y_pad != [0, 0] {
            return Err(Refusal::StorePadded);
        }
        let (elem, depth) = self.geometry(MemType::Out);
        let n = (m.x_size * m.y_size) as usize;
        if m.sram_base as usize + n > depth {
            return Err(Refusal::Overflow {
                mem: MemType::Out,
                rows: m.y_size as usize,
                cols: m.x_size as usize,
                base: m.sram_base,
                depth,
            });
        }
        let lanes = self.cfg.batch() * self.cfg.block();
        let mut e = m.sram_base as usize;
        for y in 0..m.y_size as usize {
            let mut row = Vec::with_capacity(m.x_size as usize * elem);
            for _ in 0..m.x_size {
                self.sram.acc_t.read(e, at)?;
                row.extend(
                    self.sram.acc[e * lanes..(e + 1) * lanes]
                        .iter()
                        .map(|v| *v as u8),
                );
                e += 1;
            }
            let addr = (m.dram_base as u64 + (y * m.x_stride as usize) as u64) * elem as u64;
            self.dram.write(addr, &row)?;
        }
        Ok(())
    }

    /// The micro-op at `k`, checked.
    fn uop(&self, k: u32) -> Result<crate::isa::Uop, Refusal> {
        let word = self.sram.uop.get(k as usize).ok_or(Refusal::UopPastDepth {
            index: k,
            depth: self.cfg.uop_depth(),
        })?;
        Ok(self.layout.decode_uop(*word))
    }

    /// Calls `f(dst, src, wgt_index)` for every step of the loop, in order; the indices
    /// are checked against their buffers' depths.
    fn steps(
        &mut self,
        lp: &UopLoop,
        wgt_factor: [u32; 2],
        src_depth: usize,
        mut f: impl FnMut(&mut Self, usize, usize, usize) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        for o in 0..lp.iter_out {
            for i in 0..lp.iter_in {
                for k in lp.uop_bgn..lp.uop_end {
                    let u = self.uop(k)?;
                    let d = (u.dst + o * lp.dst_factor[0] + i * lp.dst_factor[1]) as usize;
                    let s = (u.src + o * lp.src_factor[0] + i * lp.src_factor[1]) as usize;
                    let w = (u.wgt + o * wgt_factor[0] + i * wgt_factor[1]) as usize;
                    if d >= self.cfg.acc_depth() || s >= src_depth {
                        return Err(Refusal::StepIndex {
                            o,
                            i,
                            k,
                            dst: d,
                            dst_depth: self.cfg.acc_depth(),
                            src: s,
                            src_depth,
                        });
                    }
                    f(self, d, s, w)?;
                }
            }
        }
        Ok(())
    }

    fn gemm(&mut self, g: &GemmInsn, at: &Stamp) -> Result<(), Refusal> {
        let (batch, block) = (self.cfg.batch(), self.cfg.block());
        let lanes = batch * block;
        let wdepth = self.cfg.wgt_depth();
        self.steps(&g.lp, g.wgt_factor, self.cfg.inp_depth(), |x, d, s, w| {
            let sram = &mut *x.sram;
            sram.acc_t.write(d, at)?;
            let acc = &mut sram.acc[d * lanes..(d + 1) * lanes];
            if g.lp.reset {
                acc.fill(0);
                return Ok(());
            }
            if w >= wdepth {
                return Err(Refusal::WgtPastDepth {
                    index: w,
                    depth: wdepth,
                });
            }
            sram.acc_t.read(d, at)?;
            sram.inp_t.read(s, at)?;
            sram.wgt_t.read(w, at)?;
            let inp = &sram.inp[s * lanes..(s + 1) * lanes];
            let wgt = &sram.wgt[w * block * block..(w + 1) * block * block];
            for b in 0..batch {
                let row = &inp[b * block..(b + 1) * block];
                for n in 0..block {
                    let col = &wgt[n * block..(n + 1) * block];
                    let dot = row
                        .iter()
                        .zip(col)
                        .fold(0i32, |a, (p, q)| a.wrapping_add(*p as i32 * *q as i32));
                    let slot = &mut acc[b * block + n];
                    *slot = slot.wrapping_add(dot);
                }
            }
            Ok(())
        })
    }

    fn alu(&mut self, a: &AluInsn, at: &Stamp) -> Result<(), Refusal> {
        let lanes = self.cfg.batch() * self.cfg.block();
        let op = a.op;
        self.steps(&a.lp, [0, 0], self.cfg.acc_depth(), |x, d, s, _| {
            let sram = &mut *x.sram;
            if a.lp.reset {
                sram.acc_t.write(d, at)?;
                sram.acc[d * lanes..(d + 1) * lanes].fill(0);
                return Ok(());
            }
            sram.acc_t.read(d, at)?;
            if a.imm.is_none() {
                sram.acc_t.read(s, at)?;
            }
            sram.acc_t.write(d, at)?;
            for l in 0..lanes {
                let rhs = a.imm.map_or(sram.acc[s * lanes + l], i32::from);
                let v = &mut sram.acc[d * lanes + l];
                *v = alu(op, *v, rhs);
            }
            Ok(())
        })
    }
}

/// One ALU lane: wrapping arithmetic; a shift by a negative amount shifts left, and a
/// shift by 32 or more gives what shifting one bit at a time would.
pub fn alu(op: AluOp, x: i32, y: i32) -> i32 {
    match op {
        AluOp::Min => x.min(y),
        AluOp::Max => x.max(y),
        AluOp::Add => x.wrapping_add(y),
        AluOp::Mul => x.wrapping_mul(y),
        AluOp::Shr if y >= 0 => x >> y.min(31),
        AluOp::Shr => x.checked_shl(y.unsigned_abs()).unwrap_or(0),
    }
}
