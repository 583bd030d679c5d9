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
//! - [`module`], [`device`]: the module file and the core's `Device` on the simulator;
//! - [`annotation`]: what the template tells the backend about a kernel, as typed values
//!   (and the only module that knows how they cross a lowered function);
//! - [`backend`]: what the `vta` target builds — VTA modules for the kernels the
//!   template annotated, CPU code for the rest;
//! - `network` (cargo feature `network`): VTA's part of the pipeline — the network's
//!   preparation (int8, packed) and the `conv2d_packed.vta` template, registered with
//!   the template tuner.

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
pub mod annotation;
pub mod backend;
pub mod builder;
pub mod conv2d;
pub mod device;
pub mod module;
#[cfg(feature = "network")]
pub mod network;

use std::sync::Arc;
use tessera_backends::{Backend, CpuBackend};
use tessera_ir::PrimFunc;
use tessera_plugin::{export_plugin, BuiltKernel, CallError, Plugin};
use tessera_runtime::Device;
use tessera_target::{HardwareParams, Target};

/// The VTA plugin: the `vta` target (the default configuration on the simulator; the
/// board's CPU is this machine's).
pub struct VtaPlugin;

impl VtaPlugin {
    fn config(t: &Target) -> Result<VtaConfig, CallError> {
        match t.option("config") {
            Some(path) => VtaConfig::from_file(std::path::Path::new(path))
                .map_err(|e| CallError::bad_target(t, e)),
            None => Ok(VtaConfig::default()),
        }
    }
}

impl Plugin for VtaPlugin {
    fn name(&self) -> String {
        "vta".into()
    }
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
    fn backends(&self) -> Vec<String> {
        vec!["vta".into()]
    }
    fn hardware_params(&self, _target: &Target) -> Result<HardwareParams, CallError> {
        // the layers VTA does not run are compiled for the board's CPU: this machine's
        Ok(HardwareParams::detect_host())
    }
    fn codegen(&self, target: &Target, func: &PrimFunc) -> Result<String, CallError> {
        self.build(target, func).map(|b| b.source)
    }
    fn build(&self, target: &Target, func: &PrimFunc) -> Result<BuiltKernel, CallError> {
        let cfg = Self::config(target)?;
        if let Some(kernel) = annotation::read(func) {
            let (w, k) = kernel.map_err(|e| CallError::failed("VTA kernel", e))?;
            let (bytes, source) = backend::build_vta(&cfg, func, &w, &k)
                .map_err(|e| CallError::failed("VTA build", e))?;
            return Ok(BuiltKernel {
                bytes,
                launch: None,
                source,
            });
        }
        let dir = tempfile::tempdir().map_err(|e| CallError::failed("a build directory", e))?;
        let cpu = CpuBackend::new(Target::cpu());
        let artifact = cpu
            .build(func, dir.path())
            .map_err(|e| CallError::failed("CPU build", e))?;
        let bytes = std::fs::read(&artifact.path).map_err(|e| {
            CallError::failed(
                "reading the built library",
                format!("{}: {e}", artifact.path.display()),
            )
        })?;
        let source = std::fs::read_to_string(&artifact.source_path).unwrap_or_default();
        Ok(BuiltKernel {
            bytes,
            launch: None,
            source,
        })
    }
    fn open_device(&self, target: &Target) -> Result<Arc<dyn Device>, CallError> {
        let cfg = Self::config(target)?;
        let device = device::VtaDevice::new(cfg)
            .map_err(|e| CallError::failed("opening the VTA device", e))?;
        Ok(Arc::new(device))
    }
}

export_plugin!(VtaPlugin);
