//! A backend plugin for the target kind `testdev`, written the way a hardware vendor
//! would write one (see `tessera_plugin`'s docs, "Writing a plugin"): implement
//! `tessera_plugin::Plugin` (its compiler) and the runtime's `Device` (its device), and
//! call `export_plugin!`.
//!
//! The "device" computes on the host CPU, but owns its memory as a device would: buffers
//! live in its own arena, the core holds only handles, and data moves only through the
//! copy calls. It counts every copy and launch, and with `TESSERA_TESTDEV_COUNTERS=FILE`
//! writes the counts to FILE (JSON, rewritten after each counted call), so tests can
//! prove where data lives.
//!
//! Its artifact is its own format: a header line `TESTDEV1 <fault>` followed by the
//! kernel's shared object. For the fault tests, `TESSERA_TESTDEV_FAULTS=1` at build time
//! marks the 2nd, 3rd and 4th kernels this plugin builds (in one process) to hang, to
//! crash the process, and to compute a wrong answer when launched. For the refusal
//! tests, `build` panics when `TESSERA_TESTDEV_PANIC` is set.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tessera_backends::{Backend, CpuBackend, HardwareParams, Target};
use tessera_ir::PrimFunc;
use tessera_plugin::{export_plugin, BuiltKernel, CallError, Plugin};
use tessera_runtime::{
    BufferId, Device, DeviceError, DeviceName, FunctionId, Handles, HostArena, Module, ModuleId,
};
use tessera_target::{Artifact, LaunchDims, TargetKind};

const MAGIC: &str = "TESTDEV1";

/// What a launched kernel does wrong on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    Hang,
    Crash,
    Wrong,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Hang => "hang",
            Fault::Crash => "crash",
            Fault::Wrong => "wrong",
        }
    }
    fn parse(s: &str) -> Option<Fault> {
        [Fault::None, Fault::Hang, Fault::Crash, Fault::Wrong]
            .into_iter()
            .find(|f| f.name() == s)
    }
}

struct TestDev {
    builds: AtomicU64,
}

fn cpu() -> CpuBackend {
    CpuBackend::new(Target::cpu())
}

impl TestDev {
    /// The fault of the next kernel built (see the module doc).
    fn next_fault(&self) -> Fault {
        let n = self.builds.fetch_add(1, Ordering::SeqCst) + 1;
        if std::env::var_os("TESSERA_TESTDEV_FAULTS").is_none() {
            return Fault::None;
        }
        match n {
            2 => Fault::Hang,
            3 => Fault::Crash,
            4 => Fault::Wrong,
            _ => Fault::None,
        }
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
    fn hardware_params(&self, _target: &Target) -> Result<HardwareParams, CallError> {
        Ok(HardwareParams::detect_host())
    }
    fn codegen(&self, _target: &Target, func: &PrimFunc) -> Result<String, CallError> {
        cpu()
            .codegen(func)
            .map_err(|e| CallError::failed("codegen", e))
    }
    fn build(&self, _target: &Target, func: &PrimFunc) -> Result<BuiltKernel, CallError> {
        if std::env::var_os("TESSERA_TESTDEV_PANIC").is_some() {
            panic!("testdev was asked to panic");
        }
        let failed = |e: &dyn std::fmt::Display| CallError::failed("build", e);
        let dir = tempfile::tempdir().map_err(|e| failed(&e))?;
        let art = cpu().build(func, dir.path()).map_err(|e| failed(&e))?;
        let so = std::fs::read(&art.path).map_err(|e| failed(&e))?;
        let source = std::fs::read_to_string(&art.source_path).map_err(|e| failed(&e))?;
        let mut bytes = format!("{MAGIC} {}\n", self.next_fault().name()).into_bytes();
        bytes.extend_from_slice(&so);
        Ok(BuiltKernel {
            bytes,
            launch: None,
            source,
        })
    }
    fn open_device(&self, _target: &Target) -> Result<Arc<dyn Device>, CallError> {
        Ok(Arc::new(TestDevice::default()))
    }
}

/// What the device has done, for tests.
#[derive(Default, Clone, Copy, Debug)]
struct Counters {
    allocs: u64,
    frees: u64,
    copies_in: u64,
    bytes_in: u64,
    copies_out: u64,
    bytes_out: u64,
    copies_on_device: u64,
    modules: u64,
    launches: u64,
}

impl Counters {
    fn json(&self) -> String {
        format!(
            "{{\"allocs\":{},\"frees\":{},\"copies_in\":{},\"bytes_in\":{},\"copies_out\":{},\"bytes_out\":{},\"copies_on_device\":{},\"modules\":{},\"launches\":{}}}\n",
            self.allocs,
            self.frees,
            self.copies_in,
            self.bytes_in,
            self.copies_out,
            self.bytes_out,
            self.copies_on_device,
            self.modules,
            self.launches
        )
    }
}

struct Kernel {
    module: Arc<Module>,
    fault: Fault,
}

/// The device: an arena of its own buffers, loaded kernels, counters. Written on the
/// runtime's device base: its handle tables (`Handles`) and its errors (`DeviceName`).
struct TestDevice {
    name: DeviceName,
    state: Mutex<State>,
}

impl Default for TestDevice {
    fn default() -> TestDevice {
        TestDevice {
            name: DeviceName::new(KIND),
            state: Mutex::new(State {
                arena: HostArena::new(KIND),
                modules: Handles::new("module"),
                functions: Handles::new("function"),
                counters: Counters::default(),
            }),
        }
    }
}

struct State {
    /// The device's memory: host allocations of its own, reached by handles only.
    arena: HostArena,
    modules: Handles<Arc<Kernel>>,
    functions: Handles<Arc<Kernel>>,
    counters: Counters,
}

impl State {
    /// Rewrites the counters file, if tests asked for one.
    fn publish(&self) {
        if let Some(path) = std::env::var_os("TESSERA_TESTDEV_COUNTERS") {
            let _ = std::fs::write(path, self.counters.json());
        }
    }
}

/// The device's target kind and name.
const KIND: &str = "testdev";

fn fail(message: String) -> DeviceError {
    DeviceName::new(KIND).failed(message)
}

impl TestDevice {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Splits an artifact file into its fault and the shared object, written to a file named
/// after its content (the dynamic loader caches objects by path).
fn unpack(artifact: &Artifact) -> Result<(Fault, PathBuf), DeviceError> {
    let bytes = std::fs::read(&artifact.path)
        .map_err(|e| fail(format!("{}: {e}", artifact.path.display())))?;
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| fail("not a testdev artifact (no header)".into()))?;
    let header = String::from_utf8_lossy(&bytes[..nl]).to_string();
    let fault = header
        .strip_prefix(MAGIC)
        .and_then(|f| Fault::parse(f.trim()))
        .ok_or_else(|| fail(format!("not a testdev artifact (header `{header}`)")))?;
    let so = &bytes[nl + 1..];
    let h = so.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    });
    // Beside the artifact, named by content: a loaded object is never replaced under
    // its loader, and each writer publishes a complete file of its own by rename.
    let dir = artifact.path.parent().unwrap_or(Path::new("."));
    let path = dir.join(format!("testdev-{h:016x}.so"));
    if !path.exists() {
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(e.to_string()))?;
        tmp.write_all(so).map_err(|e| fail(e.to_string()))?;
        tmp.persist(&path).map_err(|e| fail(e.to_string()))?;
    }
    Ok((fault, path))
}

