//! The runner processes that measured kernels run in, each reused for many jobs, as
//! TVM's local runner runs a batch in one reused worker (its `PopenPoolExecutor`); ours
//! also lives on from batch to batch.
//!
//! A process per kernel isolates every fault, but pays for the process each time: the
//! binary's start, the plugin registry, opening the device (an OpenCL context; on PoCL,
//! loading its kernel library into LLVM before the first program builds, about 1 s; a
//! CUDA context on a GPU). On PoCL that was most of a candidate's cost. So a
//! [`RunnerProcess`] starts `tessera runner` once and hands it one job file per line on
//! its standard input; the runner ([`serve_jobs`]) keeps each target's device open and
//! answers each job with one marked line on its standard output ([`REPLY_MARK`]: a
//! device library may print there too).
//!
//! The isolation is the same as one process per job:
//! - a kernel that hangs is killed at its run timeout with the whole process, and the
//!   next job starts a new one;
//! - a kernel that crashes ends the process: its job's error names the signal and the
//!   last lines of standard error, and the next job starts a new one;
//! - a job that fails on the device (a launch error, which can leave a CUDA context
//!   unusable) ends the process too: a job never runs on a device an earlier failure may
//!   have left broken;
//! - after [`JOBS_PER_PROCESS`] jobs the process is replaced, which bounds what the
//!   loaded modules hold (a device keeps its modules until it closes).

use crate::types::{now, MeasureErrorNo, MeasureResult};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_backends::process::wait_or_kill;
use tessera_runtime::runner::{JobProfile, RunJob, RunReply};
use tessera_runtime::Device;

/// What starts a runner's reply line (anything else on its standard output is a device
/// library's and ignored).
pub const REPLY_MARK: &str = "\u{1}tessera-reply ";

/// Jobs one runner process runs before it is replaced.
pub const JOBS_PER_PROCESS: usize = 64;

/// How long a runner whose input closed (or whose output ended) may take to exit
/// before it is killed.
const GRACE: Duration = Duration::from_secs(2);

/// How much of a runner's standard error is kept for the message of a job that ends it.
const STDERR_KEPT: usize = 16 * 1024;

/// Runs the job file `job_path` on the device `open_device` gives for its target (what
/// a runner does with each job). Every failure is a reply, never a panic.
pub fn serve_job<E: std::fmt::Display>(
    job_path: &Path,
    open_device: impl FnOnce(&str) -> Result<Arc<dyn Device>, E>,
) -> RunReply {
    let failed = |message: String| RunReply::Failed { message };
    let job = match std::fs::read(job_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice::<RunJob>(&b).map_err(|e| e.to_string()))
    {
        Ok(job) => job,
        Err(e) => return failed(format!("{}: {e}", job_path.display())),
    };
    match open_device(&job.target) {
        Ok(device) => tessera_runtime::runner::execute(&device, &job),
        Err(e) => failed(format!("opening the device of `{}`: {e}", job.target)),
    }
}

/// The reply line for `reply`: [`REPLY_MARK`] and its JSON.
pub fn reply_line(reply: &RunReply) -> String {
    // a reply is plain data: encoding it cannot fail
    let json = serde_json::to_string(reply).unwrap_or_else(|e| {
        format!("{{\"status\":\"failed\",\"message\":\"cannot encode the reply: {e}\"}}")
    });
    format!("{REPLY_MARK}{json}")
}

/// What `tessera runner` does: for each line of `input` (a job file's path), runs the
/// job and writes its reply line to `output`, until `input` ends. Each target's device
/// is opened once ([`open_device`]) and kept for the jobs after it; after a job that
/// failed on the device the runner stops (see the module's header), and its parent
/// starts another for the next job.
pub fn serve_jobs<E: std::fmt::Display>(
    input: impl BufRead,
    mut output: impl Write,
    mut open_device: impl FnMut(&str) -> Result<Arc<dyn Device>, E>,
) -> std::io::Result<()> {
    let mut devices: HashMap<String, Arc<dyn Device>> = HashMap::new();
    for line in input.lines() {
        let line = line?;
        let path = line.trim();
        if path.is_empty() {
            continue;
        }
        let reply = serve_job(Path::new(path), |target| -> Result<Arc<dyn Device>, E> {
            if let Some(d) = devices.get(target) {
                return Ok(Arc::clone(d));
            }
            let d = open_device(target)?;
            devices.insert(target.to_string(), Arc::clone(&d));
            Ok(d)
        });
        // one write of the whole line: standard output locks once for it, so another
        // thread's printing cannot land inside the reply
        let mut line = reply_line(&reply);
        line.push('\n');
        output.write_all(line.as_bytes())?;
        output.flush()?;
        if matches!(reply, RunReply::Failed { .. }) {
            break;
        }
    }
    Ok(())
}

