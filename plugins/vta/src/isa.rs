//! VTA's instruction set: LOAD, STORE, GEMM, ALU and FINISH as 128-bit words, and the
//! 32-bit micro-ops that GEMM and ALU loop over. The field layout follows TVM's
//! `hw_spec.h`, with the index widths taken from the configuration (for the default:
//! 13-bit micro-op indices, 11-bit input and accumulator indices, 10-bit weight
//! indices); no field crosses the 64-bit word boundary. Encoding refuses a value that
//! does not fit its field, naming the field; decoding refuses an unknown opcode.

use crate::config::{VtaConfig, LOOP_ITER_WIDTH};
use crate::error::Unsupported;
use crate::error::VtaError;
use std::fmt;

/// The dependency flags every instruction carries: pop a token from the previous or
/// next module before running, push one to it after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Deps {
    pub pop_prev: bool,
    pub pop_next: bool,
    pub push_prev: bool,
    pub push_next: bool,
}

/// Which buffer a LOAD or STORE moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemType {
    Uop = 0,
    Wgt = 1,
    Inp = 2,
    Acc = 3,
    Out = 4,
    /// int8 in DRAM, sign-extended into the accumulators.
    Acc8 = 5,
}

/// LOAD or STORE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemOp {
    Load,
    Store,
}

/// A 2-D DMA between DRAM and a buffer; addresses and sizes count elements of the
/// buffer, not bytes. A zero `x_size` moves nothing and only carries tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemInsn {
    pub op: MemOp,
    pub deps: Deps,
    pub mem: MemType,
    pub sram_base: u32,
    pub dram_base: u32,
    pub y_size: u32,
    pub x_size: u32,
    pub x_stride: u32,
    /// Rows of zeros before and after.
    pub y_pad: [u32; 2],
    /// Columns of zeros before and after.
    pub x_pad: [u32; 2],
}

/// The loop nest GEMM and ALU share: for `o < iter_out`, `i < iter_in`, each micro-op
/// of `[uop_bgn, uop_end)`, every index is the micro-op's plus `o·factor[0] + i·factor[1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UopLoop {
    pub reset: bool,
    pub uop_bgn: u32,
    pub uop_end: u32,
    pub iter_out: u32,
    pub iter_in: u32,
    pub dst_factor: [u32; 2],
    pub src_factor: [u32; 2],
}

impl UopLoop {
    /// Micro-op executions: `iter_out · iter_in · (uop_end − uop_bgn)`.
    pub fn iterations(&self) -> u64 {
        self.iter_out as u64
            * self.iter_in as u64
            * self.uop_end.saturating_sub(self.uop_bgn) as u64
    }
}

/// `acc[d] += inp[s] · wgt[w]ᵀ` over the loop (or `acc[d] = 0` with `reset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmInsn {
    pub deps: Deps,
    pub lp: UopLoop,
    pub wgt_factor: [u32; 2],
}

/// The ALU's operations on 32-bit lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Min = 0,
    Max = 1,
    Add = 2,
    /// Arithmetic shift right; a negative amount shifts left.
    Shr = 3,
    /// Not in the hardware, only in TVM's simulator.
    Mul = 4,
}

/// `acc[d] = op(acc[d], imm or acc[s])` over the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AluInsn {
    pub deps: Deps,
    pub lp: UopLoop,
    pub op: AluOp,
    /// The immediate operand (16-bit, sign-extended), or `None` for `acc[s]`.
    pub imm: Option<i16>,
}

/// One instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    Mem(MemInsn),
    Gemm(GemmInsn),
    Alu(AluInsn),
    Finish(Deps),
}

/// The three modules of the pipeline; an instruction runs on one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Module {
    Load = 0,
    Compute = 1,
    Store = 2,
}

impl Module {
    pub fn name(self) -> &'static str {
        match self {
            Module::Load => "load",
            Module::Compute => "compute",
            Module::Store => "store",
        }
    }
}

impl Insn {
    pub fn deps(&self) -> Deps {
        match self {
            Insn::Mem(m) => m.deps,
            Insn::Gemm(g) => g.deps,
            Insn::Alu(a) => a.deps,
            Insn::Finish(d) => *d,
        }
    }

    /// The module that runs it: input and weight loads on the load module, stores on the
    /// store module, the rest (micro-op and accumulator loads too) on compute.
    pub fn module(&self) -> Module {
        match self {
            Insn::Mem(m) if m.op == MemOp::Store => Module::Store,
            Insn::Mem(m) if matches!(m.mem, MemType::Inp | MemType::Wgt) => Module::Load,
            _ => Module::Compute,
        }
    }
}

