//! Running one built kernel outside the tuner: the job a tuner hands to a runner
//! process, and what comes back.
//!
//! The tuner writes a [`RunJob`] as JSON, hands its path to a `tessera runner` process
//! (reused for many jobs: `tessera_search::runner_process`) with a timeout and reads one
//! [`RunReply`] from its standard output. The runner opens the job's target as a
//! [`Device`] (the CPU, or a plugin's device; once per process) and calls [`execute`].
//! A kernel that crashes kills only the runner (the tuner sees the signal and starts
//! another), one that hangs is killed at the timeout, and one that computes a wrong
//! result is caught by the optional check. The inputs are seeded random arrays made by [`make_args`], so the
//! tuner can compute the expected outputs on the very same inputs.
//!
//! A kernel built for ranges of sizes (issue 61: its loops run to what an int32 parameter
//! holds) is timed at several points of the ranges ([`SizePoints`]): the parameter holds
//! each point in turn, the first (the largest, where every element is valid) is the one
//! checked, and the reply's costs are the points' times weighted and summed, repeat by repeat, with
//! each point's mean beside them ([`PointCosts`]).

use crate::device::{Device, DeviceArray, DeviceError};
use crate::ndarray::NDArray;
use crate::timer::TimeEvaluator;
use crate::RuntimeError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tessera_target::{Artifact, ParamSpec};

/// How to time a kernel (TVM's `number`, `repeat`, `min_repeat_ms`, cache flush).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerConfig {
    pub number: usize,
    pub repeat: usize,
    pub min_repeat_ms: f64,
    pub cache_flush: bool,
}

impl Default for TimerConfig {
    /// TVM's LocalRunner defaults for the auto-scheduler: number 3, repeat 1,
    /// min_repeat_ms 100, no flush.
    fn default() -> Self {
        TimerConfig {
            number: 3,
            repeat: 1,
            min_repeat_ms: 100.0,
            cache_flush: false,
        }
    }
}

impl From<TimerConfig> for TimeEvaluator {
    fn from(t: TimerConfig) -> TimeEvaluator {
        TimeEvaluator {
            number: t.number,
            repeat: t.repeat,
            min_repeat_ms: t.min_repeat_ms,
            cache_flush: t.cache_flush,
            slow_cutoff: None,
        }
    }
}

/// Check the outputs against expected arrays before timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckSpec {
    /// `.npy` files of the expected outputs: the last `expected.len()` parameters.
    pub expected: Vec<PathBuf>,
    pub rtol: f64,
    pub atol: f64,
    /// The absolute tolerance as a fraction of the largest expected magnitude, where
    /// that is larger than `atol` (an algorithm whose rounding error scales with its
    /// output's largest values, e.g. Winograd's transforms).
    #[serde(default)]
    pub atol_of_max: f64,
}

impl CheckSpec {
    /// The absolute tolerance for the expected array `want`.
    pub fn atol_for(&self, want: &NDArray) -> f64 {
        if self.atol_of_max > 0.0 {
            self.atol.max(self.atol_of_max * want.max_abs())
        } else {
            self.atol
        }
    }
}

/// One kernel to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunJob {
    /// The target string whose device runs it (`cpu`, `testdev -lanes=8`, …).
    #[serde(default = "cpu_target")]
    pub target: String,
    pub artifact: Artifact,
    pub timer: TimerConfig,
    /// Seed of the random inputs (see [`make_args`]).
    pub seed: u64,
    /// How many of the last parameters are outputs (left zero on input).
    pub num_outputs: usize,
    #[serde(default)]
    pub check: Option<CheckSpec>,
    /// Seconds per call above which the first timed calls are the measurement
    /// ([`TimeEvaluator::slow_cutoff`]): the tuner's multiple of the task's best time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_cutoff: Option<f64>,
    /// Load, make the inputs and check (without a check, launch once), and time
    /// nothing: the device's compilers run, and their caches fill for the job that
    /// times the kernel (`tessera_search::prepare`). The reply is `Ok` with no costs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prepare_only: bool,
    /// A kernel built for ranges of sizes: the points it is timed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<SizePoints>,
}

