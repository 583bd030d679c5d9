//! Token-ordering checks, stronger than TVM's simulator (whose arbitrary module order
//! can hide a race): every instruction carries a vector clock — for each module, the
//! last of its instructions known to have finished, learned through the tokens popped —
//! and every buffer element remembers its last writer and its last reader per module.
//! An access that conflicts with another module's access not ordered before it by
//! tokens is a hazard, named with both instructions.

use crate::error::VtaError;
use crate::isa::Module;

/// The instruction touching an element: its module, its position in that module's
/// stream (1-based) and in the whole program.
#[derive(Clone, Copy, Debug)]
pub struct Stamp {
    pub module: Module,
    pub seq: u32,
    pub index: usize,
    /// For each module, its last instruction known finished.
    pub clock: [u32; 3],
}

impl Stamp {
    /// Whether the instruction `(module, seq)` is ordered before this one.
    fn after(&self, module: Module, seq: u32) -> bool {
        if module == self.module {
            seq <= self.seq
        } else {
            self.clock[module as usize] >= seq
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Last {
    /// (module, seq, program index) of the last write.
    write: Option<(Module, u32, usize)>,
    /// Per module: (seq, program index) of its last read.
    read: [Option<(u32, usize)>; 3],
}

/// The per-element history of one buffer.
#[derive(Debug)]
pub struct Tracker {
    name: &'static str,
    last: Vec<Last>,
}

const MODULES: [Module; 3] = [Module::Load, Module::Compute, Module::Store];

impl Tracker {
    pub fn new(name: &'static str, depth: usize) -> Tracker {
        Tracker {
            name,
            last: vec![Last::default(); depth],
        }
    }

    fn hazard(&self, kind: &str, at: &Stamp, elem: usize, other: usize) -> VtaError {
        VtaError::Hazard(format!(
            "{kind} on {} element {elem}: instruction {} ({}) is not ordered after \
             instruction {other} by any token",
            self.name,
            at.index,
            at.module.name()
        ))
    }

    /// Records a read of `elem`; a write by another module not ordered before it is a
    /// read-after-write hazard.
    pub fn read(&mut self, elem: usize, at: &Stamp) -> Result<(), VtaError> {
        let l = &mut self.last[elem];
        if let Some((m, seq, index)) = l.write {
            if !at.after(m, seq) {
                return Err(self.hazard("read-after-write", at, elem, index));
            }
        }
        l.read[at.module as usize] = Some((at.seq, at.index));
        Ok(())
    }

    /// Records a write of `elem`; an earlier write or read by another module not ordered
    /// before it is a write-after-write or write-after-read hazard.
    pub fn write(&mut self, elem: usize, at: &Stamp) -> Result<(), VtaError> {
        let l = self.last[elem];
        if let Some((m, seq, index)) = l.write {
            if !at.after(m, seq) {
                return Err(self.hazard("write-after-write", at, elem, index));
            }
        }
        for m in MODULES {
            if let Some((seq, index)) = l.read[m as usize] {
                if !at.after(m, seq) {
                    return Err(self.hazard("write-after-read", at, elem, index));
                }
            }
        }
        self.last[elem].write = Some((at.module, at.seq, at.index));
        Ok(())
    }
}