/// A runner process that runs jobs one after another (see the module's header), started
/// when the first job comes and again after one ends it.
pub struct RunnerProcess {
    runner: PathBuf,
    live: Option<Live>,
    jobs_per_process: usize,
}

/// A running runner process.
struct Live {
    child: Child,
    stdin: ChildStdin,
    /// Its reply lines; disconnected when its standard output closes.
    replies: Receiver<String>,
    /// The tail of its standard error since the current job began.
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The thread that reads it, done once the process has ended.
    stderr_reader: std::thread::JoinHandle<()>,
    jobs: usize,
}

impl RunnerProcess {
    /// Jobs will run in `runner runner` (a `tessera` binary).
    pub fn new(runner: impl Into<PathBuf>) -> RunnerProcess {
        RunnerProcess {
            runner: runner.into(),
            live: None,
            jobs_per_process: JOBS_PER_PROCESS,
        }
    }

    /// Replaces the process after `n` jobs instead of [`JOBS_PER_PROCESS`] (1: a process
    /// per job).
    pub fn with_jobs_per_process(mut self, n: usize) -> RunnerProcess {
        self.jobs_per_process = n.max(1);
        self
    }

    /// Ends the running process, if any, so that the next job starts a new one.
    pub fn restart(&mut self) {
        if let Some(live) = self.live.take() {
            live.retire();
        }
    }

    /// The process id of the runner now running, if any.
    pub fn pid(&self) -> Option<u32> {
        self.live.as_ref().map(|l| l.child.id())
    }

    /// Runs the job file `job_path`, stopped after `timeout` (counted from when the job
    /// is handed over, including a new process's start): the outcome as a measurement
    /// whose `all_cost` is the job's wall time.
    pub fn run(&mut self, job_path: &Path, timeout: Duration) -> MeasureResult {
        self.run_profiled(job_path, timeout).0
    }

    /// [`run`](Self::run), with where the job's time went in the runner when it was
    /// timed.
    pub fn run_profiled(
        &mut self,
        job_path: &Path,
        timeout: Duration,
    ) -> (MeasureResult, Option<JobProfile>) {
        let start = Instant::now();
        let total = || start.elapsed().as_secs_f64();
        let mut live = match self.hand_over(job_path) {
            Ok(l) => l,
            Err(e) => {
                let r = MeasureResult::failed(MeasureErrorNo::Unknown, e.to_string(), total());
                return (r, None);
            }
        };
        let result = match live.replies.recv_timeout(timeout) {
            Ok(reply) => {
                let (result, profile) = result_of(&reply, total());
                live.jobs += 1;
                let failed_on_device = result.error_no == MeasureErrorNo::RuntimeDevice;
                if failed_on_device || live.jobs >= self.jobs_per_process {
                    live.retire();
                } else {
                    self.live = Some(live);
                }
                return (result, profile);
            }
            Err(RecvTimeoutError::Timeout) => {
                live.kill();
                MeasureResult::failed(
                    MeasureErrorNo::RunTimeout,
                    format!(
                        "the kernel did not finish within {} s",
                        timeout.as_secs_f64()
                    ),
                    total(),
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                let why = live.end();
                MeasureResult::failed(MeasureErrorNo::RuntimeDevice, why, total())
            }
        };
        (result, None)
    }

    /// A process that has been handed the job: the running one, or a new one when none
    /// runs or the running one ended between jobs (ended from outside: the job is not to
    /// blame, so it goes to a new process).
    fn hand_over(&mut self, job_path: &Path) -> Result<Live, HandOverError> {
        let line = format!("{}\n", job_path.display());
        let reused = self.live.take();
        let fresh = reused.is_none();
        let mut live = match reused {
            Some(l) => l,
            None => Live::start(&self.runner).map_err(|source| HandOverError::Start {
                runner: self.runner.clone(),
                source,
            })?,
        };
        live.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        match live
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| live.stdin.flush())
        {
            Ok(()) => Ok(live),
            Err(source) if fresh => Err(HandOverError::EndedBeforeFirstJob {
                how: live.end(),
                source,
            }),
            Err(_) => {
                let _ = live.end();
                self.hand_over(job_path)
            }
        }
    }
}