/// The points of runtime sizes a kernel is timed at: its int32 parameter `param` (the
/// sizes its loops run to, `tessera.sizes` in a module) holds each of `points` in turn;
/// the first is the one checked. The job's cost is `Σ weights[p] · time[p]` (with
/// weights that sum to 1, the expected time over the points).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizePoints {
    pub param: usize,
    pub points: Vec<Vec<i32>>,
    pub weights: Vec<f64>,
    /// The ranges the points are of, one per size (`seq in 2..384`): kept in the
    /// records, not read by the runner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<String>,
}

/// What a job timed at [`SizePoints`] measured: each point's mean seconds beside the
/// points and weights (what a record keeps: the estimate per point).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointCosts {
    /// The ranges the points are of ([`SizePoints::ranges`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<String>,
    pub points: Vec<Vec<i32>>,
    pub weights: Vec<f64>,
    pub means: Vec<f64>,
}

impl SizePoints {
    /// Checks that the points fit a kernel with parameters `params`: `param` an int32
    /// input of one dimension, each point that many values, at least one point, one
    /// positive finite weight per point.
    pub fn validate(&self, params: &[ParamSpec]) -> Result<(), RuntimeError> {
        let bad = |why: String| Err(RuntimeError::SizePoints(why));
        let Some(p) = params.get(self.param) else {
            return bad(format!(
                "parameter {} of a kernel of {}",
                self.param,
                params.len()
            ));
        };
        if p.dtype != tessera_ir::DataType::int32() || p.shape.len() != 1 || p.written {
            return bad(format!(
                "parameter {} (`{}`) is a {} {:?}, not the int32 vector of sizes",
                self.param, p.name, p.dtype, p.shape
            ));
        }
        if self.points.is_empty() || self.points.len() != self.weights.len() {
            return bad(format!(
                "{} points and {} weights",
                self.points.len(),
                self.weights.len()
            ));
        }
        if let Some(pt) = self.points.iter().find(|pt| pt.len() as i64 != p.shape[0]) {
            return bad(format!("point {pt:?} for {} sizes", p.shape[0]));
        }
        if let Some(w) = self.weights.iter().find(|w| !(w.is_finite() && **w > 0.0)) {
            return bad(format!("weight {w}: weights are positive"));
        }
        Ok(())
    }

    /// Point `k` as the kernel's argument.
    pub fn array(&self, k: usize) -> Result<NDArray, RuntimeError> {
        let pt = &self.points[k];
        NDArray::from_slice(&[pt.len()], pt)
    }

    /// The job's costs from each point's times (`times[p]`: seconds per repeat): the
    /// weighted sum repeat by repeat, and each point's mean.
    pub fn combine(&self, times: &[Vec<f64>]) -> (Vec<f64>, PointCosts) {
        let repeats = times.iter().map(Vec::len).min().unwrap_or(0);
        let costs = (0..repeats)
            .map(|r| {
                (times.iter().zip(&self.weights))
                    .map(|(t, w)| w * t[r])
                    .sum::<f64>()
            })
            .collect();
        let means = times
            .iter()
            .map(|t| t.iter().sum::<f64>() / t.len().max(1) as f64)
            .collect();
        let at = PointCosts {
            ranges: self.ranges.clone(),
            points: self.points.clone(),
            weights: self.weights.clone(),
            means,
        };
        (costs, at)
    }
}

fn cpu_target() -> String {
    "cpu".into()
}

/// Where a job's time went in the runner, in seconds, and what the device is: the
/// runner's side of a tuning round's profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobProfile {
    /// Loading the module and finding its function (a device compiler's work done at
    /// load: OpenCL's program build, the driver's PTX assembly).
    pub load: f64,
    /// Making the seeded inputs and copying them to the device.
    pub inputs: f64,
    /// The checked run and the comparison with the expected outputs.
    pub check: f64,
    /// The untimed warm-up and the timed runs.
    pub timing: f64,
    /// Whether the device computes on the host's cores ([`Device::runs_on_host_cores`]):
    /// building beside its measurements would then disturb them.
    pub on_host_cores: bool,
}

