//! [`CpuDevice`]: the host CPU as a [`Device`]. Buffers are 64-byte-aligned host
//! allocations (a [`HostArena`]), modules are the CPU backend's shared objects ([`Module`]), a launch is a
//! direct call of the kernel's entry point, synchronization is a no-op.

use crate::device::{BufferId, Device, DeviceError, FunctionId, ModuleId};
use crate::error::RuntimeError;
use crate::host_arena::HostArena;
use crate::module::Module;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_target::{Artifact, LaunchDims, TargetKind};

/// The host CPU.
#[derive(Default)]
pub struct CpuDevice {
    state: Mutex<State>,
}

struct State {
    next: u64,
    arena: HostArena,
    modules: HashMap<u64, Arc<Module>>,
    functions: HashMap<u64, Arc<Module>>,
}

impl Default for State {
    fn default() -> State {
        State {
            next: 0,
            arena: HostArena::new(NAME),
            modules: HashMap::new(),
            functions: HashMap::new(),
        }
    }
}

impl State {
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

const NAME: &str = "cpu";

fn unknown(what: &'static str, id: u64) -> DeviceError {
    DeviceError::UnknownHandle {
        device: NAME.into(),
        what,
        id,
    }
}

impl CpuDevice {
    pub fn new() -> CpuDevice {
        CpuDevice::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Device for CpuDevice {
    fn kind(&self) -> TargetKind {
        TargetKind::CPU
    }

    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        self.lock().arena.alloc(nbytes)
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        self.lock().arena.free(buffer)
    }

    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        self.lock().arena.copy_from_host(dst, offset, src)
    }

    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        self.lock().arena.copy_to_host(src, offset, dst)
    }

    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        self.lock().arena.copy_on_device(src, dst, nbytes)
    }

    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        if !artifact.device.is_cpu() {
            return Err(DeviceError::WrongKind {
                device: NAME.into(),
                entry: artifact.entry.clone(),
                artifact_kind: artifact.device.clone(),
            });
        }
        let m = Module::load(artifact).map_err(|source| DeviceError::Runtime {
            device: NAME.into(),
            source,
        })?;
        let mut s = self.lock();
        let id = s.fresh();
        s.modules.insert(id, Arc::new(m));
        Ok(ModuleId(id))
    }

    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let mut s = self.lock();
        let m = s
            .modules
            .get(&module.0)
            .cloned()
            .ok_or_else(|| unknown("module", module.0))?;
        if m.entry() != name {
            return Err(DeviceError::Failed {
                device: NAME.into(),
                message: format!(
                    "module {} has no function `{name}` (it has `{}`)",
                    module.0,
                    m.entry()
                ),
            });
        }
        let id = s.fresh();
        s.functions.insert(id, m);
        Ok(FunctionId(id))
    }

    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        // The lock is held through the call: no buffer can be freed under a kernel.
        let mut s = self.lock();
        let m = s
            .functions
            .get(&function.0)
            .cloned()
            .ok_or_else(|| unknown("function", function.0))?;
        let bad = |reason: String| DeviceError::BadLaunch {
            device: NAME.into(),
            function: m.entry().to_string(),
            reason,
        };
        if dims.is_some() {
            return Err(bad("host kernels take no launch dimensions".into()));
        }
        let bufs = s.arena.raw_args(args)?;
        // SAFETY: each pointer is a live buffer of this device with its true size,
        // 64-byte aligned; the lock keeps every buffer alive and unaliased by other
        // callers during the call. Two arguments may name the same buffer only as inputs
        // (the graph executor reads one value twice), which the kernel only reads.
        unsafe { m.call_sized(&bufs) }.map_err(|e| match e {
            RuntimeError::ArgCount { .. }
            | RuntimeError::BufferTooSmall { .. }
            | RuntimeError::Aliased { .. } => bad(e.to_string()),
            source => DeviceError::Runtime {
                device: NAME.into(),
                source,
            },
        })
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }
}
