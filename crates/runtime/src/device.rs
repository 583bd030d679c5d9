//! The [`Device`] trait: what the runtime, the graph executor and measurement ask of any
//! device (TVM's `DeviceAPI` with its module loading and time evaluator), and
//! [`DeviceArray`], an array that lives on one.
//!
//! A device owns its memory and its loaded modules; callers hold opaque handles
//! ([`BufferId`], [`ModuleId`], [`FunctionId`]). Data moves between the host and a device
//! only when a caller asks ([`Device::copy_from_host`], [`Device::copy_to_host`]), so a
//! network's weights are uploaded once and its intermediates never leave the device.
//! The built-in implementation is [`CpuDevice`](crate::cpu_device::CpuDevice); a backend
//! plugin implements the same trait on its side of the plugin boundary, and the core
//! reaches it through the same trait (`tessera_plugin::PluginDevice`).

use crate::error::RuntimeError;
use crate::ndarray::NDArray;
use crate::sequence::{LaunchStep, SequenceId};
use crate::timer::{TimeEvaluator, TimeResult};
use std::sync::Arc;
use tessera_ir::DataType;
use tessera_target::{Artifact, LaunchDims, ParamSpec, TargetKind};

/// A buffer of device memory, as the device that allocated it names it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct BufferId(pub u64);

/// A loaded module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModuleId(pub u64);

/// A function of a loaded module, ready to launch.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct FunctionId(pub u64);

/// The counters a device keeps of its own work since it was opened (a simulator's
/// cycles, bytes moved and operations, as TVM's `simulator.stats()`), by name in the
/// device's order. Two readings' [`difference`](DeviceCounters::since) is what ran
/// between them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceCounters(pub Vec<(String, u64)>);

impl DeviceCounters {
    /// Whether the device keeps no counters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What was counted since `earlier` (a reading of the same device): each counter's
    /// growth, counters `earlier` did not have counted from zero.
    pub fn since(&self, earlier: &DeviceCounters) -> DeviceCounters {
        let before = |name: &str| {
            earlier
                .0
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, v)| *v)
        };
        DeviceCounters(
            self.0
                .iter()
                .map(|(n, v)| (n.clone(), v.saturating_sub(before(n))))
                .collect(),
        )
    }
}

/// Why a device operation failed. Every variant names the device.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A handle the device never gave out, or one already freed.
    #[error("{device}: no {what} with handle {id}")]
    UnknownHandle {
        device: String,
        what: &'static str,
        id: u64,
    },
    /// A copy that would read or write past a buffer's end.
    #[error(
        "{device}: a copy of {len} bytes at offset {offset} overruns buffer {id} of {size} bytes"
    )]
    OutOfBounds {
        device: String,
        id: u64,
        offset: usize,
        len: usize,
        size: usize,
    },
    /// An artifact built for another kind of device.
    #[error("{device}: cannot load `{entry}`, which was built for `{artifact_kind}`")]
    WrongKind {
        device: String,
        entry: String,
        artifact_kind: TargetKind,
    },
    /// A launch whose arguments do not fit the function's parameters.
    #[error("{device}: `{function}`: {reason}")]
    BadLaunch {
        device: String,
        function: String,
        reason: String,
    },
    /// A runtime error of the host (loading a shared object, a kernel's status).
    #[error("{device}: {source}")]
    Runtime {
        device: String,
        #[source]
        source: RuntimeError,
    },
    /// Anything else the device reports, e.g. a plugin device's own error text.
    #[error("{device}: {message}")]
    Failed { device: String, message: String },
}

/// The byte range `offset..offset + len` of a copy into or out of buffer `id` of `size`
/// bytes on `device`, or the `OutOfBounds` error every device gives for it.
pub fn copy_range(
    device: &str,
    id: BufferId,
    offset: usize,
    len: usize,
    size: usize,
) -> Result<std::ops::Range<usize>, DeviceError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(offset..end),
        _ => Err(DeviceError::OutOfBounds {
            device: device.to_string(),
            id: id.0,
            offset,
            len,
            size,
        }),
    }
}

