//! The simulator: the fetch unit hands each instruction to its module (load, compute,
//! store; [`Insn::module`]), each module runs its own stream in order, and the four token
//! queues between neighbours (load→compute, compute→load, compute→store, store→compute)
//! order them. The run is deterministic: the next instruction is always the one that can
//! start earliest (ties: load, compute, store), a module whose head waits on a token
//! nobody will push is a deadlock error naming every waiting head, and element accesses
//! not ordered by tokens are hazard errors ([`crate::hazard`]).
//!
//! The cycle model (`../shared/reference/vta.md` §3, §6): an instruction starts when its
//! module is free and the tokens it pops have been pushed, and pushes at its end. A DMA
//! holds the memory bus, shared by all modules and granted in start order, one cycle per
//! 8 bytes, and costs 150 cycles of latency more (and one per padding element written);
//! GEMM costs 80 plus one per micro-op step, ALU 46 plus two per step (one with an
//! immediate), and a step that reads the accumulator the step before wrote waits
//! [`ACC_RAW_STALL`] more; a no-op or FINISH 40. A queue holds [`QUEUE_DEPTH`] tokens, as
//! the hardware's streams: an instruction that would push into a full one waits until
//! its consumer has popped. Cycles at the board's clock are the measured time.

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

/// Tokens a queue holds (the hardware streams' depth).
pub const QUEUE_DEPTH: usize = 8;

/// The token queues and, for each, when its last pop made room.
#[derive(Default)]
struct Queues {
    tokens: [VecDeque<Token>; 4],
    room_at: [u64; 4],
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

/// Extra cycles of a GEMM or ALU step that reads the accumulator the step before it
/// wrote (the accumulator pipeline's depth). VTA has no interlock for this — TVM's
/// schedules avoid it — so the model charges the wait an interlock would cost and counts
/// such steps (`Counters::acc_raw_steps`).
pub const ACC_RAW_STALL: u64 = 4;

/// What an instruction costs: cycles of its own, and for a DMA the cycles it holds the
/// memory bus that every module's transfers share (64 bits a cycle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cost {
    pub own: u64,
    pub bus: u64,
}

/// The cost of `insn`; `raw_steps` of its steps wait on the step before.
pub fn cost(cfg: &VtaConfig, insn: &Insn, raw_steps: u64) -> Cost {
    const DMA: u64 = 150;
    let own = |own| Cost { own, bus: 0 };
    match insn {
        Insn::Mem(m) if m.x_size == 0 => own(40),
        Insn::Mem(m) => {
            let elem = crate::builder::elem_bytes(cfg, m.mem) as u64;
            let n = (m.x_size * m.y_size) as u64;
            let total = ((m.x_size + m.x_pad[0] + m.x_pad[1])
                * (m.y_size + m.y_pad[0] + m.y_pad[1])) as u64;
            let pad = if m.op == MemOp::Load { total - n } else { 0 };
            Cost {
                own: DMA + pad,
                bus: (n * elem).div_ceil(8),
            }
        }
        Insn::Gemm(g) => own(80 + g.lp.iterations() + ACC_RAW_STALL * raw_steps),
        Insn::Alu(a) if a.imm.is_some() => own(46 + a.lp.iterations() + ACC_RAW_STALL * raw_steps),
        Insn::Alu(a) => own(46 + 2 * a.lp.iterations() + ACC_RAW_STALL * raw_steps),
        Insn::Finish(_) => own(40),
    }
}

