//! The simulated DRAM the accelerator reads and writes: one byte space with allocations
//! at page-aligned physical addresses (a page holds a whole number of elements of every
//! buffer, so any allocation's base is an element address for each of them). Every
//! access must lie inside one allocation: an instruction stream that reads past a tensor
//! is an error, not silently wrong data.

use crate::error::VtaError;
use std::collections::BTreeMap;

/// Alignment of every allocation (and the first address: 0 is never handed out).
pub const PAGE: u64 = 4096;

/// Simulated DRAM.
#[derive(Debug)]
pub struct Dram {
    bytes: Vec<u8>,
    /// Base address → length of each allocation.
    allocs: BTreeMap<u64, usize>,
    capacity: usize,
}

impl Dram {
    /// DRAM of at most `capacity` bytes: reserved at once (the pages are touched only
    /// as allocations use them), so that the memory never moves and the board's CPU
    /// can compute on it through pointers ([`Dram::host_ptr`]).
    pub fn new(capacity: usize) -> Dram {
        Dram {
            bytes: Vec::with_capacity(capacity),
            allocs: BTreeMap::new(),
            capacity,
        }
    }

    /// Allocates `nbytes` (zeroed), returning its physical address.
    pub fn alloc(&mut self, nbytes: usize) -> Result<u64, VtaError> {
        let need = (nbytes.max(1) as u64).div_ceil(PAGE) * PAGE;
        let mut at = PAGE;
        for (&base, &len) in &self.allocs {
            if base >= at + need {
                break;
            }
            at = (base + len as u64).div_ceil(PAGE) * PAGE;
        }
        let end = at + need;
        if end > self.capacity as u64 {
            let used: usize = self.allocs.values().sum();
            return Err(VtaError::OutOfDram {
                asked: nbytes,
                free: self.capacity.saturating_sub(used),
            });
        }
        if self.bytes.len() < end as usize {
            self.bytes.resize(end as usize, 0);
        }
        self.bytes[at as usize..at as usize + nbytes].fill(0);
        self.allocs.insert(at, nbytes);
        Ok(at)
    }

    /// Frees the allocation at `addr`; false when there is none.
    pub fn free(&mut self, addr: u64) -> bool {
        self.allocs.remove(&addr).is_some()
    }

    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, VtaError> {
        let bad = VtaError::Dram { addr, len };
        let (&base, &size) = self.allocs.range(..=addr).next_back().ok_or(bad.clone())?;
        if addr + len as u64 > base + size as u64 {
            return Err(bad);
        }
        Ok(addr as usize..addr as usize + len)
    }

    /// A pointer to the `len` bytes at `addr`, for a kernel of the board's CPU; valid
    /// until the allocation is freed (the DRAM never moves).
    pub fn host_ptr(&mut self, addr: u64, len: usize) -> Result<*mut u8, VtaError> {
        let r = self.range(addr, len)?;
        Ok(self.bytes[r].as_mut_ptr())
    }

    /// `len` bytes at `addr`.
    pub fn read(&self, addr: u64, len: usize) -> Result<&[u8], VtaError> {
        let r = self.range(addr, len)?;
        Ok(&self.bytes[r])
    }

    /// Writes `data` at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), VtaError> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}