/// The device-side handles of a launch's buffers, checked against the parameters of the
/// function `entry` the way every device checks them: one buffer per parameter, each at
/// least as large as its parameter. `lookup` gives a buffer's handle and size (`None`:
/// a handle the device never gave out).
pub fn launch_args<T>(
    device: &str,
    entry: &str,
    params: &[ParamSpec],
    args: &[BufferId],
    lookup: impl Fn(BufferId) -> Option<(T, usize)>,
) -> Result<Vec<T>, DeviceError> {
    let bad = |reason: String| DeviceError::BadLaunch {
        device: device.to_string(),
        function: entry.to_string(),
        reason,
    };
    if args.len() != params.len() {
        return Err(bad(format!(
            "{} arguments for {} parameters",
            args.len(),
            params.len()
        )));
    }
    let mut handles = Vec::with_capacity(args.len());
    for (a, p) in args.iter().zip(params) {
        let (h, size) = lookup(*a).ok_or_else(|| DeviceError::UnknownHandle {
            device: device.to_string(),
            what: "buffer",
            id: a.0,
        })?;
        let need = p.nbytes().unwrap_or(usize::MAX);
        if size < need {
            return Err(bad(format!(
                "parameter `{}` needs {need} bytes, buffer {} has {size}",
                p.name, a.0
            )));
        }
        handles.push(h);
    }
    Ok(handles)
}

/// A device: memory, modules and kernel launches, TVM's `DeviceAPI` in spirit.
///
/// Every method takes `&self`: a device is shared (`Arc<dyn Device>`) by the arrays and
/// modules that live on it, and synchronizes internally.
pub trait Device: Send + Sync {
    /// The kind of target whose artifacts this device loads.
    fn kind(&self) -> TargetKind;
    /// Allocates `nbytes` of device memory (contents unspecified).
    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError>;
    /// Frees a buffer; its handle is invalid afterwards.
    fn free(&self, buffer: BufferId) -> Result<(), DeviceError>;
    /// Copies `src` into `dst` at byte `offset`.
    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError>;
    /// Copies `dst.len()` bytes of `src` from byte `offset` into `dst`.
    fn copy_to_host(&self, src: BufferId, offset: usize, dst: &mut [u8])
        -> Result<(), DeviceError>;
    /// Copies the first `nbytes` of `src` to the start of `dst`, on the device.
    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError>;
    /// Copies `nbytes` of `src` from byte `src_offset` to `dst` at byte `dst_offset`, on
    /// the device: by way of the host where a device has no copy of its own (a runtime
    /// size's output fed back as an input, a decoder's cache, uses it every step).
    fn copy_between(
        &self,
        src: BufferId,
        src_offset: usize,
        dst: BufferId,
        dst_offset: usize,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        let mut bytes = vec![0u8; nbytes];
        self.copy_to_host(src, src_offset, &mut bytes)?;
        self.copy_from_host(dst, dst_offset, &bytes)
    }
    /// Loads a built artifact (its file is read on this machine).
    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError>;
    /// Looks up a function of a loaded module by its entry name.
    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError>;
    /// Launches `function` on `args` (one buffer per parameter, in order). GPU kernels
    /// take their launch dimensions; host kernels none. The launch may be asynchronous:
    /// [`synchronize`](Self::synchronize) waits for it.
    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError>;
    /// Waits for every launch and copy issued so far.
    fn synchronize(&self) -> Result<(), DeviceError>;
    /// Times `function` with the time evaluator's semantics (`number`, `repeat`,
    /// `min_repeat_ms`, one untimed warm-up call). The default times launch +
    /// synchronize with the host clock; a device with its own timer (CUDA events,
    /// OpenCL profiling) overrides it.
    fn time(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        evaluator.evaluate(|| {
            self.launch(function, args, dims)?;
            self.synchronize()
        })
    }
    /// Records `steps` as one sequence that [`run_sequence`](Self::run_sequence)
    /// replays (a CUDA graph: one submission for a whole network). `Ok(None)`: this
    /// device keeps no sequences, and the caller launches the steps one by one.
    fn record_sequence(&self, steps: &[LaunchStep]) -> Result<Option<SequenceId>, DeviceError> {
        let _ = steps;
        Ok(None)
    }
    /// Launches a recorded sequence's steps in order, asynchronously like `launch`.
    fn run_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        Err(self.no_sequences(sequence))
    }
    /// Forgets a recorded sequence.
    fn free_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        Err(self.no_sequences(sequence))
    }
    /// Runs `steps` once, in order, and returns each step's seconds as it ran among the
    /// others. A GPU measures on its own clock without waiting between steps (CUDA
    /// events); the default launches and waits for each step on the host's clock.
    fn time_steps(&self, steps: &[LaunchStep]) -> Result<Vec<f64>, DeviceError> {
        steps
            .iter()
            .map(|s| {
                let start = std::time::Instant::now();
                self.launch(s.function, &s.args, s.dims.as_ref())?;
                self.synchronize()?;
                Ok(start.elapsed().as_secs_f64())
            })
            .collect()
    }
    /// The error of a sequence call on a device that keeps none.
    fn no_sequences(&self, sequence: SequenceId) -> DeviceError {
        DeviceError::UnknownHandle {
            device: self.kind().to_string(),
            what: "launch sequence (this device keeps none)",
            id: sequence.0,
        }
    }
    /// The device's name as a user would know it (`cuda:NVIDIA H200 (sm_90)`,
    /// `opencl:NVIDIA H200 (NVIDIA CUDA)`); its kind by default.
    fn describe(&self) -> String {
        self.kind().to_string()
    }
    /// Whether the device computes on the host's own cores (the CPU, OpenCL on a CPU,
    /// a simulator): then nothing else should run on them while it is timed, and the
    /// tuner builds the next candidates only between measurements. True by default; a
    /// device of its own (a GPU) says false.
    fn runs_on_host_cores(&self) -> bool {
        true
    }
    /// The counters the device keeps of its own work ([`DeviceCounters`]); none by
    /// default.
    fn counters(&self) -> Result<DeviceCounters, DeviceError> {
        Ok(DeviceCounters::default())
    }
}