/// A micro-op: the accumulator, input and weight indices of one step (an ALU micro-op
/// uses the input index for its second accumulator operand).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Uop {
    pub dst: u32,
    pub src: u32,
    pub wgt: u32,
}

/// Where each variable-width field sits, from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    uop_idx: u32,
    acc_idx: u32,
    inp_idx: u32,
    wgt_idx: u32,
}

const OPCODE_LOAD: u64 = 0;
const OPCODE_STORE: u64 = 1;
const OPCODE_GEMM: u64 = 2;
const OPCODE_FINISH: u64 = 3;
const OPCODE_ALU: u64 = 4;

/// Writes fields into a 128-bit instruction, checking that each value fits.
struct Writer {
    word: u128,
}

impl Writer {
    fn put(
        &mut self,
        field: &'static str,
        lo: u32,
        width: u32,
        value: u64,
    ) -> Result<(), VtaError> {
        if width < 64 && value >> width != 0 {
            return Err(VtaError::Encode {
                field,
                value,
                bits: width,
            });
        }
        self.word |= (value as u128) << lo;
        Ok(())
    }
    fn flag(&mut self, field: &'static str, lo: u32, v: bool) -> Result<(), VtaError> {
        self.put(field, lo, 1, v as u64)
    }
}

fn get(word: u128, lo: u32, width: u32) -> u32 {
    ((word >> lo) & ((1u128 << width) - 1)) as u32
}

impl Layout {
    /// The layout of `cfg`; an error when a word would overflow.
    pub fn of(cfg: &VtaConfig) -> Result<Layout, Unsupported> {
        let l = Layout {
            uop_idx: cfg.log_uop_depth(),
            acc_idx: cfg.log_acc_depth(),
            inp_idx: cfg.log_inp_depth(),
            wgt_idx: cfg.log_wgt_depth(),
        };
        let word0 = 8 + l.uop_idx + (l.uop_idx + 1) + 2 * LOOP_ITER_WIDTH;
        let gemm1 = 2 * (l.acc_idx + l.inp_idx + l.wgt_idx);
        let alu1 = 2 * (l.acc_idx + l.inp_idx) + 3 + 1 + 16;
        let uop = l.acc_idx + l.inp_idx + l.wgt_idx;
        if word0 > 64 || gemm1 > 64 || alu1 > 64 || uop > 32 {
            return Err(Unsupported(format!(
                "the buffer depths give instruction fields of {word0}/{gemm1}/{alu1} bits for \
                 64-bit words and micro-ops of {uop} bits for 32: the buffers are too deep"
            )));
        }
        Ok(l)
    }

    /// The 128-bit encoding of `insn`.
    pub fn encode(&self, insn: &Insn) -> Result<u128, VtaError> {
        let mut w = Writer { word: 0 };
        let deps = insn.deps();
        let opcode = match insn {
            Insn::Mem(m) if m.op == MemOp::Load => OPCODE_LOAD,
            Insn::Mem(_) => OPCODE_STORE,
            Insn::Gemm(_) => OPCODE_GEMM,
            Insn::Finish(_) => OPCODE_FINISH,
            Insn::Alu(_) => OPCODE_ALU,
        };
        w.put("opcode", 0, 3, opcode)?;
        w.flag("pop_prev", 3, deps.pop_prev)?;
        w.flag("pop_next", 4, deps.pop_next)?;
        w.flag("push_prev", 5, deps.push_prev)?;
        w.flag("push_next", 6, deps.push_next)?;
        match insn {
            Insn::Mem(m) => Self::encode_mem(&mut w, m)?,
            Insn::Gemm(g) => {
                let next = self.encode_loop(&mut w, &g.lp)?;
                w.put("wgt_factor_out", next, self.wgt_idx, g.wgt_factor[0] as u64)?;
                w.put(
                    "wgt_factor_in",
                    next + self.wgt_idx,
                    self.wgt_idx,
                    g.wgt_factor[1] as u64,
                )?;
            }
            Insn::Alu(a) => {
                let next = self.encode_loop(&mut w, &a.lp)?;
                w.put("alu_opcode", next, 3, a.op as u64)?;
                w.flag("use_imm", next + 3, a.imm.is_some())?;
                w.put("imm", next + 4, 16, a.imm.unwrap_or(0) as u16 as u64)?;
            }
            Insn::Finish(_) => {}
        }
        Ok(w.word)
    }

