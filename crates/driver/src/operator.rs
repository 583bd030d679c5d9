//! One catalog operator through the pipeline (`tessera op`): its program (the default
//! schedule, the naive loop nest, or a log's history best), built by the target's
//! backend, loaded on the target's device, run on seeded inputs, checked against a
//! reference (the interpreter or the naive kernel), and timed.

use crate::pipeline::Toolchain;
use crate::DriverError;
use std::path::Path;
use std::sync::Arc;
use tessera_backends::{Backend, HardwareParams, LaunchDims, Target};
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::PrimFunc;
use tessera_runtime::{CompareError, Device, DeviceArray, FunctionId, NDArray};
use tessera_runtime::{TimeEvaluator, TimeResult};
use tessera_search::apply::Subject;
use tessera_search::record::LoadedLog;
use tessera_te::catalog::OpSpec;
use tessera_te::schedules::CpuParams;
use tessera_te::Tensor;

/// Interpreter checks above this many FLOPs take too long: `CheckWith::Auto` uses the
/// naive kernel instead.
const INTERP_FLOP_LIMIT: f64 = 5e7;

/// Which program of an operator to build.
pub enum OperatorSchedule<'a> {
    /// The loop nest of the definition.
    Naive,
    /// The hand-written default schedule.
    Default,
    /// The history best of a log (its path for the name), else the default.
    HistoryBest(&'a LoadedLog, &'a Path),
}

/// What an operator's output is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckWith {
    /// The interpreter when the operator is small enough, else the naive kernel.
    Auto,
    Interpreter,
    NaiveKernel,
    Nothing,
}

impl CheckWith {
    /// What it is called in a report.
    pub fn name(self) -> &'static str {
        match self {
            CheckWith::Interpreter => "interpreter",
            CheckWith::NaiveKernel => "naive kernel",
            CheckWith::Auto | CheckWith::Nothing => "nothing",
        }
    }
}

/// An operator's program and which it is.
pub struct OperatorProgram {
    pub func: PrimFunc,
    /// `default`, `naive`, or the log's history best with its measured time.
    pub schedule: String,
    /// Why a log's history best was not built (nothing of it applies), when it was not.
    pub fallback: Option<String>,
}

/// What one operator's run found.
pub struct OperatorRun {
    /// The source the backend generated.
    pub source: String,
    /// The check's outcome (`None`: not checked), with the mismatch said.
    pub correct: Option<Result<(), CompareError>>,
    /// What it was checked against (the `Auto` choice resolved).
    pub checked_against: CheckWith,
    pub timing: TimeResult,
    /// The device it ran on ([`Device::describe`]).
    pub device: String,
}

/// A kernel built by the target's backend and loaded on its device.
struct Kernel {
    device: Arc<dyn Device>,
    function: FunctionId,
    launch: Option<LaunchDims>,
}

impl Kernel {
    fn build(
        backend: &dyn Backend,
        device: &Arc<dyn Device>,
        func: &PrimFunc,
        dir: &Path,
    ) -> Result<Kernel, DriverError> {
        let artifact = backend.build(func, dir)?;
        let module = device.load_module(&artifact)?;
        Ok(Kernel {
            device: Arc::clone(device),
            function: device.get_function(module, &artifact.entry)?,
            launch: artifact.launch,
        })
    }

    /// The arrays, copied to the device.
    fn upload(&self, arrays: &[NDArray]) -> Result<Vec<DeviceArray>, DriverError> {
        Ok(arrays
            .iter()
            .map(|a| DeviceArray::from_host(&self.device, a))
            .collect::<Result<_, _>>()?)
    }

    /// Runs the kernel on `arrays` (the last one is the output, copied back).
    fn call(&self, arrays: &mut [NDArray]) -> Result<(), DriverError> {
        let on_device = self.upload(arrays)?;
        let buffers: Vec<_> = on_device.iter().map(DeviceArray::buffer).collect();
        self.device
            .launch(self.function, &buffers, self.launch.as_ref())?;
        self.device.synchronize()?;
        if let (Some(out), Some(dev)) = (arrays.last_mut(), on_device.last()) {
            *out = dev.to_host()?;
        }
        Ok(())
    }

    fn time(&self, ev: &TimeEvaluator, arrays: &[NDArray]) -> Result<TimeResult, DriverError> {
        let on_device = self.upload(arrays)?;
        let buffers: Vec<_> = on_device.iter().map(DeviceArray::buffer).collect();
        Ok(self
            .device
            .time(self.function, &buffers, self.launch.as_ref(), ev)?)
    }
}

/// The operator's arguments on the host: seeded random inputs (in the ranges the
/// operator is defined on), then zero outputs.
fn make_arrays(spec: &OpSpec) -> Result<Vec<NDArray>, DriverError> {
    let (inputs, outputs) = spec.tensors()?;
    let dims = |t: &Tensor| -> Vec<usize> { t.shape().iter().map(|d| *d as usize).collect() };
    let mut arrays = Vec::new();
    for (i, t) in inputs.iter().enumerate() {
        let (lo, hi) = spec.input_range(i);
        let seed = 42 + i as u64;
        arrays.push(NDArray::random_uniform(t.dtype(), &dims(t), seed, lo, hi)?);
    }
    for t in &outputs {
        arrays.push(NDArray::zeros(t.dtype(), &dims(t))?);
    }
    Ok(arrays)
}

