//! `tessera-opencl`: the OpenCL backend plugin, for any OpenCL device and for Mali GPUs
//! with TVM's parameters (`opencl -device=mali`).
//!
//! - The compiler is the core's: the device passes and the C-family printer in its
//!   OpenCL dialect (`tessera_backends::cfamily`). A build is the module file
//!   ([`module`]): the source plus each kernel's arguments and launch sizes; OpenCL
//!   compiles the source when the device loads it.
//! - The device ([`device`]) runs on the OpenCL runtime through `opencl3`, which opens
//!   `libOpenCL.so.1` at run time: the plugin builds without OpenCL installed, and a
//!   machine without it gets an error naming what to install.
//! - The targets' hardware parameters ([`target`]): queried from the device, or TVM's
//!   Mali values.

pub mod device;
pub mod module;
pub mod target;

use std::sync::Arc;
use tessera_backends::cfamily::{device_source, KernelLaunch, OpenClDialect};
use tessera_ir::PrimFunc;
use tessera_plugin::{export_plugin, BuiltKernel, Plugin};
use tessera_runtime::Device;
use tessera_target::{HardwareParams, TargetKind};

/// The OpenCL plugin.
pub struct OpenClPlugin;

impl OpenClPlugin {
    /// The OpenCL source of `func` and its module file.
    pub fn module(func: &PrimFunc) -> Result<module::DeviceModule, String> {
        device_source(&OpenClDialect, func)
            .map(module::DeviceModule::new)
            .map_err(|e| e.to_string())
    }
}

impl Plugin for OpenClPlugin {
    fn name(&self) -> String {
        "opencl".into()
    }
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
    fn backends(&self) -> Vec<String> {
        vec!["opencl".into()]
    }
    fn hardware_params(&self, target: &str) -> Result<HardwareParams, String> {
        target::hardware_params(target)
    }
    fn codegen(&self, _target: &str, func: &PrimFunc) -> Result<String, String> {
        Self::module(func).map(|m| m.source)
    }
    fn build(&self, _target: &str, func: &PrimFunc) -> Result<BuiltKernel, String> {
        let m = Self::module(func)?;
        let launch = m.kernels.first().map(KernelLaunch::dims);
        Ok(BuiltKernel {
            bytes: m.to_bytes(),
            launch,
            source: m.source,
        })
    }
    fn open_device(&self, _target: &str) -> Result<Arc<dyn Device>, String> {
        Ok(Arc::new(device::OpenClDevice::open(TargetKind::OPENCL)?))
    }
}

export_plugin!(OpenClPlugin);
