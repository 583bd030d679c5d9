//! Measurement on remote device servers (TVM's `RPCRunner`): each built kernel's job
//! goes to a free server of the tracker's key, one worker per server of the key so that
//! they measure in parallel. A server that fails or disappears during a job gives that
//! job one more try on another server (the lost server is not given back: the tracker
//! drops it when its registration lapses); a second failure is the candidate's
//! `RUNTIME_DEVICE` error naming the server. A tracker that goes away (restarting) is
//! waited for, up to the same wait. No server of the key within the wait is the
//! candidate's error with the tracker's reason, never an endless wait.

use crate::types::{MeasureErrorNo, MeasureResult};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tessera_rpc::{run_remote, RpcError, TrackerClient};
use tessera_runtime::runner::RunJob;

/// Where remote measurements run.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteOptions {
    /// The tracker, `host:port`.
    pub tracker: String,
    pub key: String,
    pub token: String,
    /// How long a job waits for a free server.
    pub wait: Duration,
}

/// Slack on a job's time limit for the transfer and the server's own work.
const SLACK: Duration = Duration::from_secs(30);

/// Measures `jobs` (each built job with its build seconds, or the build's failure) on
/// the servers of `rpc.key`, `limit` per run.
pub fn measure_batch(
    rpc: &RemoteOptions,
    jobs: Vec<Result<(RunJob, f64), MeasureResult>>,
    limit: Duration,
) -> Vec<MeasureResult> {
    let servers = TrackerClient::connect(&rpc.tracker, &rpc.token, Duration::from_secs(5))
        .and_then(|mut c| c.summary())
        .map(|s| s.servers.iter().filter(|x| x.key == rpc.key).count())
        .unwrap_or(1);
    let workers = servers.clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<MeasureResult>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut tracker = None;
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    let r = match job {
                        Err(failed) => failed.clone(),
                        Ok((job, build_s)) => {
                            let mut r = measure_one(rpc, &mut tracker, job, limit);
                            r.all_cost += build_s;
                            r
                        }
                    };
                    *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every job was measured")
        })
        .collect()
}

fn failed(no: MeasureErrorNo, message: String, seconds: f64) -> MeasureResult {
    MeasureResult::failed(no, message, seconds)
}

/// One job: a server from the tracker, the job run there, the server given back.
fn measure_one(
    rpc: &RemoteOptions,
    tracker: &mut Option<TrackerClient>,
    job: &RunJob,
    limit: Duration,
) -> MeasureResult {
    let start = std::time::Instant::now();
    let secs = || start.elapsed().as_secs_f64();
    let (artifact, name) = match std::fs::read(&job.artifact.path) {
        Ok(b) => (
            b,
            job.artifact
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "artifact".into()),
        ),
        Err(e) => {
            let msg = format!("{}: {e}", job.artifact.path.display());
            return failed(MeasureErrorNo::CompileHost, msg, secs());
        }
    };
    let job_json = match serde_json::to_string(job) {
        Ok(j) => j,
        Err(e) => return failed(MeasureErrorNo::Unknown, e.to_string(), secs()),
    };
    let mut lost: Vec<String> = Vec::new();
    while lost.len() < 2 {
        let lease = match lease(rpc, tracker) {
            Ok(l) => l,
            Err(e) => return failed(MeasureErrorNo::RuntimeDevice, e.to_string(), secs()),
        };
        let reply = run_remote(
            &lease.addr,
            &rpc.token,
            job_json.clone(),
            artifact.clone(),
            name.clone(),
            limit,
            limit + SLACK,
        );
        match reply {
            Ok(json) => {
                if let Some(c) = tracker.as_mut() {
                    let _ = c.release(&lease);
                }
                return serde_json::from_str::<MeasureResult>(&json).unwrap_or_else(|e| {
                    failed(
                        MeasureErrorNo::Unknown,
                        format!("the RPC server at {}: unreadable reply ({e})", lease.addr),
                        secs(),
                    )
                });
            }
            Err(e @ RpcError::WrongToken { .. }) => {
                return failed(MeasureErrorNo::RuntimeDevice, e.to_string(), secs())
            }
            // Not given back: a lost server lapses at the tracker within a lease.
            Err(e) => lost.push(e.to_string()),
        }
    }
    failed(
        MeasureErrorNo::RuntimeDevice,
        format!("failed on two servers: {}", lost.join("; then ")),
        secs(),
    )
}

/// A server of the key. A tracker that cannot be reached (restarting, say) is tried
/// again every half second for up to the wait, as is a key whose servers have not
/// registered again yet; then the last reason is the error.
fn lease(
    rpc: &RemoteOptions,
    tracker: &mut Option<TrackerClient>,
) -> Result<tessera_rpc::Lease, RpcError> {
    let start = std::time::Instant::now();
    loop {
        let left = rpc.wait.saturating_sub(start.elapsed());
        let r = match tracker {
            Some(c) => c.request(&rpc.key, 0, left),
            None => TrackerClient::connect(&rpc.tracker, &rpc.token, Duration::from_secs(5))
                .map(|c| {
                    *tracker = Some(c);
                })
                .and_then(|_| {
                    tracker
                        .as_mut()
                        .expect("just connected")
                        .request(&rpc.key, 0, left)
                }),
        };
        match r {
            Err(RpcError::Unreachable { .. } | RpcError::Call { .. }) if !left.is_zero() => {
                *tracker = None;
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => {
                if matches!(e, RpcError::Unreachable { .. } | RpcError::Call { .. }) {
                    *tracker = None;
                }
                return Err(e);
            }
            ok => return ok,
        }
    }
}