/// The reference output for `arrays` (the kernel's arguments), computed as `check`
/// says; `None` for no check.
fn reference(
    spec: &OpSpec,
    check: CheckWith,
    arrays: &[NDArray],
    build: impl FnOnce(&PrimFunc) -> Result<Kernel, DriverError>,
) -> Result<Option<NDArray>, DriverError> {
    let last = arrays.len() - 1;
    let zeros = || NDArray::zeros(arrays[last].dtype(), arrays[last].shape());
    match check {
        CheckWith::Interpreter => {
            let naive = spec.naive_func("reference")?;
            let mut host: Vec<HostBuffer> = arrays.iter().map(|x| x.to_host_buffer()).collect();
            host[last] = HostBuffer::zeros(arrays[last].dtype(), arrays[last].shape());
            interp::run(&naive, &mut host).map_err(DriverError::Reference)?;
            Ok(Some(NDArray::from_host_buffer(&host[last])?))
        }
        CheckWith::NaiveKernel => {
            let m = build(&spec.naive_func("reference")?)?;
            let mut copy: Vec<NDArray> = arrays.to_vec();
            copy[last] = zeros()?;
            m.call(&mut copy)?;
            Ok(copy.pop())
        }
        CheckWith::Auto | CheckWith::Nothing => Ok(None),
    }
}

/// The default (or naive) program of `spec` for hardware `hw`.
fn catalog_program(
    spec: &OpSpec,
    naive: bool,
    hw: &HardwareParams,
) -> Result<PrimFunc, DriverError> {
    if naive {
        return Ok(spec.naive_func(&spec.name)?);
    }
    let p = CpuParams {
        vector_lanes: hw.f32_lanes(),
        num_cores: hw.num_cores,
        vectorize: true,
        gpu_threads: hw.max_threads_per_block as i64,
    };
    Ok(spec.default_func(p, &spec.name)?)
}

impl Toolchain {
    /// The program of `spec` for `target` that `schedule` names.
    pub fn operator_program(
        &self,
        spec: &OpSpec,
        target: &Target,
        schedule: OperatorSchedule<'_>,
    ) -> Result<OperatorProgram, DriverError> {
        let hw = self.hardware(target)?;
        let plain = |naive: bool, name: &str, fallback| -> Result<OperatorProgram, DriverError> {
            Ok(OperatorProgram {
                func: catalog_program(spec, naive, &hw)?,
                schedule: name.to_string(),
                fallback,
            })
        };
        let (log, path) = match schedule {
            OperatorSchedule::Naive => return plain(true, "naive", None),
            OperatorSchedule::Default => return plain(false, "default", None),
            OperatorSchedule::HistoryBest(log, path) => (log, path),
        };
        let target_str = target.to_string();
        let configurations = crate::history::holds_configurations(&log.records);
        let best = tessera_search::record::ApplyHistoryBest::from_log(log);
        let appliers = self.appliers(&best, target, configurations)?;
        let ctx = tessera_graph::BuildContext {
            target: target.clone(),
            hardware: hw.clone(),
        };
        let subject = Subject::Operator { spec, ctx: &ctx };
        let built =
            appliers
                .program(&subject, &spec.name)
                .map_err(|source| DriverError::HistoryBest {
                    log: path.to_path_buf(),
                    source: Box::new(source),
                })?;
        for w in appliers.warnings() {
            self.warn(&w);
        }
        match built {
            Some((func, Some(record))) => {
                return Ok(OperatorProgram {
                    func,
                    schedule: format!(
                        "history best of {} (measured at {:.4} ms)",
                        path.display(),
                        record.result.mean_cost() * 1e3
                    ),
                    fallback: None,
                })
            }
            Some((func, None)) => {
                return Ok(OperatorProgram {
                    func,
                    schedule: "fallback configuration".into(),
                    fallback: None,
                })
            }
            None => {}
        }
        let keys = appliers.workload_keys(&subject);
        let why = tessera_search::record::why_nothing_applies(&log.records, &keys, &target_str)
            .unwrap_or_else(|| {
                "its best record for this workload is the default schedule, or failed, or \
                 was overruled by the in-network check"
                    .into()
            });
        plain(false, "default", Some(why))
    }

    /// Builds `func` (a program of `spec`) for `target`, runs it on seeded inputs on the
    /// target's device ([`Toolchain::device_for`]), checks its output as `check` says and
    /// times it with `evaluator`.
    pub fn run_operator(
        &self,
        spec: &OpSpec,
        target: &Target,
        func: &PrimFunc,
        check: CheckWith,
        evaluator: &TimeEvaluator,
    ) -> Result<OperatorRun, DriverError> {
        let backend = self.registry().backend_for(target)?;
        let device = self.device_for(target)?;
        let source = backend.codegen(func)?;
        let dir = tempfile::tempdir().map_err(|source| DriverError::Io {
            what: "creating a build directory".into(),
            source,
        })?;
        let build = |f: &PrimFunc| Kernel::build(backend.as_ref(), &device, f, dir.path());
        let kernel = build(func)?;
        let mut arrays = make_arrays(spec)?;
        kernel.call(&mut arrays)?;
        let dag = spec.dag()?;
        let check = match check {
            CheckWith::Auto if dag.flop_count() <= INTERP_FLOP_LIMIT => CheckWith::Interpreter,
            CheckWith::Auto => CheckWith::NaiveKernel,
            c => c,
        };
        let correct = reference(spec, check, &arrays, build)?.map(|r| {
            let out = &arrays[arrays.len() - 1];
            let atol = (dag.check_atol_of_max() * r.max_abs()).max(1e-4);
            out.allclose(&r, 1e-3, atol)
        });
        Ok(OperatorRun {
            device: device.describe(),
            source,
            correct,
            checked_against: check,
            timing: kernel.time(evaluator, &arrays)?,
        })
    }
}
