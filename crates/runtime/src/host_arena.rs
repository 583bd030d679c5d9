//! [`HostArena`]: device memory kept in host allocations, for devices that compute on
//! the host (the CPU device, or a plugin's device emulated on the host): buffers behind
//! handles, bounds-checked copies, and the (pointer, size) pairs a host kernel's launch
//! passes to [`Module::call_sized`](crate::Module::call_sized). Not synchronized: a
//! device keeps it behind its own lock.

use crate::device::{copy_range, BufferId, DeviceError};
use crate::handles::{DeviceName, Handles};
use crate::ndarray::NDArray;
use std::ffi::c_void;
use tessera_ir::DataType;

/// Buffers of one device, in host memory (64-byte aligned, zeroed when allocated).
#[derive(Debug)]
pub struct HostArena {
    device: DeviceName,
    buffers: Handles<NDArray>,
}

impl HostArena {
    /// An empty arena of the device named `device` (its errors say that name).
    pub fn new(device: impl Into<String>) -> HostArena {
        HostArena {
            device: DeviceName::new(device),
            buffers: Handles::new("buffer"),
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
        copy_range(self.device.as_str(), id, offset, len, size)
    }

    fn get(&self, id: BufferId) -> Result<&NDArray, DeviceError> {
        self.buffers.get(&self.device, id.0)
    }

    /// The bytes of buffer `id`.
    pub fn bytes_mut(&mut self, id: BufferId) -> Result<&mut [u8], DeviceError> {
        self.buffers
            .get_mut(&self.device, id.0)
            .map(NDArray::as_bytes_mut)
    }

    pub fn alloc(&mut self, nbytes: usize) -> Result<BufferId, DeviceError> {
        let a = NDArray::zeros(DataType::uint(8), &[nbytes]).map_err(|source| {
            DeviceError::Runtime {
                device: self.device.to_string(),
                source,
            }
        })?;
        Ok(BufferId(self.buffers.insert(a)))
    }

    pub fn free(&mut self, id: BufferId) -> Result<(), DeviceError> {
        self.buffers.remove(&self.device, id.0).map(drop)
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
        self.copy_between(src, 0, dst, 0, nbytes)
    }

    /// Copies `nbytes` of `src` from byte `src_offset` to `dst` at byte `dst_offset`, in
    /// one pass (no copy in between).
    pub fn copy_between(
        &mut self,
        src: BufferId,
        src_offset: usize,
        dst: BufferId,
        dst_offset: usize,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let from = self.range(src, src_offset, nbytes, self.get(src)?.nbytes())?;
        let to = self.range(dst, dst_offset, nbytes, self.get(dst)?.nbytes())?;
        if src == dst {
            self.bytes_mut(dst)?.copy_within(from, to.start);
            return Ok(());
        }
        let ptrs = self.raw_args(&[src, dst])?;
        // SAFETY: two distinct buffers of the arena, both ranges checked against their
        // sizes above; the arena is borrowed mutably for the copy, so neither moves nor
        // is freed meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (ptrs[0].0 as *const u8).add(from.start),
                (ptrs[1].0 as *mut u8).add(to.start),
                nbytes,
            );
        }
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
                let a = self.buffers.get_mut(&self.device, b.0)?;
                Ok((a.as_mut_ptr(), a.nbytes()))
            })
            .collect()
    }
}
