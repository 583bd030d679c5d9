//! The VTA plugin's errors, each naming what failed and why.

use thiserror::Error;

/// An error of the VTA plugin.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum VtaError {
    /// A configuration file that cannot be read or is not supported.
    #[error("VTA configuration {path}: {reason}")]
    Config { path: String, reason: String },
    /// A value that does not fit its instruction field.
    #[error("instruction field `{field}` is {bits} bits wide: {value} does not fit")]
    Encode {
        field: &'static str,
        value: u64,
        bits: u32,
    },
    /// A word that is not an instruction.
    #[error("not a VTA instruction: {0}")]
    Decode(String),
    /// An access outside the simulated DRAM.
    #[error("DRAM access of {len} bytes at 0x{addr:x} is outside every allocation")]
    Dram { addr: u64, len: usize },
    /// DRAM exhausted.
    #[error("out of simulated DRAM: {asked} bytes asked, {free} free")]
    OutOfDram { asked: usize, free: usize },
    /// An instruction the simulator refuses (a buffer overflow, a bad index…).
    #[error("instruction {index} ({insn}): {reason}")]
    Insn {
        index: usize,
        insn: String,
        reason: String,
    },
    /// A template configuration that cannot be instantiated (a tile that overflows a
    /// buffer, a split that does not divide its axis).
    #[error("configuration {config}: {reason}")]
    Instantiate { config: String, reason: String },
    /// A module file that cannot be read or is not a VTA module.
    #[error("{path}: {reason}")]
    Module { path: String, reason: String },
    /// A program launched with arguments that do not match it.
    #[error("launch: {0}")]
    Launch(String),
    /// The modules wait on each other's tokens with instructions left.
    #[error("deadlock: {0}")]
    Deadlock(String),
    /// Two modules touch the same buffer element without a token ordering them.
    #[error("hazard: {0}")]
    Hazard(String),
}

/// What this implementation of VTA does not run (a configuration whose widths or depths
/// it does not support, a layer shape it cannot tile), with the reason: the callers
/// wrap it into the [`VtaError`] of their context.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);
