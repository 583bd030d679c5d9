//! `tessera-cuda`: the CUDA backend plugin, for NVIDIA GPUs (`cuda`, `cuda -arch=sm_XX`).
//!
//! - The compiler is the core's: the device passes and the C-family printer in its CUDA
//!   dialect (`tessera_backends::cfamily::CudaDialect`). A build prints the CUDA C and
//!   compiles it to PTX with NVRTC ([`nvrtc`]), so a kernel NVRTC refuses is a build
//!   error, never a measurement; with the GPU at hand, NVRTC also assembles the GPU
//!   code, on the builders' threads rather than in the measuring process. The artifact
//!   is the module file ([`module`]): source, PTX, GPU code, architecture and the
//!   launch list.
//! - The device ([`device`]) runs on the driver API. NVRTC and libcuda are both opened
//!   at run time through cudarc: the plugin builds without CUDA installed, building
//!   kernels needs only NVRTC (no GPU), and a missing library or GPU is an error that
//!   says what to install.
//! - [`target`]: the architecture and limits, from the GPU or TVM's defaults;
//!   [`ptxas`]: assembling PTX to check it and read each kernel's registers and shared
//!   memory, on machines without a GPU.

pub mod device;
pub mod error;
mod locate;
pub mod module;
pub mod nvrtc;
pub mod ptxas;
pub mod target;

pub use error::CudaError;

use std::sync::Arc;
use tessera_backends::cfamily::{device_source, CudaDialect, KernelLaunch};
use tessera_ir::PrimFunc;
use tessera_plugin::{export_plugin, BuiltKernel, CallError, Plugin};
use tessera_runtime::Device;
use tessera_target::{HardwareParams, Target};

/// The CUDA plugin.
pub struct CudaPlugin;

impl CudaPlugin {
    /// The CUDA C of `func` (no NVRTC).
    pub fn source(
        func: &PrimFunc,
    ) -> Result<tessera_backends::cfamily::DeviceSource, tessera_backends::BackendError> {
        device_source(&CudaDialect, func)
    }

    /// The module of `func` for `target`: its CUDA C compiled to PTX.
    pub fn module(target: &Target, func: &PrimFunc) -> Result<module::CudaModule, CallError> {
        let t = target::resolve(target).map_err(|e| CallError::bad_target(target, e))?;
        let src = Self::source(func).map_err(|e| CallError::failed("codegen", e))?;
        // GPU code only where the GPU is at hand (its architecture read from it): what a
        // tuner on the GPU's machine measures; a build for another machine stays PTX,
        // which newer GPUs load too
        let cubin = t.device.is_some();
        let compiled = nvrtc::compile_for(&src.source, &func.name, &t.arch, cubin)
            .map_err(|e| CallError::failed("NVRTC", e))?;
        Ok(module::CudaModule::new(src, t.arch.sm(), compiled.ptx).with_cubin(compiled.cubin))
    }
}

impl Plugin for CudaPlugin {
    fn name(&self) -> String {
        "cuda".into()
    }
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
    fn backends(&self) -> Vec<String> {
        vec!["cuda".into()]
    }
    fn hardware_params(&self, target: &Target) -> Result<HardwareParams, CallError> {
        target::resolve(target)
            .map(|t| t.params)
            .map_err(|e| CallError::bad_target(target, e))
    }
    fn codegen(&self, _target: &Target, func: &PrimFunc) -> Result<String, CallError> {
        Self::source(func)
            .map(|s| s.source)
            .map_err(|e| CallError::failed("codegen", e))
    }
    fn build(&self, target: &Target, func: &PrimFunc) -> Result<BuiltKernel, CallError> {
        let m = Self::module(target, func)?;
        let launch = m.kernels.first().map(KernelLaunch::dims);
        Ok(BuiltKernel {
            bytes: m.to_bytes(),
            launch,
            source: m.source,
        })
    }
    fn open_device(&self, _target: &Target) -> Result<Arc<dyn Device>, CallError> {
        Ok(Arc::new(device::CudaDevice::open().map_err(|e| {
            CallError::failed("opening the CUDA device", e)
        })?))
    }
}

export_plugin!(CudaPlugin);