/// Why a job could not be handed to a runner process (the job then fails as
/// [`MeasureErrorNo::Unknown`] with this message).
#[derive(Debug, thiserror::Error)]
enum HandOverError {
    /// The runner binary did not start.
    #[error("starting {}: {source}", runner.display())]
    Start {
        runner: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A new runner ended before it took the job; `how` is how it ended, with the last
    /// lines of its standard error.
    #[error("{how} before its first job began ({source})")]
    EndedBeforeFirstJob {
        how: String,
        #[source]
        source: std::io::Error,
    },
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        self.restart();
    }
}

impl Live {
    fn start(runner: &Path) -> std::io::Result<Live> {
        let mut child = Command::new(runner)
            .arg("runner")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(std::io::Error::other("its pipes were not opened"));
                }
            };
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // a device library's output before the mark on the same line is dropped
                if let Some(at) = line.find(REPLY_MARK) {
                    if tx.send(line[at + REPLY_MARK.len()..].to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&kept);
        let stderr_reader = std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut k = sink.lock().unwrap_or_else(|e| e.into_inner());
                k.extend_from_slice(&buf[..n]);
                if k.len() > STDERR_KEPT {
                    let cut = k.len() - STDERR_KEPT;
                    k.drain(..cut);
                }
            }
        });
        Ok(Live {
            child,
            stdin,
            replies,
            stderr: kept,
            stderr_reader,
            jobs: 0,
        })
    }

    /// Waits (a moment, then kills it) for a process whose output ended and says how it
    /// ended, with the last lines of its standard error.
    fn end(self) -> String {
        let Live {
            mut child,
            stdin,
            stderr,
            stderr_reader,
            ..
        } = self;
        drop(stdin);
        let status = match wait_or_kill(&mut child, GRACE) {
            Ok(s) => describe_exit(&s),
            Err(e) => format!("could not be waited for ({e})"),
        };
        // all it wrote is read once its standard error closed with it
        let _ = stderr_reader.join();
        let stderr = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
        format!("the runner {status}{}", tail_of(&stderr))
    }

    fn kill(mut self) {
        let _ = wait_or_kill(&mut self.child, Duration::ZERO);
    }

    /// Ends a process between jobs: closing its input ends its loop; one that does not
    /// end soon is killed.
    fn retire(self) {
        let Live {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let _ = wait_or_kill(&mut child, GRACE);
    }
}

/// A runner's reply as a measurement that took `seconds`, and the job's profile.
fn result_of(reply: &str, seconds: f64) -> (MeasureResult, Option<JobProfile>) {
    let result = match serde_json::from_str::<RunReply>(reply.trim()) {
        Ok(RunReply::Ok {
            costs,
            profile,
            at_points,
        }) => {
            let r = MeasureResult {
                costs,
                error_no: MeasureErrorNo::NoError,
                error_msg: None,
                all_cost: seconds,
                timestamp: now(),
                at_points: at_points.map(Box::new),
            };
            return (r, profile);
        }
        Ok(RunReply::WrongAnswer { message }) => {
            MeasureResult::failed(MeasureErrorNo::WrongAnswer, message, seconds)
        }
        Ok(RunReply::LoadFailed { message }) => {
            MeasureResult::failed(MeasureErrorNo::CompileDevice, message, seconds)
        }
        Ok(RunReply::Failed { message }) => {
            MeasureResult::failed(MeasureErrorNo::RuntimeDevice, message, seconds)
        }
        Err(e) => MeasureResult::failed(
            MeasureErrorNo::Unknown,
            format!("unreadable runner output ({e}): {}", reply.trim()),
            seconds,
        ),
    };
    (result, None)
}

/// The last lines of a process's standard error, prefixed for a message.
fn tail_of(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    if lines.is_empty() {
        String::new()
    } else {
        let mut l = lines;
        l.reverse();
        format!(": {}", l.join(" | "))
    }
}

/// "was killed by signal 11 (SIGSEGV)" or "exited with status 3".
fn describe_exit(status: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                _ => "",
            };
            return format!("was killed by signal {sig}{name}");
        }
    }
    match status.code() {
        Some(c) => format!("exited with status {c}"),
        None => "ended abnormally".into(),
    }
}
