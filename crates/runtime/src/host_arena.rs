//! [`HostArena`]: device memory kept in host allocations, for devices that compute on
//! the host (the CPU device, or a plugin's device emulated on the host): buffers behind
//! handles, bounds-checked copies, and the (pointer, size) pairs a host kernel's launch
//! passes to [`Module::call_sized`](crate::Module::call_sized). Not synchronized: a
//! device keeps it behind its own lock.

use crate::device::{copy_range, BufferId, DeviceError};
use crate::ndarray::NDArray;
use std::collections::HashMap;
use std::ffi::c_void;
use tessera_ir::DataType;

/// Buffers of one device, in host memory (64-byte aligned, zeroed when allocated).
#[derive(Debug)]
pub struct HostArena {
    device: String,
    next: u64,
    buffers: HashMap<u64, NDArray>,
}

impl HostArena {
    /// An empty arena of the device named `device` (its errors say that name).
    pub fn new(device: impl Into<String>) -> HostArena {
        HostArena {
            device: device.into(),
            next: 0,
            buffers: HashMap::new(),
        }
    }

    fn unknown(&self, id: BufferId) -> DeviceError {
        DeviceError::UnknownHandle {
            device: self.device.clone(),
            what: "buffer",
            id: id.0,
        }
    }

    /// `offset..offset + len` inside buffer `id` of `size` bytes.
    fn range(
        &self,
        id: BufferId,
        offset: usize,
        len: usize,
        size: usize,
    ) -> Result<std::ops::Range<usize>, DeviceError> {
        copy_range(&self.device, id, offset, len, size)
    }

    fn get(&self, id: BufferId) -> Result<&NDArray, DeviceError> {
        self.buffers.get(&id.0).ok_or_else(|| self.unknown(id))
    }

    /// The bytes of buffer `id`.
    pub fn bytes_mut(&mut self, id: BufferId) -> Result<&mut [u8], DeviceError> {
        let e = self.unknown(id);
        self.buffers
            .get_mut(&id.0)
            .map(NDArray::as_bytes_mut)
            .ok_or(e)
    }

    pub fn alloc(&mut self, nbytes: usize) -> Result<BufferId, DeviceError> {
        let a = NDArray::zeros(DataType::uint(8), &[nbytes]).map_err(|source| {
            DeviceError::Runtime {
                device: self.device.clone(),
                source,
            }
        })?;
        self.next += 1;
        self.buffers.insert(self.next, a);
        Ok(BufferId(self.next))
    }

    pub fn free(&mut self, id: BufferId) -> Result<(), DeviceError> {
        let e = self.unknown(id);
        self.buffers.remove(&id.0).map(drop).ok_or(e)
    }

    pub fn copy_from_host(
        &mut self,
        dst: BufferId,
        offset: usize,
        src: &[u8],
    ) -> Result<(), DeviceError> {
        let r = self.range(dst, offset, src.len(), self.get(dst)?.nbytes())?;
        self.bytes_mut(dst)?[r].copy_from_slice(src);
        Ok(())
    }

    pub fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let b = self.get(src)?;
        let r = self.range(src, offset, dst.len(), b.nbytes())?;
        dst.copy_from_slice(&b.as_bytes()[r]);
        Ok(())
    }

    pub fn copy_on_device(
        &mut self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let from = self.range(src, 0, nbytes, self.get(src)?.nbytes())?;
        let to = self.range(dst, 0, nbytes, self.get(dst)?.nbytes())?;
        if src == dst {
            return Ok(());
        }
        let bytes = self.get(src)?.as_bytes()[from].to_vec();
        self.bytes_mut(dst)?[to].copy_from_slice(&bytes);
        Ok(())
    }

    /// The data pointer and size of each buffer, for a host kernel's launch. The
    /// pointers stay valid while the arena is borrowed and none of them is freed.
    pub fn raw_args(
        &mut self,
        args: &[BufferId],
    ) -> Result<Vec<(*mut c_void, usize)>, DeviceError> {
        args.iter()
            .map(|&b| {
                let e = self.unknown(b);
                let a = self.buffers.get_mut(&b.0).ok_or(e)?;
                Ok((a.as_mut_ptr(), a.nbytes()))
            })
            .collect()
    }
}