    fn encode_mem(w: &mut Writer, m: &MemInsn) -> Result<(), VtaError> {
        w.put("memory_type", 7, 3, m.mem as u64)?;
        w.put("sram_base", 10, 16, m.sram_base as u64)?;
        w.put("dram_base", 26, 32, m.dram_base as u64)?;
        w.put("y_size", 64, 16, m.y_size as u64)?;
        w.put("x_size", 80, 16, m.x_size as u64)?;
        w.put("x_stride", 96, 16, m.x_stride as u64)?;
        w.put("y_pad_0", 112, 4, m.y_pad[0] as u64)?;
        w.put("y_pad_1", 116, 4, m.y_pad[1] as u64)?;
        w.put("x_pad_0", 120, 4, m.x_pad[0] as u64)?;
        w.put("x_pad_1", 124, 4, m.x_pad[1] as u64)
    }

    /// The fields GEMM and ALU share; returns the bit where the next field starts.
    fn encode_loop(&self, w: &mut Writer, lp: &UopLoop) -> Result<u32, VtaError> {
        let u = self.uop_idx;
        w.flag("reset_reg", 7, lp.reset)?;
        w.put("uop_bgn", 8, u, lp.uop_bgn as u64)?;
        w.put("uop_end", 8 + u, u + 1, lp.uop_end as u64)?;
        let it = 8 + u + u + 1;
        w.put("iter_out", it, LOOP_ITER_WIDTH, lp.iter_out as u64)?;
        w.put(
            "iter_in",
            it + LOOP_ITER_WIDTH,
            LOOP_ITER_WIDTH,
            lp.iter_in as u64,
        )?;
        let (a, i) = (self.acc_idx, self.inp_idx);
        w.put("dst_factor_out", 64, a, lp.dst_factor[0] as u64)?;
        w.put("dst_factor_in", 64 + a, a, lp.dst_factor[1] as u64)?;
        w.put("src_factor_out", 64 + 2 * a, i, lp.src_factor[0] as u64)?;
        w.put("src_factor_in", 64 + 2 * a + i, i, lp.src_factor[1] as u64)?;
        Ok(64 + 2 * a + 2 * i)
    }

    /// The instruction a 128-bit word encodes.
    pub fn decode(&self, word: u128) -> Result<Insn, VtaError> {
        let deps = Deps {
            pop_prev: get(word, 3, 1) == 1,
            pop_next: get(word, 4, 1) == 1,
            push_prev: get(word, 5, 1) == 1,
            push_next: get(word, 6, 1) == 1,
        };
        match get(word, 0, 3) as u64 {
            op @ (OPCODE_LOAD | OPCODE_STORE) => Ok(Insn::Mem(MemInsn {
                op: if op == OPCODE_LOAD {
                    MemOp::Load
                } else {
                    MemOp::Store
                },
                deps,
                mem: match get(word, 7, 3) {
                    0 => MemType::Uop,
                    1 => MemType::Wgt,
                    2 => MemType::Inp,
                    3 => MemType::Acc,
                    4 => MemType::Out,
                    5 => MemType::Acc8,
                    t => return Err(VtaError::Decode(format!("memory type {t}"))),
                },
                sram_base: get(word, 10, 16),
                dram_base: get(word, 26, 32),
                y_size: get(word, 64, 16),
                x_size: get(word, 80, 16),
                x_stride: get(word, 96, 16),
                y_pad: [get(word, 112, 4), get(word, 116, 4)],
                x_pad: [get(word, 120, 4), get(word, 124, 4)],
            })),
            OPCODE_GEMM => {
                let (lp, next) = self.decode_loop(word);
                Ok(Insn::Gemm(GemmInsn {
                    deps,
                    lp,
                    wgt_factor: [
                        get(word, next, self.wgt_idx),
                        get(word, next + self.wgt_idx, self.wgt_idx),
                    ],
                }))
            }
            OPCODE_ALU => {
                let (lp, next) = self.decode_loop(word);
                let op = match get(word, next, 3) {
                    0 => AluOp::Min,
                    1 => AluOp::Max,
                    2 => AluOp::Add,
                    3 => AluOp::Shr,
                    4 => AluOp::Mul,
                    o => return Err(VtaError::Decode(format!("ALU opcode {o}"))),
                };
                let imm =
                    (get(word, next + 3, 1) == 1).then(|| get(word, next + 4, 16) as u16 as i16);
                Ok(Insn::Alu(AluInsn { deps, lp, op, imm }))
            }
            OPCODE_FINISH => Ok(Insn::Finish(deps)),
            op => Err(VtaError::Decode(format!("opcode {op}"))),
        }
    }

