//! `tessera-runtime`: runs what a backend built, on any device.
//!
//! - [`device`]: the [`Device`] trait (memory, copies, module loading, launches,
//!   synchronization, timing) every device implements, and [`DeviceArray`].
//! - [`device_call`]: the same interface as data ([`DeviceCall`], [`answer`](device_call::answer),
//!   [`CallClient`]), the one description a plugin's ABI and a device server share.
//! - [`sequence`]: launch sequences ([`LaunchStep`], [`SequenceId`]): a run's launches
//!   recorded once and replayed as one submission (a CUDA graph), and per-step timing
//!   on the device's clock; [`RecordedSequences`], the replay list of devices without
//!   native graphs.
//! - [`cpu_device`]: [`CpuDevice`], the host CPU as a device.
//! - [`handles`]: [`Handles`] and [`DeviceName`], the base every device is written on:
//!   its handle tables and its errors.
//! - [`host_arena`]: [`HostArena`], device memory in host allocations, for devices that
//!   compute on the host (the CPU's; a plugin's emulated device).
//! - [`ndarray`]: [`NDArray`], a dense row-major host array with 64-byte-aligned data;
//!   conversions to and from the interpreter's [`HostBuffer`](tessera_ir::interp::HostBuffer),
//!   deterministic random filling, `allclose` and the NumPy `.npy` format.
//! - [`module`]: [`Module`], a CPU [`Artifact`](tessera_target::Artifact)'s shared
//!   object loaded with its entry point, called with one array per parameter after the
//!   arrays' types, shapes and distinctness are checked.
//! - [`timer`]: [`TimeEvaluator`], TVM's time evaluator (`number`, `repeat`,
//!   `min_repeat_ms`, cache flush) and its [`TimeResult`].
//! - [`runner`]: one kernel run as measurement runs it (seeded inputs, check, timing),
//!   on any device: what a runner process (`tessera runner`) executes for each job.
//! - [`error`]: [`RuntimeError`], [`NpyError`] and [`CompareError`].
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tessera_runtime::{Module, NDArray, TimeEvaluator};
//! # let artifact: tessera_target::Artifact = unimplemented!();
//! let module = Module::load(&artifact)?;
//! let f32 = tessera_ir::DataType::float32();
//! let mut a = NDArray::random_uniform(f32, &[64, 64], 0, -1.0, 1.0)?;
//! let mut b = NDArray::random_uniform(f32, &[64, 64], 1, -1.0, 1.0)?;
//! let mut c = NDArray::zeros(f32, &[64, 64])?;
//! module.call(&mut [&mut a, &mut b, &mut c])?;
//! let evaluator = TimeEvaluator { repeat: 3, min_repeat_ms: 100.0, ..Default::default() };
//! println!("{}", module.time_with(&evaluator, &mut [&mut a, &mut b, &mut c])?);
//! # Ok(())
//! # }
//! ```

pub mod cpu_device;
pub mod device;
pub mod device_call;
pub mod error;
pub mod handles;
pub mod host_arena;
pub mod module;
pub mod ndarray;
mod npy;
pub mod runner;
pub mod sequence;
pub mod timer;

pub use cpu_device::CpuDevice;
pub use device::{
    BufferId, Device, DeviceArray, DeviceCounters, DeviceError, FunctionId, ModuleId,
};
pub use device_call::{CallChannel, CallClient, DeviceAnswer, DeviceCall};
pub use error::{CompareError, NpyError, RuntimeError};
pub use handles::{DeviceName, Handles};
pub use host_arena::HostArena;
pub use module::{EntryFn, Module};
pub use ndarray::{Element, NDArray, ALIGNMENT};
pub use sequence::{LaunchStep, RecordedSequences, SequenceId};
pub use timer::{
    flush_cpu_cache, next_number, Stats, TimeEvaluator, TimeResult, CACHE_FLUSH_BYTES,
};
