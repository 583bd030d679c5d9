//! The [`Device`] interface as data, one description for every boundary a device is
//! reached across: a plugin's table of devices (the stable ABI carries one entry point,
//! `device_call`) and a server's worker process (RPC frames). [`DeviceCall`] is one call,
//! [`answer`] the dispatch that runs it on the device behind the boundary, and
//! [`CallClient`] the `Device` on the caller's side that turns each method into a call
//! over a [`CallChannel`].
//!
//! A new `Device` method is a trait method (`device.rs`) and, here, one variant, one arm
//! of [`answer`] and one method of [`CallClient`].

use crate::device::{BufferId, Device, DeviceCounters, DeviceError, FunctionId, ModuleId};
use crate::handles::DeviceName;
use crate::sequence::{LaunchStep, SequenceId};
use crate::timer::{TimeEvaluator, TimeResult};
use serde::{Deserialize, Serialize};
use std::path::Path;
use tessera_target::{Artifact, LaunchDims, TargetKind};

/// One call of the `Device` interface. Data travels beside it: a copy's bytes, an
/// artifact's file where the device is on another machine, a copy to the host's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DeviceCall {
    Kind,
    Alloc {
        nbytes: usize,
    },
    Free {
        buffer: u64,
    },
    /// Input: the bytes.
    CopyFromHost {
        dst: u64,
        offset: usize,
    },
    /// Output: `len` bytes.
    CopyToHost {
        src: u64,
        offset: usize,
        len: usize,
    },
    CopyOnDevice {
        src: u64,
        dst: u64,
        nbytes: usize,
    },
    /// Input: the artifact's file when it is shipped (the paths are then the answering
    /// side's to choose); empty where the artifact's own path is readable.
    LoadModule {
        artifact: Artifact,
    },
    GetFunction {
        module: u64,
        name: String,
    },
    Launch {
        function: u64,
        args: Vec<u64>,
        dims: Option<LaunchDims>,
    },
    Synchronize,
    Time {
        function: u64,
        args: Vec<u64>,
        dims: Option<LaunchDims>,
        evaluator: TimeEvaluator,
    },
    Counters,
    RecordSequence {
        steps: Vec<LaunchStep>,
    },
    RunSequence {
        sequence: u64,
    },
    FreeSequence {
        sequence: u64,
    },
    TimeSteps {
        steps: Vec<LaunchStep>,
    },
    Describe,
    RunsOnHostCores,
}

impl DeviceCall {
    /// The bytes the call writes back (a copy to the host's), for the answering side to
    /// size its output.
    pub fn output_len(&self) -> usize {
        match self {
            DeviceCall::CopyToHost { len, .. } => *len,
            _ => 0,
        }
    }
}

/// The answer to a call.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DeviceAnswer {
    /// A handle.
    Id(u64),
    /// The kind's name, for `Kind`.
    Kind(String),
    /// Done; a copy to the host has written its output.
    Done,
    Time(TimeResult),
    Counters(DeviceCounters),
    /// A recorded sequence's handle, or none (the device keeps none).
    Sequence(Option<u64>),
    /// Seconds per step, for `TimeSteps`.
    Times(Vec<f64>),
    /// The device's description, for `Describe`.
    Text(String),
    /// A yes or no, for `RunsOnHostCores`.
    Flag(bool),
    /// The device's error, as its text.
    Failed(String),
}

impl From<Result<(), DeviceError>> for DeviceAnswer {
    fn from(r: Result<(), DeviceError>) -> Self {
        match r {
            Ok(()) => DeviceAnswer::Done,
            Err(e) => DeviceAnswer::Failed(e.to_string()),
        }
    }
}

/// `r`'s value as an answer, its error as `Failed`.
fn answered<T>(r: Result<T, DeviceError>, f: impl FnOnce(T) -> DeviceAnswer) -> DeviceAnswer {
    match r {
        Ok(v) => f(v),
        Err(e) => DeviceAnswer::Failed(e.to_string()),
    }
}

fn buffers(v: &[u64]) -> Vec<BufferId> {
    v.iter().map(|&b| BufferId(b)).collect()
}

