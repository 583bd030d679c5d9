//! The VTA hardware configuration: the `vta_config.json` of TVM's VTA (the data widths,
//! the GEMM core's shape and the on-chip buffer sizes, all as base-2 logarithms) and what
//! follows from it — element sizes and buffer depths, the bitstream name, the peak. The
//! default is the Pynq configuration `1x16_i8w8a32_15_15_18_17`.

use crate::error::Unsupported;
use crate::error::VtaError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A VTA configuration, field for field as in `vta_config.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE", deny_unknown_fields)]
pub struct VtaConfig {
    /// Where it runs: `sim` or a board's name (`pynq`, `ultra96`, …).
    #[serde(default = "default_target")]
    pub target: String,
    #[serde(default = "default_hw_ver")]
    pub hw_ver: String,
    pub log_inp_width: u32,
    pub log_wgt_width: u32,
    pub log_acc_width: u32,
    pub log_batch: u32,
    pub log_block: u32,
    pub log_uop_buff_size: u32,
    pub log_inp_buff_size: u32,
    pub log_wgt_buff_size: u32,
    pub log_acc_buff_size: u32,
    /// The board's clock; not in TVM's file (there it belongs to the board), 100 MHz as
    /// on the Pynq when absent.
    #[serde(default = "default_clock")]
    pub clock_mhz: u32,
}

fn default_target() -> String {
    "sim".into()
}
fn default_hw_ver() -> String {
    "0.0.2".into()
}
fn default_clock() -> u32 {
    100
}

impl Default for VtaConfig {
    fn default() -> Self {
        VtaConfig {
            target: default_target(),
            hw_ver: default_hw_ver(),
            log_inp_width: 3,
            log_wgt_width: 3,
            log_acc_width: 5,
            log_batch: 0,
            log_block: 4,
            log_uop_buff_size: 15,
            log_inp_buff_size: 15,
            log_wgt_buff_size: 18,
            log_acc_buff_size: 17,
            clock_mhz: default_clock(),
        }
    }
}

/// Bytes of one micro-op.
pub const UOP_BYTES: usize = 4;
/// Bits of a loop count in GEMM and ALU instructions.
pub const LOOP_ITER_WIDTH: u32 = 14;

impl VtaConfig {
    /// Reads a `vta_config.json`-style file and checks it.
    pub fn from_file(path: &Path) -> Result<VtaConfig, VtaError> {
        let text = std::fs::read_to_string(path).map_err(|e| VtaError::Config {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let cfg: VtaConfig = serde_json::from_str(&text).map_err(|e| VtaError::Config {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        cfg.check().map_err(|reason| VtaError::Config {
            path: path.display().to_string(),
            reason: reason.to_string(),
        })?;
        Ok(cfg)
    }

    /// What this implementation runs: int8 inputs and weights, int32 accumulators, and
    /// buffers whose index fields fit the instruction words.
    pub fn check(&self) -> Result<(), Unsupported> {
        if (self.log_inp_width, self.log_wgt_width, self.log_acc_width) != (3, 3, 5) {
            return Err(Unsupported(format!(
                "only int8 inputs and weights with int32 accumulators are supported \
                 (LOG_INP_WIDTH 3, LOG_WGT_WIDTH 3, LOG_ACC_WIDTH 5), not {}/{}/{}",
                self.log_inp_width, self.log_wgt_width, self.log_acc_width
            )));
        }
        if self.log_batch > 4 || self.log_block > 6 || self.log_block < 1 {
            return Err(Unsupported(format!(
                "LOG_BATCH {} / LOG_BLOCK {}: a batch of at most 16 and a block of 2 to 64",
                self.log_batch, self.log_block
            )));
        }
        let depths = [
            ("UOP", self.log_uop_buff_size, self.log_uop_depth()),
            ("INP", self.log_inp_buff_size, self.log_inp_depth()),
            ("WGT", self.log_wgt_buff_size, self.log_wgt_depth()),
            ("ACC", self.log_acc_buff_size, self.log_acc_depth()),
        ];
        for (name, size, depth) in depths {
            if !(1..=16).contains(&depth) || size > 24 {
                return Err(Unsupported(format!(
                    "LOG_{name}_BUFF_SIZE {size}: a buffer of 2 to 65536 elements is supported"
                )));
            }
        }
        if self.clock_mhz == 0 {
            return Err(Unsupported("CLOCK_MHZ must be positive".into()));
        }
        crate::isa::Layout::of(self).map(|_| ())
    }

    /// Rows of the GEMM core (the batch).
    pub fn batch(&self) -> usize {
        1 << self.log_batch
    }
    /// The GEMM core's reduction width and output width (they are equal in VTA).
    pub fn block(&self) -> usize {
        1 << self.log_block
    }
    /// Bytes of one input element (`batch × block` int8).
    pub fn inp_elem_bytes(&self) -> usize {
        self.batch() * self.block()
    }
    /// Bytes of one weight element (`block × block` int8).
    pub fn wgt_elem_bytes(&self) -> usize {
        self.block() * self.block()
    }
    /// Bytes of one accumulator element (`batch × block` int32).
    pub fn acc_elem_bytes(&self) -> usize {
        self.batch() * self.block() * 4
    }
    /// Bytes of one output element (`batch × block` int8).
    pub fn out_elem_bytes(&self) -> usize {
        self.batch() * self.block()
    }
    fn log_elems(size: u32, elem_bytes: usize) -> u32 {
        size.saturating_sub(elem_bytes.trailing_zeros())
    }
    pub fn log_uop_depth(&self) -> u32 {
        Self::log_elems(self.log_uop_buff_size, UOP_BYTES)
    }
    pub fn log_inp_depth(&self) -> u32 {
        Self::log_elems(self.log_inp_buff_size, self.inp_elem_bytes())
    }
    pub fn log_wgt_depth(&self) -> u32 {
        Self::log_elems(self.log_wgt_buff_size, self.wgt_elem_bytes())
    }
    pub fn log_acc_depth(&self) -> u32 {
        Self::log_elems(self.log_acc_buff_size, self.acc_elem_bytes())
    }
    pub fn uop_depth(&self) -> usize {
        1 << self.log_uop_depth()
    }
    pub fn inp_depth(&self) -> usize {
        1 << self.log_inp_depth()
    }
    pub fn wgt_depth(&self) -> usize {
        1 << self.log_wgt_depth()
    }
    /// Accumulator elements; the output buffer has the same index space.
    pub fn acc_depth(&self) -> usize {
        1 << self.log_acc_depth()
    }

    /// TVM's bitstream name, e.g. `1x16_i8w8a32_15_15_18_17`.
    pub fn name(&self) -> String {
        format!(
            "{}x{}_i{}w{}a{}_{}_{}_{}_{}",
            self.batch(),
            self.block(),
            1 << self.log_inp_width,
            1 << self.log_wgt_width,
            1 << self.log_acc_width,
            self.log_uop_buff_size,
            self.log_inp_buff_size,
            self.log_wgt_buff_size,
            self.log_acc_buff_size
        )
    }

    /// Multiply-adds of one GEMM micro-op.
    pub fn macs_per_uop(&self) -> usize {
        self.batch() * self.block() * self.block()
    }

    /// Peak operations per second: one GEMM micro-op (2 ops per MAC) per cycle.
    pub fn peak_ops(&self) -> f64 {
        2.0 * self.macs_per_uop() as f64 * self.clock_mhz as f64 * 1e6
    }
}