    fn decode_loop(&self, word: u128) -> (UopLoop, u32) {
        let u = self.uop_idx;
        let it = 8 + u + u + 1;
        let (a, i) = (self.acc_idx, self.inp_idx);
        let lp = UopLoop {
            reset: get(word, 7, 1) == 1,
            uop_bgn: get(word, 8, u),
            uop_end: get(word, 8 + u, u + 1),
            iter_out: get(word, it, LOOP_ITER_WIDTH),
            iter_in: get(word, it + LOOP_ITER_WIDTH, LOOP_ITER_WIDTH),
            dst_factor: [get(word, 64, a), get(word, 64 + a, a)],
            src_factor: [get(word, 64 + 2 * a, i), get(word, 64 + 2 * a + i, i)],
        };
        (lp, 64 + 2 * a + 2 * i)
    }

    /// The 32-bit encoding of a micro-op: dst, then src, then wgt, from bit 0.
    pub fn encode_uop(&self, u: &Uop) -> Result<u32, VtaError> {
        let mut w = Writer { word: 0 };
        w.put("uop dst_idx", 0, self.acc_idx, u.dst as u64)?;
        w.put("uop src_idx", self.acc_idx, self.inp_idx, u.src as u64)?;
        w.put(
            "uop wgt_idx",
            self.acc_idx + self.inp_idx,
            self.wgt_idx,
            u.wgt as u64,
        )?;
        Ok(w.word as u32)
    }

    pub fn decode_uop(&self, word: u32) -> Uop {
        let w = word as u128;
        Uop {
            dst: get(w, 0, self.acc_idx),
            src: get(w, self.acc_idx, self.inp_idx),
            wgt: get(w, self.acc_idx + self.inp_idx, self.wgt_idx),
        }
    }
}

impl fmt::Display for Deps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = [
            (self.pop_prev, "pop_prev"),
            (self.pop_next, "pop_next"),
            (self.push_prev, "push_prev"),
            (self.push_next, "push_next"),
        ];
        let on: Vec<&str> = flags.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
        write!(f, "[{}]", on.join(" "))
    }
}

impl fmt::Display for MemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemType::Uop => "UOP",
            MemType::Wgt => "WGT",
            MemType::Inp => "INP",
            MemType::Acc => "ACC",
            MemType::Out => "OUT",
            MemType::Acc8 => "ACC8",
        })
    }
}

impl fmt::Display for UopLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "uop [{}, {}) out {} in {} dst {}/{} src {}/{}",
            self.uop_bgn,
            self.uop_end,
            self.iter_out,
            self.iter_in,
            self.dst_factor[0],
            self.dst_factor[1],
            self.src_factor[0],
            self.src_factor[1]
        )
    }
}

/// One line per instruction, as the decoded stream is printed and snapshotted.
impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Insn::Mem(m) => {
                let op = if m.op == MemOp::Load {
                    "LOAD "
                } else {
                    "STORE"
                };
                write!(
                    f,
                    "{op} {:<4} sram {} dram {} y {} x {} stride {} pad y {}/{} x {}/{} {}",
                    m.mem.to_string(),
                    m.sram_base,
                    m.dram_base,
                    m.y_size,
                    m.x_size,
                    m.x_stride,
                    m.y_pad[0],
                    m.y_pad[1],
                    m.x_pad[0],
                    m.x_pad[1],
                    m.deps
                )
            }
            Insn::Gemm(g) => write!(
                f,
                "GEMM{} {} wgt {}/{} {}",
                if g.lp.reset { " reset" } else { "" },
                g.lp,
                g.wgt_factor[0],
                g.wgt_factor[1],
                g.deps
            ),
            Insn::Alu(a) => {
                let op = format!("{:?}", a.op).to_uppercase();
                let rhs = a.imm.map_or("acc".to_string(), |i| format!("imm {i}"));
                let reset = if a.lp.reset { " reset" } else { "" };
                write!(f, "ALU {op}{reset} {} {rhs} {}", a.lp, a.deps)
            }
            Insn::Finish(d) => write!(f, "FINISH {d}"),
        }
    }
}
