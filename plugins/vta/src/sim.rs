//! The simulator: the fetch unit hands each instruction to its module (load, compute,
//! store; [`Insn::module`]), each module runs its own stream in order, and the four token
//! queues between neighbours (load→compute, compute→load, compute→store, store→compute)
//! order them. The run is deterministic: the next instruction is always the one that can
//! start earliest (ties: load, compute, store), a module whose head waits on a token
//! nobody will push is a deadlock error naming every waiting head, and element accesses
//! not ordered by tokens are hazard errors ([`crate::hazard`]).
//!
//! The cycle model (`../shared/reference/vta.md` §3, §6): an instruction starts when its
//! module is free and the tokens it pops have been pushed, and pushes at its end; DMA
//! costs 150 cycles plus one per 8 bytes of the 64-bit bus (and one per padding element
//! written), GEMM 80 plus one per micro-op step, ALU 46 plus two per step (one with an
//! immediate), a no-op or FINISH 40. Cycles at the board's clock are the measured time.

use crate::config::VtaConfig;
use crate::dram::Dram;
use crate::error::VtaError;
use crate::exec::{Counters, Exec, Sram};
use crate::hazard::Stamp;
use crate::isa::{Insn, Layout, MemOp, MemType, Module};
use std::collections::VecDeque;

/// A token in a queue: when it was pushed and what its pusher knew.
#[derive(Clone, Copy, Debug)]
struct Token {
    ready: u64,
    clock: [u32; 3],
}

/// The queues, indexed by [`Queue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    LoadToCompute = 0,
    ComputeToLoad = 1,
    ComputeToStore = 2,
    StoreToCompute = 3,
}

impl Queue {
    fn name(self) -> &'static str {
        match self {
            Queue::LoadToCompute => "load→compute",
            Queue::ComputeToLoad => "compute→load",
            Queue::ComputeToStore => "compute→store",
            Queue::StoreToCompute => "store→compute",
        }
    }
}

/// The queues an instruction of `module` pops from (prev, next) and pushes to.
fn queues(module: Module) -> ([Option<Queue>; 2], [Option<Queue>; 2]) {
    use Queue::*;
    match module {
        Module::Load => ([None, Some(ComputeToLoad)], [None, Some(LoadToCompute)]),
        Module::Compute => (
            [Some(LoadToCompute), Some(StoreToCompute)],
            [Some(ComputeToLoad), Some(ComputeToStore)],
        ),
        Module::Store => ([Some(ComputeToStore), None], [Some(StoreToCompute), None]),
    }
}

/// The cycles an instruction takes.
pub fn cycles(cfg: &VtaConfig, insn: &Insn) -> u64 {
    const DMA: u64 = 150;
    match insn {
        Insn::Mem(m) if m.x_size == 0 => 40,
        Insn::Mem(m) => {
            let elem = match m.mem {
                MemType::Uop => crate::config::UOP_BYTES,
                MemType::Inp => cfg.inp_elem_bytes(),
                MemType::Wgt => cfg.wgt_elem_bytes(),
                MemType::Acc => cfg.acc_elem_bytes(),
                MemType::Acc8 | MemType::Out => cfg.out_elem_bytes(),
            } as u64;
            let n = (m.x_size * m.y_size) as u64;
            let total = ((m.x_size + m.x_pad[0] + m.x_pad[1])
                * (m.y_size + m.y_pad[0] + m.y_pad[1])) as u64;
            let pad = if m.op == MemOp::Load { total - n } else { 0 };
            DMA + (n * elem).div_ceil(8) + pad
        }
        Insn::Gemm(g) => 80 + g.lp.iterations(),
        Insn::Alu(a) if a.imm.is_some() => 46 + a.lp.iterations(),
        Insn::Alu(a) => 46 + 2 * a.lp.iterations(),
        Insn::Finish(_) => 40,
    }
}

/// A simulated VTA: its configuration, buffers and counters (summed over every run).
#[derive(Debug)]
pub struct Simulator {
    cfg: VtaConfig,
    layout: Layout,
    sram: Sram,
    total: Counters,
}

/// Where a module stands in a run.
#[derive(Clone, Debug, Default)]
struct ModuleState {
    /// Program indices of its instructions, in order.
    stream: VecDeque<usize>,
    free_at: u64,
    seq: u32,
    clock: [u32; 3],
}

impl Simulator {
    pub fn new(cfg: VtaConfig) -> Result<Simulator, VtaError> {
        cfg.check().map_err(|reason| VtaError::Config {
            path: "(given)".into(),
            reason,
        })?;
        let layout = Layout::of(&cfg).expect("checked");
        Ok(Simulator {
            sram: Sram::new(&cfg),
            layout,
            cfg,
            total: Counters::default(),
        })
    }

    pub fn config(&self) -> &VtaConfig {
        &self.cfg
    }
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The counters summed over every run so far.
    pub fn total(&self) -> &Counters {
        &self.total
    }
    /// The buffers, for tests that look inside.
    pub fn sram(&self) -> &Sram {
        &self.sram
    }

