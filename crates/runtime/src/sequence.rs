//! Launch sequences: a whole run's kernel launches recorded once and replayed as one
//! submission ([`Device::record_sequence`], [`Device::run_sequence`]) — on a GPU a CUDA
//! graph, so a network of 30 kernels costs one launch from the host, not 30 (TVM's
//! CUDA graph executor, `tvm.contrib.cuda_graph`) — and per-step timing of a run on the
//! device's own clock ([`Device::time_steps`]), which shows what each kernel costs
//! among the others rather than alone.
//!
//! [`RecordedSequences`] is the replay list a device without native graphs keeps: each
//! sequence's steps, launched in order through the device's own `launch`. Across a
//! boundary (a plugin, a device server) that alone saves a crossing per kernel.

use crate::device::{BufferId, Device, DeviceError, FunctionId};
use crate::handles::{DeviceName, Handles};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use tessera_target::LaunchDims;

/// A recorded sequence, as the device that recorded it names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SequenceId(pub u64);

/// One launch of a sequence: what [`Device::launch`] takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchStep {
    pub function: FunctionId,
    pub args: Vec<BufferId>,
    pub dims: Option<LaunchDims>,
}

/// The sequences of a device that replays them launch by launch.
pub struct RecordedSequences {
    table: Mutex<Handles<Vec<LaunchStep>>>,
}

impl Default for RecordedSequences {
    fn default() -> RecordedSequences {
        RecordedSequences {
            table: Mutex::new(Handles::new("launch sequence")),
        }
    }
}

impl RecordedSequences {
    fn lock(&self) -> std::sync::MutexGuard<'_, Handles<Vec<LaunchStep>>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `steps`; `known` says whether a function handle is the device's, so that a
    /// bad step is refused when recorded rather than when run.
    pub fn record(
        &self,
        name: &DeviceName,
        steps: &[LaunchStep],
        known: impl Fn(FunctionId) -> bool,
    ) -> Result<SequenceId, DeviceError> {
        if let Some(s) = steps.iter().find(|s| !known(s.function)) {
            return Err(name.unknown("function", s.function.0));
        }
        Ok(SequenceId(self.lock().insert(steps.to_vec())))
    }

    /// Launches sequence `id`'s steps on `device`, in order.
    pub fn replay(
        &self,
        name: &DeviceName,
        device: &dyn Device,
        id: SequenceId,
    ) -> Result<(), DeviceError> {
        // Cloned out so the table is not held through the launches.
        let steps = self.lock().get(name, id.0)?.clone();
        for s in &steps {
            device.launch(s.function, &s.args, s.dims.as_ref())?;
        }
        Ok(())
    }

    pub fn free(&self, name: &DeviceName, id: SequenceId) -> Result<(), DeviceError> {
        self.lock().remove(name, id.0).map(drop)
    }
}