/// What the runner prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunReply {
    /// Seconds per run, one per repeat, and where the job's time went (absent from an
    /// older runner).
    Ok {
        costs: Vec<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<JobProfile>,
        /// A job timed at [`SizePoints`]: each point's time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_points: Option<PointCosts>,
    },
    /// The kernel could not be loaded on the device (a device compiler's error, e.g.
    /// OpenCL's build log): TVM's `COMPILE_DEVICE`.
    LoadFailed { message: String },
    /// The kernel failed when run (a failure status, a device error).
    Failed { message: String },
    /// The check found a wrong output.
    WrongAnswer { message: String },
}

/// The arguments of a kernel with parameters `params`: seeded uniform random values in
/// [-1, 1) for the inputs (parameter `i` with seed `seed + i`), zeros for the last
/// `num_outputs` parameters.
pub fn make_args(
    params: &[ParamSpec],
    seed: u64,
    num_outputs: usize,
) -> Result<Vec<NDArray>, RuntimeError> {
    let first_output = params.len().saturating_sub(num_outputs);
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shape: Vec<usize> = p.shape.iter().map(|&d| d.max(0) as usize).collect();
            if i >= first_output {
                NDArray::zeros(p.dtype, &shape)
            } else {
                NDArray::random_uniform(p.dtype, &shape, seed.wrapping_add(i as u64), -1.0, 1.0)
            }
        })
        .collect()
}

/// [`make_args`] with the sizes parameter of `sizes` at its first point.
pub fn make_args_at(
    params: &[ParamSpec],
    seed: u64,
    num_outputs: usize,
    sizes: Option<&SizePoints>,
) -> Result<Vec<NDArray>, RuntimeError> {
    let mut args = make_args(params, seed, num_outputs)?;
    if let Some(s) = sizes {
        s.validate(params)?;
        args[s.param] = s.array(0)?;
    }
    Ok(args)
}

/// Runs `job` on `device` in this process (what a runner process does once it has
/// opened the job's device).
pub fn execute(device: &Arc<dyn Device>, job: &RunJob) -> RunReply {
    match execute_inner(device, job) {
        Ok(reply) => reply,
        Err(e) => RunReply::Failed {
            message: e.to_string(),
        },
    }
}

/// Why a job failed before it could be timed.
#[derive(Debug, thiserror::Error)]
enum JobError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Device(#[from] DeviceError),
}

