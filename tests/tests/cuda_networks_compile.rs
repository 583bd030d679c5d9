//! The untuned networks of the seed flow compile for CUDA: ResNet-18 (NHWC) and
//! MobileNet, built by the graph executor through the CUDA plugin's backend (every
//! distinct fused group's default GPU schedule, printed and compiled by NVRTC for
//! `sm_80`) onto a device that only assembles what it is given: each module's PTX goes
//! through ptxas, and every kernel of its launch list must be in the report. What the
//! GPU would run is everything but the launches.
//!
//! Without NVRTC the test skips with the reason printed, except under CI.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tessera_cuda::module::CudaModule;
use tessera_cuda::target::Arch;
use tessera_cuda::{nvrtc, ptxas};
use tessera_driver::{NetworkSource, NetworkSpec, Toolchain};
use tessera_graph::Layout;
use tessera_runtime::timer::{TimeEvaluator, TimeResult};
use tessera_runtime::{BufferId, Device, DeviceError, FunctionId, ModuleId};
use tessera_target::{Artifact, LaunchDims, TargetKind};

/// A CUDA "device" that assembles modules and runs nothing.
struct Assembler {
    arch: Arch,
    assemble: bool,
    next: AtomicU64,
    kernels: Mutex<usize>,
}

impl Assembler {
    fn id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }
    fn refuse(&self, what: &str) -> DeviceError {
        DeviceError::Failed {
            device: "assembler".into(),
            message: format!("{what}: this device only assembles"),
        }
    }
}

impl Device for Assembler {
    fn kind(&self) -> TargetKind {
        TargetKind::CUDA
    }
    fn alloc(&self, _nbytes: usize) -> Result<BufferId, DeviceError> {
        Ok(BufferId(self.id()))
    }
    fn free(&self, _buffer: BufferId) -> Result<(), DeviceError> {
        Ok(())
    }
    fn copy_from_host(&self, _: BufferId, _: usize, _: &[u8]) -> Result<(), DeviceError> {
        Ok(())
    }
    fn copy_to_host(&self, _: BufferId, _: usize, _: &mut [u8]) -> Result<(), DeviceError> {
        Err(self.refuse("copy_to_host"))
    }
    fn copy_on_device(&self, _: BufferId, _: BufferId, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        let m = CudaModule::read(&artifact.path).map_err(|e| self.refuse(&e.to_string()))?;
        assert_eq!(m.arch, self.arch.sm(), "{}", artifact.entry);
        if self.assemble {
            let report = ptxas::assemble(&m.ptx, &self.arch)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", artifact.entry, m.source));
            for k in &m.kernels {
                let r = report.iter().find(|r| r.name == k.name).unwrap_or_else(|| {
                    panic!("{}: ptxas did not see `{}`", artifact.entry, k.name)
                });
                assert_eq!(r.shared_bytes, k.shared_bytes, "{}", k.name);
            }
        }
        *self.kernels.lock().unwrap() += m.kernels.len();
        Ok(ModuleId(self.id()))
    }
    fn get_function(&self, _: ModuleId, _: &str) -> Result<FunctionId, DeviceError> {
        Ok(FunctionId(self.id()))
    }
    fn launch(
        &self,
        _: FunctionId,
        _: &[BufferId],
        _: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        Err(self.refuse("launch"))
    }
    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn time(
        &self,
        _: FunctionId,
        _: &[BufferId],
        _: Option<&LaunchDims>,
        _: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        Err(self.refuse("time"))
    }
}

fn compiles(name: &str, layout: Layout) {
    if let Err(e) = nvrtc::ensure_loaded() {
        assert!(std::env::var_os("CI").is_none(), "{name}: {e}");
        eprintln!("{name}: skipped: {e}");
        return;
    }
    let assemble = match ptxas::find() {
        Ok(_) => true,
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "{name}: {e}");
            eprintln!("{name}: not assembled: {e}");
            false
        }
    };
    let reg = tessera_plugin::discover(&[tessera_cuda::tessera_plugin_root()], &[]);
    let tc = Toolchain::new(reg, Vec::new());
    let spec = NetworkSpec::new(
        NetworkSource::zoo(name),
        tc.parse_target("cuda -arch=sm_80").unwrap(),
    )
    .with_layout(layout);
    // the pipeline's stages 1–7; stage 8 on the assembler
    let compiled = tc
        .compile(&spec, None)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .network;
    let device = Arc::new(Assembler {
        arch: Arch::parse("sm_80").unwrap(),
        assemble,
        next: AtomicU64::new(0),
        kernels: Mutex::new(0),
    });
    compiled
        .load(device.clone())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let kernels = *device.kernels.lock().unwrap();
    eprintln!("{name}: {kernels} kernels compiled and assembled");
    assert!(kernels > 10, "{name}: {kernels} kernels");
}

#[test]
fn resnet18_nhwc_compiles_for_sm_80() {
    compiles("resnet-18", Layout::Nhwc);
}

#[test]
fn mobilenet_compiles_for_sm_80() {
    compiles("mobilenet", Layout::Nhwc);
}
