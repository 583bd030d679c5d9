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
pub mod error;
pub mod module;
pub mod target;

pub use error::OpenClError;

use std::sync::Arc;
use tessera_backends::cfamily::{device_source, KernelLaunch, OpenClDialect};
use tessera_ir::PrimFunc;
use tessera_plugin::{export_plugin, BuiltKernel, CallError, Plugin};
use tessera_runtime::Device;
use tessera_target::{HardwareParams, Target, TargetKind};

/// The OpenCL plugin.
pub struct OpenClPlugin;

impl OpenClPlugin {
    /// The OpenCL source of `func` and its module file.
    pub fn module(func: &PrimFunc) -> Result<module::DeviceModule, OpenClError> {
        device_source(&OpenClDialect, func)
            .map(module::DeviceModule::new)
            .map_err(|e| OpenClError::Codegen(e.to_string()))
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
    fn hardware_params(&self, target: &Target) -> Result<HardwareParams, CallError> {
        target::hardware_params(target).map_err(|e| CallError::bad_target(target, e))
    }
    fn codegen(&self, _target: &Target, func: &PrimFunc) -> Result<String, CallError> {
        Self::module(func)
            .map(|m| m.source)
            .map_err(|e| CallError::failed("codegen", e))
    }
    fn build(&self, _target: &Target, func: &PrimFunc) -> Result<BuiltKernel, CallError> {
        let m = Self::module(func).map_err(|e| CallError::failed("codegen", e))?;
        let launch = m.kernels.first().map(KernelLaunch::dims);
        Ok(BuiltKernel {
            bytes: m.to_bytes(),
            launch,
            source: m.source,
        })
    }
    fn open_device(&self, target: &Target) -> Result<Arc<dyn Device>, CallError> {
        let choice =
            device::DeviceChoice::of(target).map_err(|e| CallError::bad_target(target, e))?;
        let device = device::OpenClDevice::open(TargetKind::OPENCL, &choice)
            .map_err(|e| CallError::failed("opening the OpenCL device", e))?;
        Ok(Arc::new(device))
    }
}

export_plugin!(OpenClPlugin);