fn execute_inner(device: &Arc<dyn Device>, job: &RunJob) -> Result<RunReply, JobError> {
    let mut profile = JobProfile {
        on_host_cores: device.runs_on_host_cores(),
        ..JobProfile::default()
    };
    let mut clock = Instant::now();
    let mut lap = || {
        let now = Instant::now();
        let seconds = now.duration_since(clock).as_secs_f64();
        clock = now;
        seconds
    };
    let loaded = device
        .load_module(&job.artifact)
        .and_then(|m| device.get_function(m, &job.artifact.entry));
    let function = match loaded {
        Ok(f) => f,
        Err(e) => {
            return Ok(RunReply::LoadFailed {
                message: e.to_string(),
            })
        }
    };
    profile.load = lap();
    let host = make_args_at(
        &job.artifact.params,
        job.seed,
        job.num_outputs,
        job.sizes.as_ref(),
    )?;
    let mut args = host
        .iter()
        .map(|a| DeviceArray::from_host(device, a))
        .collect::<Result<Vec<_>, _>>()?;
    let buffers: Vec<_> = args.iter().map(DeviceArray::buffer).collect();
    let dims = job.artifact.launch.as_ref();
    profile.inputs = lap();
    if let Some(check) = &job.check {
        device.launch(function, &buffers, dims)?;
        device.synchronize()?;
        let first = args.len().saturating_sub(check.expected.len());
        for (k, path) in check.expected.iter().enumerate() {
            let want = NDArray::load_npy(path)?;
            let got = args[first + k].to_host()?;
            if let Err(e) = got.allclose(&want, check.rtol, check.atol_for(&want)) {
                return Ok(RunReply::WrongAnswer {
                    message: format!("output {k}: {e}"),
                });
            }
        }
        profile.check = lap();
    } else if job.prepare_only {
        device.launch(function, &buffers, dims)?;
        device.synchronize()?;
        profile.check = lap();
    }
    if job.prepare_only {
        return Ok(RunReply::Ok {
            costs: Vec::new(),
            profile: Some(profile),
            at_points: None,
        });
    }
    // The evaluator's untimed call is the warm-up (TVM's runner adds one more; the
    // checked run above is one already).
    let evaluator = TimeEvaluator::from(job.timer).with_slow_cutoff(job.slow_cutoff);
    let Some(sizes) = &job.sizes else {
        let t = device.time(function, &buffers, dims, &evaluator)?;
        profile.timing = lap();
        return Ok(RunReply::Ok {
            costs: t.results,
            profile: Some(profile),
            at_points: None,
        });
    };
    // at each point in turn, the sizes written where the kernel reads them
    let mut times = Vec::with_capacity(sizes.points.len());
    for k in 0..sizes.points.len() {
        if k > 0 {
            args[sizes.param] = DeviceArray::from_host(device, &sizes.array(k)?)?;
        }
        let buffers: Vec<_> = args.iter().map(DeviceArray::buffer).collect();
        times.push(device.time(function, &buffers, dims, &evaluator)?.results);
    }
    profile.timing = lap();
    let (costs, at) = sizes.combine(&times);
    Ok(RunReply::Ok {
        costs,
        profile: Some(profile),
        at_points: Some(at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_ir::DataType;

    fn param(name: &str, dtype: DataType, shape: &[i64], written: bool) -> ParamSpec {
        ParamSpec {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            written,
        }
    }

    #[test]
    fn a_job_at_points_costs_the_weighted_sum_repeat_by_repeat() {
        let s = SizePoints {
            param: 1,
            points: vec![vec![8], vec![2]],
            weights: vec![1.0, 3.0],
            ranges: vec!["seq in 1..8".into()],
        };
        let (costs, at) = s.combine(&[vec![4.0, 8.0], vec![2.0, 2.0]]);
        assert_eq!(costs, vec![4.0 + 6.0, 8.0 + 6.0]);
        assert_eq!(at.means, vec![6.0, 2.0]);
        assert_eq!(at.points, s.points);
        assert_eq!(at.weights, s.weights);
        assert_eq!(at.ranges, s.ranges);
    }

    #[test]
    fn points_that_do_not_fit_the_kernel_are_an_error() {
        let params = [
            param("x", DataType::float32(), &[8, 4], false),
            param("sizes", DataType::int32(), &[2], false),
            param("y", DataType::float32(), &[8, 4], true),
        ];
        let good = SizePoints {
            param: 1,
            points: vec![vec![8, 4], vec![2, 1]],
            weights: vec![1.0, 2.0],
            ranges: Vec::new(),
        };
        good.validate(&params).unwrap();
        let args = make_args_at(&params, 3, 1, Some(&good)).unwrap();
        assert_eq!(args[1].as_slice::<i32>().unwrap(), &[8, 4]);
        let bad = |s: SizePoints| s.validate(&params).unwrap_err().to_string();
        let e = bad(SizePoints {
            param: 0,
            ..good.clone()
        });
        assert!(e.contains("not the int32 vector of sizes"), "{e}");
        let e = bad(SizePoints {
            param: 5,
            ..good.clone()
        });
        assert!(e.contains("parameter 5 of a kernel of 3"), "{e}");
        let e = bad(SizePoints {
            points: vec![vec![8]],
            weights: vec![1.0],
            ..good.clone()
        });
        assert!(e.contains("point [8] for 2 sizes"), "{e}");
        let e = bad(SizePoints {
            weights: vec![1.0, 0.0],
            ..good.clone()
        });
        assert!(e.contains("weights are positive"), "{e}");
        let e = bad(SizePoints {
            weights: vec![1.0],
            ..good
        });
        assert!(e.contains("2 points and 1 weights"), "{e}");
    }
}
