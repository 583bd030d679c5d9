//! `tessera-vta`: the VTA accelerator (TVM's Versatile Tensor Accelerator) for Tessera.
//!
//! - [`config`]: the hardware configuration (`vta_config.json`), the default
//!   `1x16_i8w8a32_15_15_18_17`, and what follows from it;
//! - [`isa`]: the instructions and micro-ops, their 128-/32-bit encodings and one-line
//!   decoded form;
//! - [`dram`], [`exec`], [`hazard`], [`sim`]: the simulator — the reference semantics,
//!   bit for bit, with TVM's counters; token-synchronized load/compute/store modules run
//!   deterministically with deadlock and hazard detection; and the cycle model whose
//!   cycles at the board's clock are the measured time;
//! - [`builder`], [`conv2d`]: instruction streams, and the `conv2d_packed` template;
//! - [`module`], [`device`]: the module file and the core's `Device` on the simulator.

pub mod config;
pub mod dram;
pub mod error;
pub mod exec;
pub mod hazard;
pub mod isa;
pub mod sim;

pub use config::VtaConfig;
pub use dram::Dram;
pub use error::VtaError;
pub use exec::Counters;
pub use isa::{
    AluInsn, AluOp, Deps, GemmInsn, Insn, Layout, MemInsn, MemOp, MemType, Module, Uop, UopLoop,
};
pub use sim::Simulator;
pub mod builder;
pub mod conv2d;
pub mod device;
pub mod module;
