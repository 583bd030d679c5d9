//! Running lowered functions on a GPU plugin's device, checked against the
//! interpreter: the OpenCL device (PoCL on a machine without a GPU) and the CUDA device.
//! Tests call [`Gpu::opencl_or_skip`] / [`Gpu::cuda_or_skip`] first. Without an OpenCL
//! platform the OpenCL tests skip with the reason printed, except under CI (`CI` set),
//! where that is a failure: CI installs PoCL so that they run for real. CI has no GPU,
//! so the CUDA tests skip with the reason wherever there is none.

use std::path::Path;
use std::sync::Arc;
use tessera_cuda::device::CudaDevice;
use tessera_cuda::CudaPlugin;
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::PrimFunc;
use tessera_opencl::device::{first_device, OpenClDevice};
use tessera_opencl::OpenClPlugin;
use tessera_plugin::Plugin;
use tessera_runtime::{Device, DeviceArray, NDArray};
use tessera_target::{Artifact, ParamSpec, Target, TargetKind};

/// A GPU backend under test: its plugin, the target it builds for, and its device.
#[derive(Clone)]
pub struct Gpu {
    pub plugin: &'static dyn Plugin,
    pub target: Target,
    pub kind: TargetKind,
    pub device: Arc<dyn Device>,
}

impl Gpu {
    /// The OpenCL device, or `None` (and a printed reason) where there is none outside CI.
    pub fn opencl_or_skip(test: &str) -> Option<Gpu> {
        match first_device()
            .and_then(|_| OpenClDevice::open(TargetKind::OPENCL, &Default::default()))
        {
            Ok(d) => Some(Gpu {
                plugin: &OpenClPlugin,
                target: Target {
                    kind: TargetKind::OPENCL,
                    options: Default::default(),
                },
                kind: TargetKind::OPENCL,
                device: Arc::new(d),
            }),
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("{test}: skipped: {e}");
                None
            }
            Err(e) => panic!("{test}: no OpenCL device under CI (CI installs PoCL): {e}"),
        }
    }

    /// The first CUDA GPU, or `None` and the printed reason.
    pub fn cuda_or_skip(test: &str) -> Option<Gpu> {
        match CudaDevice::open() {
            Ok(d) => Some(Gpu {
                plugin: &CudaPlugin,
                target: Target {
                    kind: TargetKind::CUDA,
                    options: Default::default(),
                },
                kind: TargetKind::CUDA,
                device: Arc::new(d),
            }),
            Err(e) => {
                eprintln!("{test}: skipped: {e}");
                None
            }
        }
    }
}

/// Builds `func` for `gpu`'s target into `dir`: the artifact and the kernel source.
pub fn build(gpu: &Gpu, func: &PrimFunc, dir: &Path) -> Result<(Artifact, String), String> {
    let built = gpu
        .plugin
        .build(&gpu.target, func)
        .map_err(|e| e.to_string())?;
    let path = dir.join(format!("{}.mod", func.name));
    std::fs::write(&path, &built.bytes).map_err(|e| e.to_string())?;
    let source_path = dir.join(format!("{}.src", func.name));
    std::fs::write(&source_path, &built.source).map_err(|e| e.to_string())?;
    Ok((
        Artifact {
            device: gpu.kind.clone(),
            path,
            source_path,
            entry: func.name.clone(),
            params: ParamSpec::of(func),
            launch: built.launch,
        },
        built.source,
    ))
}

/// Runs `func` on `gpu` with `inputs` (host arrays for every parameter; outputs
/// zeroed) and returns every argument's final contents.
pub fn run(
    gpu: &Gpu,
    func: &PrimFunc,
    args: &[NDArray],
    dir: &Path,
) -> Result<Vec<NDArray>, String> {
    let device = &gpu.device;
    let (artifact, source) = build(gpu, func, dir)?;
    let module = device.load_module(&artifact).map_err(|e| e.to_string())?;
    let f = device
        .get_function(module, &artifact.entry)
        .map_err(|e| e.to_string())?;
    let on_device = args
        .iter()
        .map(|a| DeviceArray::from_host(device, a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let buffers: Vec<_> = on_device.iter().map(DeviceArray::buffer).collect();
    device
        .launch(f, &buffers, artifact.launch.as_ref())
        .and_then(|_| device.synchronize())
        .map_err(|e| format!("{e}\n{source}"))?;
    on_device
        .iter()
        .map(|a| a.to_host().map_err(|e| e.to_string()))
        .collect()
}

/// Runs `func` on the device and `reference` in the interpreter on the same seeded
/// inputs (the first `n_inputs` arguments) and compares the outputs.
pub fn check_against_interpreter(
    gpu: &Gpu,
    func: &PrimFunc,
    reference: &PrimFunc,
    n_inputs: usize,
    dir: &Path,
) -> Result<(), String> {
    let args: Vec<NDArray> = func
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shape: Vec<usize> = p
                .const_shape()
                .unwrap_or_default()
                .iter()
                .map(|d| *d as usize)
                .collect();
            if i < n_inputs {
                NDArray::random_uniform(p.dtype(), &shape, 7 + i as u64, -1.0, 1.0)
            } else {
                NDArray::zeros(p.dtype(), &shape)
            }
            .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let got = run(gpu, func, &args, dir)?;
    let mut host: Vec<HostBuffer> = args.iter().map(|a| a.to_host_buffer()).collect();
    interp::run(reference, &mut host).map_err(|e| e.to_string())?;
    for (i, (g, w)) in got.iter().zip(&host).enumerate().skip(n_inputs) {
        let w = NDArray::from_host_buffer(w).map_err(|e| e.to_string())?;
        g.allclose(&w, 1e-4, 1e-4).map_err(|e| {
            format!(
                "output {i}: {e}\n{func}\n{}",
                std::fs::read_to_string(dir.join(format!("{}.src", func.name))).unwrap_or_default()
            )
        })?;
    }
    Ok(())
}