/// Runs `call` on `device` (the side behind the boundary): `input` as
/// [`DeviceCall`]'s variants say, `output` sized to [`DeviceCall::output_len`]; a
/// shipped artifact is written into `files`.
pub fn answer(
    device: &dyn Device,
    call: DeviceCall,
    input: &[u8],
    output: &mut [u8],
    files: &Path,
) -> DeviceAnswer {
    match call {
        DeviceCall::Kind => DeviceAnswer::Kind(device.kind().name().to_string()),
        DeviceCall::Alloc { nbytes } => answered(device.alloc(nbytes), |b| DeviceAnswer::Id(b.0)),
        DeviceCall::Free { buffer } => device.free(BufferId(buffer)).into(),
        DeviceCall::CopyFromHost { dst, offset } => {
            device.copy_from_host(BufferId(dst), offset, input).into()
        }
        DeviceCall::CopyToHost { src, offset, len } => {
            if output.len() != len {
                let m = format!("{} bytes of output for a copy of {len}", output.len());
                return DeviceAnswer::Failed(m);
            }
            device.copy_to_host(BufferId(src), offset, output).into()
        }
        DeviceCall::CopyOnDevice { src, dst, nbytes } => device
            .copy_on_device(BufferId(src), BufferId(dst), nbytes)
            .into(),
        DeviceCall::LoadModule { mut artifact } => {
            if !input.is_empty() {
                let name = artifact.path.file_name().unwrap_or("artifact".as_ref());
                let path = files.join(name);
                if let Err(e) = std::fs::write(&path, input) {
                    return DeviceAnswer::Failed(format!("{}: {e}", path.display()));
                }
                artifact.source_path = path.clone();
                artifact.path = path;
            }
            answered(device.load_module(&artifact), |m| DeviceAnswer::Id(m.0))
        }
        DeviceCall::GetFunction { module, name } => {
            answered(device.get_function(ModuleId(module), &name), |f| {
                DeviceAnswer::Id(f.0)
            })
        }
        DeviceCall::Launch {
            function,
            args,
            dims,
        } => device
            .launch(FunctionId(function), &buffers(&args), dims.as_ref())
            .into(),
        DeviceCall::Synchronize => device.synchronize().into(),
        DeviceCall::Time {
            function,
            args,
            dims,
            evaluator,
        } => answered(
            device.time(
                FunctionId(function),
                &buffers(&args),
                dims.as_ref(),
                &evaluator,
            ),
            DeviceAnswer::Time,
        ),
        DeviceCall::Counters => answered(device.counters(), DeviceAnswer::Counters),
        DeviceCall::RecordSequence { steps } => answered(device.record_sequence(&steps), |s| {
            DeviceAnswer::Sequence(s.map(|s| s.0))
        }),
        DeviceCall::RunSequence { sequence } => device.run_sequence(SequenceId(sequence)).into(),
        DeviceCall::FreeSequence { sequence } => device.free_sequence(SequenceId(sequence)).into(),
        DeviceCall::TimeSteps { steps } => answered(device.time_steps(&steps), DeviceAnswer::Times),
        DeviceCall::Describe => DeviceAnswer::Text(device.describe()),
        DeviceCall::RunsOnHostCores => DeviceAnswer::Flag(device.runs_on_host_cores()),
    }
}

/// How a caller's calls reach a device behind a boundary.
pub trait CallChannel: Send + Sync {
    /// Sends `call` with `input` and returns the answer (`Failed` included); a copy to
    /// the host's bytes land in `output`. An `Err` is the channel's own failure.
    fn call(
        &self,
        call: &DeviceCall,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<DeviceAnswer, DeviceError>;
    /// Whether an artifact's file travels with `LoadModule` (a device on another
    /// machine) rather than its path.
    fn ships_files(&self) -> bool;
}

/// The caller's `Device` over a [`CallChannel`]: every method one [`DeviceCall`].
pub struct CallClient<C> {
    name: DeviceName,
    kind: TargetKind,
    channel: C,
}

impl<C: CallChannel> CallClient<C> {
    /// The device `name` of `kind` behind `channel`.
    pub fn new(name: DeviceName, kind: TargetKind, channel: C) -> CallClient<C> {
        CallClient {
            name,
            kind,
            channel,
        }
    }

    pub fn name(&self) -> &DeviceName {
        &self.name
    }

    pub fn channel(&self) -> &C {
        &self.channel
    }

