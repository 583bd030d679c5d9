//! Building an instruction stream: instructions are emitted in fetch order, and the
//! dependency tokens between modules are asked for by module and direction — a pop is
//! attached to the module's next instruction, a push to its last one — with a no-op of
//! that module (a zero-size LOAD or STORE) emitted where the flag is already taken, as
//! TVM's runtime does. DRAM addresses are relative to the kernel's arguments and
//! relocated when the stream is launched ([`Program::relocate`]).

use crate::config::VtaConfig;
use crate::dram::Dram;
use crate::error::VtaError;
use crate::exec::Counters;
use crate::isa::{Deps, Insn, Layout, MemInsn, MemOp, MemType, Module, Uop};
use crate::sim::Simulator;
use serde::{Deserialize, Serialize};

/// Which argument of the kernel a DRAM address points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Arg {
    /// The kernel's `i`-th tensor argument.
    Tensor(usize),
    /// The micro-op kernels, which travel with the program.
    Uops,
}

/// A direction a token travels in: to the module before or after in the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Prev,
    Next,
}

/// An instruction stream and what it needs to run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// The instructions, in their 128-bit encoding.
    pub words: Vec<u128>,
    /// For each instruction with a DRAM address, what the address is relative to.
    pub relocs: Vec<Option<Arg>>,
    /// The micro-op kernels, encoded.
    pub uops: Vec<u32>,
}

impl Program {
    /// The instructions with their DRAM addresses made absolute: `base(arg)` is the
    /// physical address of an argument, a multiple of every element size.
    pub fn relocate(
        &self,
        layout: &Layout,
        cfg: &VtaConfig,
        base: impl Fn(Arg) -> Result<u64, VtaError>,
    ) -> Result<Vec<Insn>, VtaError> {
        let mut out = Vec::with_capacity(self.words.len());
        for (w, r) in self.words.iter().zip(&self.relocs) {
            let mut insn = layout.decode(*w)?;
            if let (Insn::Mem(m), Some(arg)) = (&mut insn, r) {
                let elem = elem_bytes(cfg, m.mem) as u64;
                let at = base(*arg)? / elem + m.dram_base as u64;
                m.dram_base = u32::try_from(at).map_err(|_| VtaError::Encode {
                    field: "dram_base",
                    value: at,
                    bits: 32,
                })?;
            }
            out.push(insn);
        }
        Ok(out)
    }
}