    /// Decodes 128-bit instruction words and runs them.
    pub fn run_words(&mut self, dram: &mut Dram, words: &[u128]) -> Result<Counters, VtaError> {
        let program = words
            .iter()
            .map(|w| self.layout.decode(*w))
            .collect::<Result<Vec<_>, _>>()?;
        self.run(dram, &program)
    }

    /// Runs a program to its end; returns this run's counters.
    pub fn run(&mut self, dram: &mut Dram, program: &[Insn]) -> Result<Counters, VtaError> {
        let mut modules: [ModuleState; 3] = Default::default();
        for (i, insn) in program.iter().enumerate() {
            check_deps(i, insn)?;
            modules[insn.module() as usize].stream.push_back(i);
        }
        self.sram.settle(&self.cfg);
        let mut tokens: [VecDeque<Token>; 4] = Default::default();
        let mut counters = Counters::default();
        let mut end = 0u64;
        while let Some((m, start)) = next_module(program, &modules, &tokens) {
            let index = modules[m].stream.pop_front().expect("has a head");
            let insn = &program[index];
            let st = &mut modules[m];
            let (pops, pushes) = queues(insn.module());
            let d = insn.deps();
            for (q, on) in pops.iter().zip([d.pop_prev, d.pop_next]) {
                if let (Some(q), true) = (q, on) {
                    let t = tokens[*q as usize].pop_front().expect("checked ready");
                    for k in 0..3 {
                        st.clock[k] = st.clock[k].max(t.clock[k]);
                    }
                }
            }
            st.seq += 1;
            st.clock[m] = st.seq;
            let stamp = Stamp {
                module: insn.module(),
                seq: st.seq,
                index,
                clock: st.clock,
            };
            let took = cycles(&self.cfg, insn);
            st.free_at = start + took;
            counters.busy[m] += took;
            end = end.max(start + took);
            for (q, on) in pushes.iter().zip([d.push_prev, d.push_next]) {
                if let (Some(q), true) = (q, on) {
                    tokens[*q as usize].push_back(Token {
                        ready: start + took,
                        clock: stamp.clock,
                    });
                }
            }
            let mut exec = Exec {
                cfg: &self.cfg,
                layout: &self.layout,
                sram: &mut self.sram,
                dram,
                counters: &mut counters,
            };
            exec.run(insn, &stamp)?;
            counters.instructions += 1;
        }
        if modules.iter().any(|m| !m.stream.is_empty()) {
            return Err(deadlock(program, &modules, &tokens));
        }
        counters.cycles = end;
        self.total.add(&counters);
        Ok(counters)
    }
}

/// A flag naming a queue the instruction's module does not have is an error.
fn check_deps(index: usize, insn: &Insn) -> Result<(), VtaError> {
    let (pops, pushes) = queues(insn.module());
    let d = insn.deps();
    let flags = [
        (pops[0], d.pop_prev, "pop_prev"),
        (pops[1], d.pop_next, "pop_next"),
        (pushes[0], d.push_prev, "push_prev"),
        (pushes[1], d.push_next, "push_next"),
    ];
    for (q, on, name) in flags {
        if on && q.is_none() {
            return Err(VtaError::Insn {
                index,
                insn: insn.to_string(),
                reason: format!("the {} module has no `{name}` queue", insn.module().name()),
            });
        }
    }
    Ok(())
}

/// When the head of a module could start, if its tokens are there.
fn ready_at(insn: &Insn, st: &ModuleState, tokens: &[VecDeque<Token>; 4]) -> Option<u64> {
    let (pops, _) = queues(insn.module());
    let d = insn.deps();
    let mut at = st.free_at;
    for (q, on) in pops.iter().zip([d.pop_prev, d.pop_next]) {
        if let (Some(q), true) = (q, on) {
            at = at.max(tokens[*q as usize].front()?.ready);
        }
    }
    Some(at)
}

/// The module whose head starts first, and when.
fn next_module(
    program: &[Insn],
    modules: &[ModuleState; 3],
    tokens: &[VecDeque<Token>; 4],
) -> Option<(usize, u64)> {
    (0..3)
        .filter_map(|m| {
            let head = *modules[m].stream.front()?;
            ready_at(&program[head], &modules[m], tokens).map(|t| (m, t))
        })
        .min_by_key(|&(m, t)| (t, m))
}

fn deadlock(
    program: &[Insn],
    modules: &[ModuleState; 3],
    tokens: &[VecDeque<Token>; 4],
) -> VtaError {
    let mut waits = Vec::new();
    for (m, st) in modules.iter().enumerate() {
        let Some(&head) = st.stream.front() else {
            continue;
        };
        let insn = &program[head];
        let (pops, _) = queues(insn.module());
        let d = insn.deps();
        let empty: Vec<&str> = pops
            .iter()
            .zip([d.pop_prev, d.pop_next])
            .filter_map(|(q, on)| q.filter(|q| on && tokens[*q as usize].is_empty()))
            .map(Queue::name)
            .collect();
        waits.push(format!(
            "the {} module's instruction {head} ({insn}) waits on the empty {} queue",
            [Module::Load, Module::Compute, Module::Store][m].name(),
            empty.join(" and ")
        ));
    }
    VtaError::Deadlock(waits.join("; "))
}
