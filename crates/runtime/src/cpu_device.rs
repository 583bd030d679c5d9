//! [`CpuDevice`]: the host CPU as a [`Device`]. Buffers are 64-byte-aligned host
//! allocations, modules are the CPU backend's shared objects ([`Module`]), a launch is a
//! direct call of the kernel's entry point, synchronization is a no-op.

use crate::device::{BufferId, Device, DeviceError, FunctionId, ModuleId};
use crate::error::RuntimeError;
use crate::module::Module;
use crate::ndarray::NDArray;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_ir::DataType;
use tessera_target::{Artifact, LaunchDims, TargetKind};

/// The host CPU.
#[derive(Default)]
pub struct CpuDevice {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next: u64,
    buffers: HashMap<u64, NDArray>,
    modules: HashMap<u64, Arc<Module>>,
    functions: HashMap<u64, Arc<Module>>,
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

fn out_of_bounds(id: u64, offset: usize, len: usize, size: usize) -> DeviceError {
    DeviceError::OutOfBounds {
        device: NAME.into(),
        id,
        offset,
        len,
        size,
    }
}

/// `offset..offset + len` inside a buffer of `size` bytes.
fn range(
    id: u64,
    offset: usize,
    len: usize,
    size: usize,
) -> Result<std::ops::Range<usize>, DeviceError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(offset..end),
        _ => Err(out_of_bounds(id, offset, len, size)),
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
        let a = NDArray::zeros(DataType::uint(8), &[nbytes]).map_err(|source| {
            DeviceError::Runtime {
                device: NAME.into(),
                source,
            }
        })?;
        let mut s = self.lock();
        let id = s.fresh();
        s.buffers.insert(id, a);
        Ok(BufferId(id))
    }

    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        self.lock()
            .buffers
            .remove(&buffer.0)
            .map(drop)
            .ok_or_else(|| unknown("buffer", buffer.0))
    }

    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        let mut s = self.lock();
        let b = s
            .buffers
            .get_mut(&dst.0)
            .ok_or_else(|| unknown("buffer", dst.0))?;
        let r = range(dst.0, offset, src.len(), b.nbytes())?;
        b.as_bytes_mut()[r].copy_from_slice(src);
        Ok(())
    }

    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let s = self.lock();
        let b = s
            .buffers
            .get(&src.0)
            .ok_or_else(|| unknown("buffer", src.0))?;
        let r = range(src.0, offset, dst.len(), b.nbytes())?;
        dst.copy_from_slice(&b.as_bytes()[r]);
        Ok(())
    }

    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let mut s = self.lock();
        let from = s
            .buffers
            .get(&src.0)
            .ok_or_else(|| unknown("buffer", src.0))?;
        let r = range(src.0, 0, nbytes, from.nbytes())?;
        if src == dst {
            return Ok(());
        }
        let bytes = from.as_bytes()[r.clone()].to_vec();
        let to = s
            .buffers
            .get_mut(&dst.0)
            .ok_or_else(|| unknown("buffer", dst.0))?;
        let w = range(dst.0, 0, nbytes, to.nbytes())?;
        to.as_bytes_mut()[w].copy_from_slice(&bytes);
        Ok(())
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
        let mut bufs = Vec::with_capacity(args.len());
        for b in args {
            let a = s
                .buffers
                .get_mut(&b.0)
                .ok_or_else(|| unknown("buffer", b.0))?;
            bufs.push((a.as_mut_ptr(), a.nbytes()));
        }
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