impl Program {
    /// How many tensor arguments the program takes (one past the highest it reads).
    pub fn tensor_args(&self) -> usize {
        self.relocs
            .iter()
            .filter_map(|r| match r {
                Some(Arg::Tensor(i)) => Some(i + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Runs the program on `sim` with its tensor arguments at the physical addresses
    /// `tensors` (the micro-ops are copied into DRAM for the run).
    pub fn run(
        &self,
        sim: &mut Simulator,
        dram: &mut Dram,
        tensors: &[u64],
    ) -> Result<Counters, VtaError> {
        let takes = self.tensor_args();
        if tensors.len() != takes {
            return Err(VtaError::Launch(format!(
                "the program takes {takes} tensor arguments, {} given",
                tensors.len()
            )));
        }
        let bytes: Vec<u8> = self.uops.iter().flat_map(|u| u.to_le_bytes()).collect();
        let at = dram.alloc(bytes.len())?;
        dram.write(at, &bytes)?;
        let insns = self.relocate(sim.layout(), sim.config(), |a| match a {
            Arg::Uops => Ok(at),
            Arg::Tensor(i) => tensors.get(i).copied().ok_or_else(|| {
                VtaError::Launch(format!(
                    "the program reads tensor argument {i}, {} given",
                    tensors.len()
                ))
            }),
        });
        let result = insns.and_then(|insns| sim.run(dram, &insns));
        dram.free(at);
        result
    }
}

/// Bytes of one element of `mem` in DRAM.
pub fn elem_bytes(cfg: &VtaConfig, mem: MemType) -> usize {
    match mem {
        MemType::Uop => crate::config::UOP_BYTES,
        MemType::Inp => cfg.inp_elem_bytes(),
        MemType::Wgt => cfg.wgt_elem_bytes(),
        MemType::Acc => cfg.acc_elem_bytes(),
        MemType::Acc8 | MemType::Out => cfg.out_elem_bytes(),
    }
}

/// Builds a [`Program`].
pub struct Builder {
    layout: Layout,
    insns: Vec<Insn>,
    relocs: Vec<Option<Arg>>,
    uops: Vec<Uop>,
    /// Pops waiting for each module's next instruction.
    pending: [Deps; 3],
    /// Each module's last instruction.
    last: [Option<usize>; 3],
}

impl Builder {
    pub fn new(layout: Layout) -> Builder {
        Builder {
            layout,
            insns: Vec::new(),
            relocs: Vec::new(),
            uops: Vec::new(),
            pending: [Deps::default(); 3],
            last: [None; 3],
        }
    }

    /// Adds a micro-op kernel; returns its `[begin, end)` in the micro-op buffer.
    pub fn kernel(&mut self, uops: &[Uop]) -> (u32, u32) {
        let bgn = self.uops.len() as u32;
        self.uops.extend_from_slice(uops);
        (bgn, self.uops.len() as u32)
    }

    /// Micro-ops so far.
    pub fn uop_count(&self) -> usize {
        self.uops.len()
    }

    /// Emits `insn` (whose DRAM address, if any, is relative to `reloc`), with the pops
    /// pending for its module.
    pub fn emit(&mut self, mut insn: Insn, reloc: Option<Arg>) {
        let m = insn.module() as usize;
        let p = self.pending[m];
        set_deps(&mut insn, |d| {
            d.pop_prev |= p.pop_prev;
            d.pop_next |= p.pop_next;
        });
        self.pending[m] = Deps::default();
        self.last[m] = Some(self.insns.len());
        self.insns.push(insn);
        self.relocs.push(reloc);
    }

    /// The next instruction of `module` pops a token coming from `dir` (a second pop
    /// of one queue before that instruction goes on a no-op carrying the first).
    pub fn pop(&mut self, module: Module, dir: Dir) {
        let m = module as usize;
        let already = match dir {
            Dir::Prev => self.pending[m].pop_prev,
            Dir::Next => self.pending[m].pop_next,
        };
        if already {
            self.emit(nop(module), None);
        }
        match dir {
            Dir::Prev => self.pending[m].pop_prev = true,
            Dir::Next => self.pending[m].pop_next = true,
        }
    }

    /// The last instruction of `module` pushes a token towards `dir`.
    pub fn push(&mut self, module: Module, dir: Dir) {
        let flag = |d: &Deps| match dir {
            Dir::Prev => d.push_prev,
            Dir::Next => d.push_next,
        };
        let m = module as usize;
        let free = self.last[m].filter(|&i| !flag(&self.insns[i].deps()));
        let at = match free {
            Some(i) => i,
            None => {
                self.emit(nop(module), None);
                self.insns.len() - 1
            }
        };
        set_deps(&mut self.insns[at], |d| match dir {
            Dir::Prev => d.push_prev = true,
            Dir::Next => d.push_next = true,
        });
    }

    /// The program, encoded.
    pub fn finish(self) -> Result<Program, VtaError> {
        let words = self
            .insns
            .iter()
            .map(|i| self.layout.encode(i))
            .collect::<Result<Vec<_>, _>>()?;
        let uops = self
            .uops
            .iter()
            .map(|u| self.layout.encode_uop(u))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Program {
            words,
            relocs: self.relocs,
            uops,
        })
    }
}

fn set_deps(insn: &mut Insn, f: impl FnOnce(&mut Deps)) {
    match insn {
        Insn::Mem(m) => f(&mut m.deps),
        Insn::Gemm(g) => f(&mut g.deps),
        Insn::Alu(a) => f(&mut a.deps),
        Insn::Finish(d) => f(d),
    }
}

/// A zero-size transfer on `module`: it moves nothing and carries tokens.
pub fn nop(module: Module) -> Insn {
    let (op, mem) = match module {
        Module::Load => (MemOp::Load, MemType::Inp),
        Module::Compute => (MemOp::Load, MemType::Uop),
        Module::Store => (MemOp::Store, MemType::Out),
    };
    Insn::Mem(MemInsn {
        op,
        deps: Deps::default(),
        mem,
        sram_base: 0,
        dram_base: 0,
        y_size: 0,
        x_size: 0,
        x_stride: 0,
        y_pad: [0, 0],
        x_pad: [0, 0],
    })
}