/// A dense array in a device's memory: the device-side twin of [`NDArray`]. It is
/// freed when dropped; data crosses to and from the host only through its copy methods.
pub struct DeviceArray {
    device: Arc<dyn Device>,
    buffer: BufferId,
    dtype: DataType,
    shape: Vec<usize>,
    nbytes: usize,
}

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("device", &self.device.kind())
            .field("buffer", &self.buffer)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .finish()
    }
}

impl DeviceArray {
    /// An array of `dtype` and `shape` on `device`, contents unspecified.
    pub fn empty(
        device: &Arc<dyn Device>,
        dtype: DataType,
        shape: &[usize],
    ) -> Result<DeviceArray, DeviceError> {
        // The host array's size rules (dtype support, overflow) apply on devices too.
        let nbytes = NDArray::byte_size(dtype, shape).map_err(|source| DeviceError::Runtime {
            device: device.kind().to_string(),
            source,
        })?;
        let buffer = device.alloc(nbytes)?;
        Ok(DeviceArray {
            device: Arc::clone(device),
            buffer,
            dtype,
            shape: shape.to_vec(),
            nbytes,
        })
    }

    /// A copy of `host` on `device` (one host-to-device copy).
    pub fn from_host(device: &Arc<dyn Device>, host: &NDArray) -> Result<DeviceArray, DeviceError> {
        let a = DeviceArray::empty(device, host.dtype(), host.shape())?;
        a.device.copy_from_host(a.buffer, 0, host.as_bytes())?;
        Ok(a)
    }

    /// Overwrites the array with `host`, which must have its dtype and shape.
    pub fn copy_from_host(&self, host: &NDArray) -> Result<(), DeviceError> {
        if host.dtype() != self.dtype || host.shape() != self.shape.as_slice() {
            return Err(DeviceError::Failed {
                device: self.device.kind().to_string(),
                message: format!(
                    "copying a {} array of shape {:?} into a {} array of shape {:?}",
                    host.dtype(),
                    host.shape(),
                    self.dtype,
                    self.shape
                ),
            });
        }
        self.device.copy_from_host(self.buffer, 0, host.as_bytes())
    }

    /// A host copy of the array (one device-to-host copy).
    pub fn to_host(&self) -> Result<NDArray, DeviceError> {
        let mut out =
            NDArray::zeros(self.dtype, &self.shape).map_err(|source| DeviceError::Runtime {
                device: self.device.kind().to_string(),
                source,
            })?;
        self.device
            .copy_to_host(self.buffer, 0, out.as_bytes_mut())?;
        Ok(out)
    }

    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    pub fn buffer(&self) -> BufferId {
        self.buffer
    }
    pub fn dtype(&self) -> DataType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }
}

impl Drop for DeviceArray {
    fn drop(&mut self) {
        // A failed free (a device already gone) leaks device memory, nothing worse.
        let _ = self.device.free(self.buffer);
    }
}
