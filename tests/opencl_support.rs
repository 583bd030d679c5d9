//! Running lowered functions on the OpenCL device (PoCL on a machine without a GPU),
//! checked against the interpreter. Tests call [`device_or_skip`] first: without an
//! OpenCL platform they skip with the reason printed, except under CI (`CI` set), where
//! that is a failure: CI installs PoCL so that these tests run for real.

use std::path::Path;
use std::sync::Arc;
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::PrimFunc;
use tessera_opencl::device::{first_device, OpenClDevice};
use tessera_opencl::OpenClPlugin;
use tessera_plugin::Plugin;
use tessera_runtime::{Device, DeviceArray, NDArray};
use tessera_target::{Artifact, ParamSpec, TargetKind};

/// The OpenCL device, or `None` (and a printed reason) where there is none outside CI.
pub fn device_or_skip(test: &str) -> Option<Arc<dyn Device>> {
    match first_device().and_then(|_| OpenClDevice::open(TargetKind::OPENCL)) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("{test}: skipped: {e}");
            None
        }
        Err(e) => panic!("{test}: no OpenCL device under CI (CI installs PoCL): {e}"),
    }
}

/// Builds `func` for `opencl` into `dir`: the artifact and the OpenCL source.
pub fn build(func: &PrimFunc, dir: &Path) -> Result<(Artifact, String), String> {
    let built = OpenClPlugin.build("opencl", func)?;
    let path = dir.join(format!("{}.clmod", func.name));
    std::fs::write(&path, &built.bytes).map_err(|e| e.to_string())?;
    let source_path = dir.join(format!("{}.cl", func.name));
    std::fs::write(&source_path, &built.source).map_err(|e| e.to_string())?;
    Ok((
        Artifact {
            device: TargetKind::OPENCL,
            path,
            source_path,
            entry: func.name.clone(),
            params: ParamSpec::of(func),
            launch: built.launch,
        },
        built.source,
    ))
}

/// Runs `func` on `device` with `inputs` (host arrays for every parameter; outputs
/// zeroed) and returns every argument's final contents.
pub fn run(
    device: &Arc<dyn Device>,
    func: &PrimFunc,
    args: &[NDArray],
    dir: &Path,
) -> Result<Vec<NDArray>, String> {
    let (artifact, source) = build(func, dir)?;
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
    device: &Arc<dyn Device>,
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
    let got = run(device, func, &args, dir)?;
    let mut host: Vec<HostBuffer> = args.iter().map(|a| a.to_host_buffer()).collect();
    interp::run(reference, &mut host).map_err(|e| e.to_string())?;
    for (i, (g, w)) in got.iter().zip(&host).enumerate().skip(n_inputs) {
        let w = NDArray::from_host_buffer(w).map_err(|e| e.to_string())?;
        g.allclose(&w, 1e-4, 1e-4).map_err(|e| {
            format!(
                "output {i}: {e}\n{func}\n{}",
                std::fs::read_to_string(dir.join(format!("{}.cl", func.name))).unwrap_or_default()
            )
        })?;
    }
    Ok(())
}