impl Device for TestDevice {
    fn kind(&self) -> TargetKind {
        TargetKind::new(KIND)
    }

    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        let mut s = self.lock();
        let id = s.arena.alloc(nbytes)?;
        s.counters.allocs += 1;
        s.publish();
        Ok(id)
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        let mut s = self.lock();
        s.arena.free(buffer)?;
        s.counters.frees += 1;
        s.publish();
        Ok(())
    }

    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        let mut s = self.lock();
        s.arena.copy_from_host(dst, offset, src)?;
        s.counters.copies_in += 1;
        s.counters.bytes_in += src.len() as u64;
        s.publish();
        Ok(())
    }

    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let mut s = self.lock();
        s.arena.copy_to_host(src, offset, dst)?;
        s.counters.copies_out += 1;
        s.counters.bytes_out += dst.len() as u64;
        s.publish();
        Ok(())
    }

    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let mut s = self.lock();
        s.arena.copy_on_device(src, dst, nbytes)?;
        s.counters.copies_on_device += 1;
        s.publish();
        Ok(())
    }

    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        self.name.check_kind(artifact, &self.kind())?;
        let (fault, so) = unpack(artifact)?;
        // The kernel inside is a host shared object with the CPU's calling convention.
        let host = Artifact {
            device: TargetKind::CPU,
            path: so.clone(),
            source_path: so,
            entry: tessera_backends::cpu::entry_symbol(&artifact.entry),
            params: artifact.params.clone(),
            launch: None,
        };
        let module = Module::load(&host).map_err(|e| fail(e.to_string()))?;
        let mut s = self.lock();
        let id = s.modules.insert(Arc::new(Kernel {
            module: Arc::new(module),
            fault,
        }));
        s.counters.modules += 1;
        s.publish();
        Ok(ModuleId(id))
    }

    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let mut s = self.lock();
        let k = s.modules.get(&self.name, module.0)?.clone();
        if tessera_backends::cpu::entry_symbol(name) != k.module.entry() {
            return Err(self
                .name
                .failed(format!("module {} has no function `{name}`", module.0)));
        }
        Ok(FunctionId(s.functions.insert(k)))
    }

    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        let mut s = self.lock();
        let k = s.functions.get(&self.name, function.0)?.clone();
        if dims.is_some() {
            let entry = k.module.entry();
            return Err(self
                .name
                .bad_launch(entry, "testdev kernels take no launch dimensions"));
        }
        match k.fault {
            Fault::Hang => loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            },
            Fault::Crash => std::process::abort(),
            Fault::None | Fault::Wrong => {}
        }
        let bufs = s.arena.raw_args(args)?;
        // SAFETY: every pointer is a live buffer of this device's arena with its true
        // size, 64-byte aligned; the lock keeps them alive and untouched during the call.
        unsafe { k.module.call_sized(&bufs) }.map_err(|e| fail(e.to_string()))?;
        if k.fault == Fault::Wrong {
            if let Some(out) = args.last() {
                let b = s.arena.bytes_mut(*out)?;
                if let Some(first) = b.first_mut() {
                    *first ^= 0x5a;
                }
                for x in b.iter_mut().skip(1).step_by(7) {
                    *x = x.wrapping_add(0x40);
                }
            }
        }
        s.counters.launches += 1;
        s.publish();
        Ok(())
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }
}

export_plugin!(TestDev {
    builds: AtomicU64::new(0)
});