    fn send(
        &self,
        call: DeviceCall,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<DeviceAnswer, DeviceError> {
        match self.channel.call(&call, input, output)? {
            DeviceAnswer::Failed(m) => Err(self.name.failed(m)),
            a => Ok(a),
        }
    }

    fn done(&self, call: DeviceCall) -> Result<(), DeviceError> {
        self.send(call, &[], &mut []).map(drop)
    }

    fn id(&self, call: DeviceCall, input: &[u8]) -> Result<u64, DeviceError> {
        match self.send(call, input, &mut [])? {
            DeviceAnswer::Id(v) => Ok(v),
            other => Err(self.unexpected(other)),
        }
    }

    fn unexpected(&self, answer: DeviceAnswer) -> DeviceError {
        self.name.failed(format!("unexpected answer {answer:?}"))
    }

    /// Timings from the other side are checked like any input: one finite,
    /// non-negative time per repeat, and at least the calls per repeat asked for.
    fn checked(
        &self,
        timing: TimeResult,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        let (repeats, number) = (evaluator.repeat, evaluator.number.max(1));
        let sane = timing.results.len() == repeats
            && timing.results.iter().all(|t| t.is_finite() && *t >= 0.0)
            && timing.number >= number;
        if sane {
            return Ok(timing);
        }
        Err(self.name.failed(format!(
            "its timer returned {:?} with {} calls per repeat for {repeats} repeats of at least {number} calls",
            timing.results, timing.number
        )))
    }
}

fn ids(v: &[BufferId]) -> Vec<u64> {
    v.iter().map(|b| b.0).collect()
}

impl<C: CallChannel> Device for CallClient<C> {
    fn kind(&self) -> TargetKind {
        self.kind.clone()
    }
    fn alloc(&self, nbytes: usize) -> Result<BufferId, DeviceError> {
        self.id(DeviceCall::Alloc { nbytes }, &[]).map(BufferId)
    }
    fn free(&self, buffer: BufferId) -> Result<(), DeviceError> {
        self.done(DeviceCall::Free { buffer: buffer.0 })
    }
    fn copy_from_host(&self, dst: BufferId, offset: usize, src: &[u8]) -> Result<(), DeviceError> {
        let call = DeviceCall::CopyFromHost { dst: dst.0, offset };
        self.send(call, src, &mut []).map(drop)
    }
    fn copy_to_host(
        &self,
        src: BufferId,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), DeviceError> {
        let call = DeviceCall::CopyToHost {
            src: src.0,
            offset,
            len: dst.len(),
        };
        self.send(call, &[], dst).map(drop)
    }
    fn copy_on_device(
        &self,
        src: BufferId,
        dst: BufferId,
        nbytes: usize,
    ) -> Result<(), DeviceError> {
        self.done(DeviceCall::CopyOnDevice {
            src: src.0,
            dst: dst.0,
            nbytes,
        })
    }
    fn load_module(&self, artifact: &Artifact) -> Result<ModuleId, DeviceError> {
        self.name.check_kind(artifact, &self.kind)?;
        let file = if self.channel.ships_files() {
            std::fs::read(&artifact.path).map_err(|e| {
                self.name
                    .failed(format!("{}: {e}", artifact.path.display()))
            })?
        } else {
            Vec::new()
        };
        let call = DeviceCall::LoadModule {
            artifact: artifact.clone(),
        };
        self.id(call, &file).map(ModuleId)
    }
    fn get_function(&self, module: ModuleId, name: &str) -> Result<FunctionId, DeviceError> {
        let call = DeviceCall::GetFunction {
            module: module.0,
            name: name.to_string(),
        };
        self.id(call, &[]).map(FunctionId)
    }
    fn launch(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
    ) -> Result<(), DeviceError> {
        self.done(DeviceCall::Launch {
            function: function.0,
            args: ids(args),
            dims: dims.copied(),
        })
    }
    fn synchronize(&self) -> Result<(), DeviceError> {
        self.done(DeviceCall::Synchronize)
    }
    fn time(
        &self,
        function: FunctionId,
        args: &[BufferId],
        dims: Option<&LaunchDims>,
        evaluator: &TimeEvaluator,
    ) -> Result<TimeResult, DeviceError> {
        let call = DeviceCall::Time {
            function: function.0,
            args: ids(args),
            dims: dims.copied(),
            evaluator: evaluator.clone(),
        };
        match self.send(call, &[], &mut [])? {
            DeviceAnswer::Time(t) => self.checked(t, evaluator),
            other => Err(self.unexpected(other)),
        }
    }
    fn counters(&self) -> Result<DeviceCounters, DeviceError> {
        match self.send(DeviceCall::Counters, &[], &mut [])? {
            DeviceAnswer::Counters(c) => Ok(c),
            other => Err(self.unexpected(other)),
        }
    }
    /// The device's own description; the client's name where the other side cannot
    /// say (an older server).
    fn describe(&self) -> String {
        match self.send(DeviceCall::Describe, &[], &mut []) {
            Ok(DeviceAnswer::Text(t)) => t,
            _ => self.name.as_str().to_string(),
        }
    }
    /// The device's own answer; true (the cautious answer: nothing runs beside its
    /// measurements) where the other side cannot say.
    fn runs_on_host_cores(&self) -> bool {
        !matches!(
            self.send(DeviceCall::RunsOnHostCores, &[], &mut []),
            Ok(DeviceAnswer::Flag(false))
        )
    }
    fn record_sequence(&self, steps: &[LaunchStep]) -> Result<Option<SequenceId>, DeviceError> {
        let call = DeviceCall::RecordSequence {
            steps: steps.to_vec(),
        };
        match self.send(call, &[], &mut [])? {
            DeviceAnswer::Sequence(s) => Ok(s.map(SequenceId)),
            other => Err(self.unexpected(other)),
        }
    }
    fn run_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        self.done(DeviceCall::RunSequence {
            sequence: sequence.0,
        })
    }
    fn free_sequence(&self, sequence: SequenceId) -> Result<(), DeviceError> {
        self.done(DeviceCall::FreeSequence {
            sequence: sequence.0,
        })
    }
    /// Checked like [`time`](Device::time)'s answer: one finite, non-negative time per
    /// step.
    fn time_steps(&self, steps: &[LaunchStep]) -> Result<Vec<f64>, DeviceError> {
        let call = DeviceCall::TimeSteps {
            steps: steps.to_vec(),
        };
        match self.send(call, &[], &mut [])? {
            DeviceAnswer::Times(t)
                if t.len() == steps.len() && t.iter().all(|x| x.is_finite() && *x >= 0.0) =>
            {
                Ok(t)
            }
            DeviceAnswer::Times(t) => Err(self.name.failed(format!(
                "its step timer returned {t:?} for {} steps",
                steps.len()
            ))),
            other => Err(self.unexpected(other)),
        }
    }
}
