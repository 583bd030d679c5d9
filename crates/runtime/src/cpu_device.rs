//! [`CpuDevice`]: the host CPU as a [`Device`]. Buffers are 64-byte-aligned host
//! allocations (a [`HostArena`]), modules are the CPU backend's shared objects ([`Module`]), a launch is a
//! direct call of the kernel's entry point, synchronization is a no-op; a launch
//! sequence is a replay list ([`RecordedSequences`]).

use crate::device::{BufferId, Device, DeviceError, FunctionId, ModuleId};
use crate::error::RuntimeError;
use crate::handles::{DeviceName, Handles};
use crate::host_arena::HostArena;
use crate::module::Module;
use crate::sequence::{LaunchStep, RecordedSequences, SequenceId};
use std::sync::{Arc, Mutex};
use tessera_target::{Artifact, LaunchDims, TargetKind};

/// The host CPU.
pub struct CpuDevice {
    name: DeviceName,
    state: Mutex<State>,
    sequences: RecordedSequences,
}

struct State {
    arena: HostArena,
    modules: Handles<Arc<Module>>,
    functions: Handles<Arc<Module>>,
}

const NAME: &str = "cpu";

impl Default for CpuDevice {
    fn default() -> CpuDevice {
        CpuDevice {
            name: DeviceName::new(NAME),
            state: Mutex::new(State {
                arena: HostArena::new(NAME),
                modules: Handles::new("module"),
                functions: Handles::new("function"),
            }),
            sequences: RecordedSequences::default(),
        }
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

    fn copy_between(
        &self,
        src: BufferId,
        src_offset: usize,
        dst: BufferId,
        dst_offset: usize,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        self.lock()
            .arena
            .copy_between(src, src_offset, dst, dst_offset, nbytes)
    }

    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        self.name.check_kind(artifact, &TargetKind::CPU)?;
        let m = Module::load(artifact).map_err(|source| DeviceError::Runtime {
            device: NAME.into(),
            source,
        })?;
        Ok(ModuleId(self.lock().modules.insert(Arc::new(m))))
    }

    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let mut s = self.lock();
        let m = s.modules.get(&self.name, module.0)?.clone();
        if m.entry() != name {
            return Err(self.name.failed(format!(
                "module {} has no function `{name}` (it has `{}`)",
                module.0,
                m.entry()
            )));
        }
        Ok(FunctionId(s.functions.insert(m)))
    }

    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        // The lock is held through the call: no buffer can be freed under a kernel.
        let mut s = self.lock();
        let m = s.functions.get(&self.name, function.0)?.clone();
        let bad = |reason: String| self.name.bad_launch(m.entry(), reason);
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

    /// `cpu:` and the processor's model name (Linux's `/proc/cpuinfo`), where known.
    fn describe(&self) -> String {
        static MODEL: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let model = MODEL.get_or_init(|| {
            let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
            let line = info.lines().find(|l| l.starts_with("model name"))?;
            Some(line.split_once(':')?.1.trim().to_string())
        });
        match model {
            Some(m) => format!("{NAME}:{m}"),
            None => NAME.to_string(),
        }
    }

    fn record_sequence(&self, steps: &[LaunchStep]) -> Result<Option<SequenceId>, DeviceError> {
        let s = self.lock();
        let known = |f: FunctionId| s.functions.find(f.0).is_some();
        self.sequences.record(&self.name, steps, known).map(Some)
    }

    fn run_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        self.sequences.replay(&self.name, self, sequence)
    }

    fn free_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        self.sequences.free(&self.name, sequence)
    }
}
