//! Running one built kernel in a process of its own: the job a tuner hands to the
//! `tessera-runner` binary, and what comes back.
//!
//! The tuner writes a [`RunJob`] as JSON, starts `tessera-runner JOB.json` with a
//! timeout and reads one [`RunReply`] from its standard output. A kernel that crashes
//! kills only the runner (the tuner sees the signal), one that hangs is killed at the
//! timeout, and one that computes a wrong result is caught by the optional check. The
//! inputs are seeded random arrays made by [`make_args`], so the tuner can compute the
//! expected outputs on the very same inputs.

use crate::module::Module;
use crate::ndarray::NDArray;
use crate::timer::TimeEvaluator;
use crate::RuntimeError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tessera_backends::{Artifact, ParamSpec};

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

/// Check the outputs against expected arrays before timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckSpec {
    /// `.npy` files of the expected outputs: the last `expected.len()` parameters.
    pub expected: Vec<PathBuf>,
    pub rtol: f64,
    pub atol: f64,
}

/// One kernel to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunJob {
    pub artifact: Artifact,
    pub timer: TimerConfig,
    /// Seed of the random inputs (see [`make_args`]).
    pub seed: u64,
    /// How many of the last parameters are outputs (left zero on input).
    pub num_outputs: usize,
    #[serde(default)]
    pub check: Option<CheckSpec>,
}

/// What the runner prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunReply {
    /// Seconds per run, one per repeat.
    Ok { costs: Vec<f64> },
    /// The kernel could not be loaded or returned a failure status.
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

/// Runs `job` in this process (what the `tessera-runner` binary does).
pub fn execute(job: &RunJob) -> RunReply {
    match execute_inner(job) {
        Ok(reply) => reply,
        Err(e) => RunReply::Failed {
            message: e.to_string(),
        },
    }
}

fn execute_inner(job: &RunJob) -> Result<RunReply, RuntimeError> {
    let module = Module::load(&job.artifact)?;
    let mut args = make_args(&job.artifact.params, job.seed, job.num_outputs)?;
    if let Some(check) = &job.check {
        {
            let mut refs: Vec<&mut NDArray> = args.iter_mut().collect();
            module.call(&mut refs)?;
        }
        let first = args.len().saturating_sub(check.expected.len());
        for (k, path) in check.expected.iter().enumerate() {
            let want = NDArray::load_npy(path)?;
            if let Err(e) = args[first + k].allclose(&want, check.rtol, check.atol) {
                return Ok(RunReply::WrongAnswer {
                    message: format!("output {k}: {e}"),
                });
            }
        }
    }
    let evaluator = TimeEvaluator {
        number: job.timer.number,
        repeat: job.timer.repeat,
        min_repeat_ms: job.timer.min_repeat_ms,
        cache_flush: job.timer.cache_flush,
    };
    let mut refs: Vec<&mut NDArray> = args.iter_mut().collect();
    // One warm-up run, as TVM's runner does.
    module.call(&mut refs)?;
    let t = module.time_with(&evaluator, &mut refs)?;
    Ok(RunReply::Ok { costs: t.results })
}
