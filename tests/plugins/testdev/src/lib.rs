//! A backend plugin for the target kind `testdev`, written the way a hardware vendor
//! would write one (see ARCHITECTURE.md, "Writing a backend plugin"): implement
//! `tessera_plugin::Plugin`, call `export_plugin!`. The "device" is the host CPU: code
//! generation reuses the C generator, the artifact is the compiled shared object's bytes,
//! and running writes them to a file and calls the kernel.
//!
//! For the refusal tests, `build` panics when `TESSERA_TESTDEV_PANIC` is set.

use std::path::PathBuf;
use tessera_backends::{
    Artifact, Backend, CpuBackend, DeviceKind, HardwareParams, ParamSpec, Target,
};
use tessera_ir::PrimFunc;
use tessera_plugin::{export_plugin, Plugin, TimeConfig};
use tessera_runtime::{Module, NDArray, TimeEvaluator};

struct TestDev;

fn cpu() -> CpuBackend {
    CpuBackend::new(Target::cpu())
}

impl TestDev {
    /// Writes the artifact bytes to a file named after their content, and loads it.
    fn module(&self, artifact: &[u8], func: &PrimFunc) -> Result<Module, String> {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in artifact {
            h = (h ^ *b as u64).wrapping_mul(0x100000001b3);
        }
        let path: PathBuf = std::env::temp_dir().join(format!("tessera-testdev-{h:016x}.so"));
        if !path.exists() {
            let tmp = path.with_extension(format!("so.{}", std::process::id()));
            std::fs::write(&tmp, artifact).map_err(|e| e.to_string())?;
            std::fs::rename(&tmp, &path).map_err(|e| e.to_string())?;
        }
        let params = ParamSpec::of(func);
        let art = Artifact {
            device: DeviceKind::Cpu,
            path: path.clone(),
            source_path: path,
            entry: tessera_backends::cpu::entry_symbol(&func.name),
            params,
        };
        Module::load(&art).map_err(|e| e.to_string())
    }

    fn arrays(func: &PrimFunc, args: &[Vec<u8>]) -> Result<Vec<NDArray>, String> {
        func.params
            .iter()
            .zip(args)
            .map(|(p, bytes)| {
                let shape: Vec<usize> = p
                    .const_shape()
                    .unwrap_or_default()
                    .iter()
                    .map(|d| *d as usize)
                    .collect();
                let mut a = NDArray::zeros(p.dtype(), &shape).map_err(|e| e.to_string())?;
                if a.nbytes() != bytes.len() {
                    return Err(format!(
                        "argument `{}`: {} bytes, expected {}",
                        p.name(),
                        bytes.len(),
                        a.nbytes()
                    ));
                }
                a.as_bytes_mut().copy_from_slice(bytes);
                Ok(a)
            })
            .collect()
    }
}

impl Plugin for TestDev {
    fn name(&self) -> String {
        "testdev".into()
    }
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
    fn backends(&self) -> Vec<String> {
        vec!["testdev".into()]
    }
    fn strategies(&self) -> Vec<String> {
        vec!["first-fit".into()]
    }
    /// A toy strategy that exercises the measure callback: proposes candidates
    /// `0, 1, …` one per batch until the budget is spent, and reports the first whose
    /// measured result is `"ok"` (or `"none"`).
    fn search(
        &self,
        strategy: &str,
        _task: &str,
        budget: u32,
        measure: &mut dyn FnMut(&str) -> Result<String, String>,
    ) -> Result<String, String> {
        if strategy != "first-fit" {
            return Err(format!("no strategy `{strategy}`"));
        }
        for i in 0..budget {
            if measure(&format!("[{i}]"))? == "ok" {
                return Ok(i.to_string());
            }
        }
        Ok("none".into())
    }
    fn hardware_params(&self, _target: &str) -> Result<HardwareParams, String> {
        Ok(HardwareParams::detect_host())
    }
    fn codegen(&self, _target: &str, func: &PrimFunc) -> Result<String, String> {
        cpu().codegen(func).map_err(|e| e.to_string())
    }
    fn build(&self, _target: &str, func: &PrimFunc) -> Result<Vec<u8>, String> {
        if std::env::var_os("TESSERA_TESTDEV_PANIC").is_some() {
            panic!("testdev was asked to panic");
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let art = cpu().build(func, dir.path()).map_err(|e| e.to_string())?;
        std::fs::read(&art.path).map_err(|e| e.to_string())
    }
    fn run(
        &self,
        _target: &str,
        artifact: &[u8],
        func: &PrimFunc,
        args: &mut [Vec<u8>],
    ) -> Result<(), String> {
        let m = self.module(artifact, func)?;
        let mut arrays = Self::arrays(func, args)?;
        let mut refs: Vec<&mut NDArray> = arrays.iter_mut().collect();
        m.call(&mut refs).map_err(|e| e.to_string())?;
        for (dst, a) in args.iter_mut().zip(&arrays) {
            dst.copy_from_slice(a.as_bytes());
        }
        Ok(())
    }
    fn time(
        &self,
        _target: &str,
        artifact: &[u8],
        func: &PrimFunc,
        args: &mut [Vec<u8>],
        c: TimeConfig,
    ) -> Result<Vec<f64>, String> {
        let m = self.module(artifact, func)?;
        let mut arrays = Self::arrays(func, args)?;
        let mut refs: Vec<&mut NDArray> = arrays.iter_mut().collect();
        let ev = TimeEvaluator {
            number: c.number.max(1) as usize,
            repeat: c.repeat.max(1) as usize,
            min_repeat_ms: c.min_repeat_ms,
            cache_flush: false,
        };
        m.time_with(&ev, &mut refs)
            .map(|t| t.results)
            .map_err(|e| e.to_string())
    }
}

export_plugin!(TestDev);