/// A simulated VTA: its configuration, buffers and counters (summed over every run).
#[derive(Debug)]
pub struct Simulator {
    cfg: VtaConfig,
    layout: Layout,
    sram: Sram,
    total: Counters,
    functional: bool,
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
            reason: reason.to_string(),
        })?;
        let layout = Layout::of(&cfg).expect("checked");
        Ok(Simulator {
            sram: Sram::new(&cfg),
            layout,
            cfg,
            total: Counters::default(),
            functional: true,
        })
    }

    /// With `false`, runs only the cycle model and the counters (neither buffers nor
    /// DRAM change, and nothing is checked but the tokens): the time of a program does
    /// not depend on its data, so tuning measures this way.
    pub fn set_functional(&mut self, on: bool) {
        self.functional = on;
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
        let mut q = Queues::default();
        let mut counters = Counters::default();
        let mut end = 0u64;
        let mut bus_free = 0u64;
        while let Some((m, start)) = next_module(program, &modules, &q) {
            let index = modules[m].stream.pop_front().expect("has a head");
            let insn = &program[index];
            let st = &mut modules[m];
            let (pops, pushes) = queues(insn.module());
            let d = insn.deps();
            for (qu, on) in pops.iter().zip([d.pop_prev, d.pop_next]) {
                if let (Some(qu), true) = (qu, on) {
                    let t = q.tokens[*qu as usize].pop_front().expect("checked ready");
                    q.room_at[*qu as usize] = start;
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
            let raw = match insn {
                Insn::Gemm(g) if !g.lp.reset => self.raw_steps(&g.lp),
                Insn::Alu(a) if !a.lp.reset => self.raw_steps(&a.lp),
                _ => 0,
            };
            counters.acc_raw_steps += raw;
            let c = cost(&self.cfg, insn, raw);
            let on_bus = if c.bus > 0 {
                start.max(bus_free)
            } else {
                start
            };
            bus_free = if c.bus > 0 { on_bus + c.bus } else { bus_free };
            let done = on_bus + c.bus + c.own;
            counters.busy[m] += done - start;
            st.free_at = done;
            end = end.max(done);
            for (qu, on) in pushes.iter().zip([d.push_prev, d.push_next]) {
                if let (Some(qu), true) = (qu, on) {
                    q.tokens[*qu as usize].push_back(Token {
                        ready: done,
                        clock: stamp.clock,
                    });
                }
            }
            counters.count(&self.cfg, insn);
            let uop_load = matches!(insn, Insn::Mem(m) if m.mem == MemType::Uop);
            if self.functional || uop_load {
                let mut exec = Exec {
                    cfg: &self.cfg,
                    layout: &self.layout,
                    sram: &mut self.sram,
                    dram,
                };
                exec.run(insn, &stamp)?;
            }
        }
        if modules.iter().any(|m| !m.stream.is_empty()) {
            return Err(deadlock(program, &modules, &q));
        }
        counters.cycles = end;
        self.total.add(&counters);
        Ok(counters)
    }
}

impl Simulator {
    /// Steps of a GEMM or ALU loop whose accumulator is the one the step before wrote.
    fn raw_steps(&self, lp: &crate::isa::UopLoop) -> u64 {
        let mut prev = None;
        let mut n = 0;
        for o in 0..lp.iter_out {
            for i in 0..lp.iter_in {
                for k in lp.uop_bgn..lp.uop_end {
                    let word = self.sram.uop.get(k as usize).copied().unwrap_or(0);
                    let dst = self.layout.decode_uop(word).dst
                        + o * lp.dst_factor[0]
                        + i * lp.dst_factor[1];
                    n += u64::from(prev == Some(dst));
                    prev = Some(dst);
                }
            }
        }
        n
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

/// When the head of a module could start, if the tokens it pops are there and the
/// queues it pushes to have room.
fn ready_at(insn: &Insn, st: &ModuleState, q: &Queues) -> Option<u64> {
    let (pops, pushes) = queues(insn.module());
    let d = insn.deps();
    let mut at = st.free_at;
    for (qu, on) in pops.iter().zip([d.pop_prev, d.pop_next]) {
        if let (Some(qu), true) = (qu, on) {
            at = at.max(q.tokens[*qu as usize].front()?.ready);
        }
    }
    for (qu, on) in pushes.iter().zip([d.push_prev, d.push_next]) {
        if let (Some(qu), true) = (qu, on) {
            if q.tokens[*qu as usize].len() >= QUEUE_DEPTH {
                return None;
            }
            at = at.max(q.room_at[*qu as usize]);
        }
    }
    Some(at)
}

/// The module whose head starts first, and when.
fn next_module(program: &[Insn], modules: &[ModuleState; 3], q: &Queues) -> Option<(usize, u64)> {
    (0..3)
        .filter_map(|m| {
            let head = *modules[m].stream.front()?;
            ready_at(&program[head], &modules[m], q).map(|t| (m, t))
        })
        .min_by_key(|&(m, t)| (t, m))
}

fn deadlock(program: &[Insn], modules: &[ModuleState; 3], q: &Queues) -> VtaError {
    let mut waits = Vec::new();
    for (m, st) in modules.iter().enumerate() {
        let Some(&head) = st.stream.front() else {
            continue;
        };
        let insn = &program[head];
        let (pops, pushes) = queues(insn.module());
        let d = insn.deps();
        let empty = pops
            .iter()
            .zip([d.pop_prev, d.pop_next])
            .filter_map(|(qu, on)| qu.filter(|qu| on && q.tokens[*qu as usize].is_empty()))
            .map(|qu| format!("the empty {} queue", qu.name()));
        let full = pushes
            .iter()
            .zip([d.push_prev, d.push_next])
            .filter_map(|(qu, on)| {
                qu.filter(|qu| on && q.tokens[*qu as usize].len() >= QUEUE_DEPTH)
            })
            .map(|qu| format!("the full {} queue ({QUEUE_DEPTH} tokens)", qu.name()));
        let on: Vec<String> = empty.chain(full).collect();
        waits.push(format!(
            "the {} module's instruction {head} ({insn}) waits on {}",
            [Module::Load, Module::Compute, Module::Store][m].name(),
            on.join(" and ")
        ));
    }
    VtaError::Deadlock(waits.join("; "))
}
