//! Preparing a batch's candidates in parallel runner processes before they are timed
//! one by one: for a device whose compiler runs when a kernel is loaded and first
//! launched, on the host's cores.
//!
//! PoCL builds an OpenCL program when it is loaded and compiles each kernel's
//! work-group function at its first launch: on this project's CPU that was 440 ms of a
//! candidate's 530, in the one runner that times the candidates, while the other
//! cores waited (building and timing take turns on the host's cores, so that no
//! compiler disturbs a measurement). Both results go to PoCL's kernel cache on disk.
//! So a batch first goes through a pool of runners, one per core, each job loading,
//! making the inputs and checking (or launching once): the compilers run in parallel,
//! every fault is found there as its candidate's typed error, and the timing runner
//! then loads from the cache. Nothing is timed while the pool works.
//!
//! The measurer turns preparation on once its runners have said the device computes
//! on the host's cores and that loading and checking took longer than timing (the
//! built-in CPU's loading and checking are a few percent of its timing: it never
//! does).

use crate::runner_process::RunnerProcess;
use crate::types::MeasureResult;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tessera_runtime::runner::JobProfile;

/// A prepared job's outcome: its measurement (an error, or `Ok` with no costs) and its
/// profile.
pub type Prepared = (MeasureResult, Option<JobProfile>);

/// Runs the job files `jobs` (`None`: nothing to prepare) on the runner processes
/// `pool`, each job on the next free runner, each within `timeout`; returns each job's
/// outcome in order.
pub fn prepare_all(
    pool: &mut [RunnerProcess],
    jobs: &[Option<PathBuf>],
    timeout: Duration,
) -> Vec<Option<Prepared>> {
    let next = AtomicUsize::new(0);
    let outcomes: Vec<Mutex<Option<Prepared>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let run = |runner: &mut RunnerProcess| loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        let Some(job) = jobs.get(i) else { break };
        if let Some(path) = job {
            let out = runner.run_profiled(Path::new(path), timeout);
            *outcomes[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
        }
    };
    let run = &run;
    std::thread::scope(|scope| {
        for runner in pool.iter_mut() {
            scope.spawn(move || run(runner));
        }
    });
    outcomes
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}
