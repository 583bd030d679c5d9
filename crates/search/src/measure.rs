//! Measurement of candidate kernels, as TVM's LocalBuilder + LocalRunner do it.
//!
//! A batch of candidates is built in parallel (`n_parallel` workers; any backend, the
//! CPU's or a plugin's, each build under a build timeout), then each built kernel is run
//! in a runner process (`tessera runner`, reused for many jobs: [`crate::runner_process`];
//! see `tessera_runtime::runner`) on the target's device with a run timeout, optionally
//! checked against reference outputs first. A plugin's kernels therefore run in the
//! runner process, never in the tuner's: a hang, a crash or a device fault is that one
//! candidate's error (and the process is replaced). Every failure
//! becomes the typed error of that one candidate ([`MeasureErrorNo`]) with its message,
//! and the batch goes on. After `verbose_after` consecutive failures the measurer
//! reports each further error's message, so a broken setup never looks like a silent
//! stream of "0.00 GFLOPS".

pub use crate::remote::RemoteOptions;
use crate::runner_process::RunnerProcess;
pub use crate::time_profile::MeasureProfile;
use crate::types::{MeasureErrorNo, MeasureResult};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tessera_backends::{Artifact, Backend, BackendError, CpuBackend, Target};
use tessera_ir::PrimFunc;
use tessera_runtime::runner::{make_args_at, CheckSpec, RunJob, SizePoints, TimerConfig};
use tessera_runtime::{Module, NDArray};

/// What can stop measurement as a whole (not one candidate).
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("no `tessera` binary to run kernels in was found (looked in: {looked}); build it with `cargo build -p tessera-cli` or set TESSERA_RUNNER to its path")]
    RunnerNotFound { looked: String },
    #[error("{0}")]
    Io(String),
    #[error("computing the reference outputs: {0}")]
    Reference(String),
}

/// How to measure (TVM's builder and runner options).
#[derive(Clone, Debug)]
pub struct MeasureOptions {
    /// Parallel builds (default: the number of cores).
    pub n_parallel: usize,
    pub build_timeout: Duration,
    pub run_timeout: Duration,
    pub timer: TimerConfig,
    /// Relative and absolute tolerance of the correctness check.
    pub rtol: f64,
    pub atol: f64,
    /// Consecutive errors after which each error's message is reported.
    pub verbose_after: usize,
    /// The `tessera` binary whose `runner` subcommand runs each kernel (default:
    /// `$TESSERA_RUNNER`, else the running binary if it said it can
    /// ([`use_this_binary_as_runner`]), else `tessera` beside the current executable or
    /// one folder up).
    pub runner: Option<PathBuf>,
    /// A simulated, deterministic runner: nothing is built or run; a candidate's cost is
    /// a hash of its lowered program (1–2 ms), its `all_cost` and timestamp 0. Two
    /// searches with the same seed then make the same decisions and the same log.
    pub simulated: bool,
    /// Run on the device servers of an RPC tracker's key instead of here.
    pub rpc: Option<RemoteOptions>,
    /// Jobs one runner process runs before it is replaced
    /// ([`crate::runner_process::JOBS_PER_PROCESS`]; 1: a process per kernel).
    pub jobs_per_runner: usize,
    /// Whether a batch's builds go on while its built candidates run. `None` (the
    /// default) decides by the device: once the runner has said its device does not
    /// compute on the host's cores (a GPU), builds overlap the runs; on the host's cores
    /// (the CPU, OpenCL on a CPU) they take turns, so that no compiler disturbs a
    /// measurement.
    pub overlap_builds: Option<bool>,
    /// A candidate whose first timed calls run slower than this multiple of its task's
    /// best time is measured by those calls alone, not to `min_repeat_ms`
    /// (`TimeEvaluator::slow_cutoff`); `None` times every candidate fully.
    pub slow_cutoff: Option<f64>,
    /// Whether a batch is prepared (loaded and checked) in parallel runners before its
    /// candidates are timed one by one ([`crate::prepare`]). `None` (the default) turns
    /// it on once the runners have said the device computes on the host's cores and
    /// loading and checking took longer than timing (PoCL, whose compilers run there).
    pub prepare_ahead: Option<bool>,
}

/// The default [`MeasureOptions::slow_cutoff`]: candidates over three times slower
/// than their task's best. A third or less of the best throughput is all the search
/// needs to know of them, and on a CPU tuning run about a third of the candidates are
/// that slow.
pub const DEFAULT_SLOW_CUTOFF: f64 = 3.0;

impl Default for MeasureOptions {
    /// TVM's defaults: build timeout 15 s, run timeout 10 s, number 3, repeat 1,
    /// min_repeat_ms 100; errors become verbose after 150 in a row.
    fn default() -> Self {
        MeasureOptions {
            n_parallel: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            build_timeout: Duration::from_secs(15),
            run_timeout: Duration::from_secs(10),
            timer: TimerConfig::default(),
            rtol: 1e-3,
            atol: 1e-4,
            verbose_after: 150,
            runner: None,
            simulated: false,
            rpc: None,
            jobs_per_runner: crate::runner_process::JOBS_PER_PROCESS,
            overlap_builds: None,
            slow_cutoff: Some(DEFAULT_SLOW_CUTOFF),
            prepare_ahead: None,
        }
    }
}

/// The temporary folders of this process's measurements (`tessera-measure-*`, its
/// builds and job files; `tessera-reference-*`), removed when their owner is dropped,
/// and by [`remove_scratch_dirs`] when the process is interrupted (a signal handler
/// exits without running destructors).
static SCRATCH: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A temporary folder registered in [`SCRATCH`] while it lives.
#[derive(Debug)]
struct ScratchDir(tempfile::TempDir);

impl ScratchDir {
    fn new(prefix: &str) -> std::io::Result<ScratchDir> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        SCRATCH
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dir.path().to_path_buf());
        Ok(ScratchDir(dir))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let mut dirs = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
        dirs.retain(|d| d != self.0.path());
    }
}

/// Set once [`remove_scratch_dirs`] has begun: the process is being interrupted, and
/// what its threads measure from now on ran against folders being removed.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the process is being interrupted ([`remove_scratch_dirs`] has begun). The
/// record log appends nothing from then on: a batch under way fails for want of its
/// folders, and those failures are not the candidates' (an interrupted 18-minute tune
/// had logged 64 "writing the job: No such file" errors).
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Removes every measurement folder this process still has (for an interrupt handler,
/// just before the process exits: the runners, in the same process group, are ended
/// by the same signal), after marking the process [`interrupted`].
///
/// A removal is tried again while the folder is still there: the process's other
/// threads go on writing job files and builds into it until it exits, and a file
/// written while `remove_dir_all` walks a folder makes that folder's removal fail
/// (a SIGTERM during a batch had left `batchN/jobK.json` behind).
pub fn remove_scratch_dirs() {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let dirs = std::mem::take(&mut *SCRATCH.lock().unwrap_or_else(|e| e.into_inner()));
    for d in dirs {
        for _ in 0..50 {
            let _ = std::fs::remove_dir_all(&d);
            if !d.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// One candidate: a lowered function, or why it could not be instantiated.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub func: Result<PrimFunc, ProgramError>,
}

/// Why a candidate has no program: its strategy's error, or a schedule (its task's
/// default, a template's configuration) that did not lower, the error kept with its
/// causes.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ProgramError {
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    #[error("{}", with_causes(.0.as_ref()))]
    Lowering(std::sync::Arc<dyn std::error::Error + Send + Sync>),
}

impl ProgramError {
    /// A schedule's failure to lower.
    pub fn lowering(e: impl std::error::Error + Send + Sync + 'static) -> ProgramError {
        ProgramError::Lowering(std::sync::Arc::new(e))
    }
}

/// `e` and its causes on one line.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

/// Expected outputs of a task on the runner's seeded inputs.
pub struct Reference {
    _dir: ScratchDir,
    expected: Vec<PathBuf>,
    seed: u64,
    /// The check's absolute tolerance as a fraction of the largest expected magnitude
    /// (the task DAG's [`tessera_te::ComputeDag::check_atol_of_max`]).
    pub atol_of_max: f64,
}

impl Reference {
    /// Runs `func` (a trusted schedule of the task, e.g. the unscheduled one) natively,
    /// in this process, on the inputs `make_args(.., seed, num_outputs)` gives, and keeps
    /// its last `num_outputs` results. The reference is computed on the host CPU: with
    /// `backend`'s flags when it is the CPU's, else with the default CPU backend.
    pub fn compute(
        backend: &dyn Backend,
        func: &PrimFunc,
        num_outputs: usize,
        seed: u64,
    ) -> Result<Reference, MeasureError> {
        Reference::compute_at(backend, func, num_outputs, seed, None)
    }

    /// [`compute`](Self::compute) for a kernel built for ranges of sizes: at the first
    /// of `sizes`' points.
    pub fn compute_at(
        backend: &dyn Backend,
        func: &PrimFunc,
        num_outputs: usize,
        seed: u64,
        sizes: Option<&SizePoints>,
    ) -> Result<Reference, MeasureError> {
        let err = |e: &dyn std::fmt::Display| MeasureError::Reference(e.to_string());
        let host;
        let backend: &dyn Backend = if backend.target().kind.is_cpu() {
            backend
        } else {
            host = CpuBackend::new(Target::cpu());
            &host
        };
        let dir = ScratchDir::new("tessera-reference-").map_err(|e| err(&e))?;
        let artifact = backend.build(func, dir.path()).map_err(|e| err(&e))?;
        let module = Module::load(&artifact).map_err(|e| err(&e))?;
        let mut args =
            make_args_at(&artifact.params, seed, num_outputs, sizes).map_err(|e| err(&e))?;
        let mut refs: Vec<&mut NDArray> = args.iter_mut().collect();
        module.call(&mut refs).map_err(|e| err(&e))?;
        let first = args.len().saturating_sub(num_outputs);
        let mut expected = Vec::new();
        for (k, a) in args[first..].iter().enumerate() {
            let path = dir.path().join(format!("expected{k}.npy"));
            a.save_npy(&path).map_err(|e| err(&e))?;
            expected.push(path);
        }
        Ok(Reference {
            _dir: dir,
            expected,
            seed,
            atol_of_max: 0.0,
        })
    }
}

/// What a task's candidates run on: the reference outputs of the seeded inputs (when
/// they are checked) and, for a task built for ranges of sizes, the points it is timed
/// at (the reference is then the first point's).
#[derive(Clone, Copy, Default)]
pub struct TaskInputs<'a> {
    pub reference: Option<&'a Reference>,
    pub sizes: Option<&'a SizePoints>,
}

/// A built candidate (its artifact and build seconds) or its failure.
type Built = Result<(Artifact, f64), MeasureResult>;

/// Builds and runs candidates.
pub struct Measurer {
    backend: Arc<dyn Backend>,
    opts: MeasureOptions,
    runner: RunnerProcess,
    dir: ScratchDir,
    consecutive_errors: usize,
    report: Box<dyn FnMut(&str) + Send>,
    batches: usize,
    profile: MeasureProfile,
    /// What the runner said of its device (`JobProfile::on_host_cores`), once it has.
    on_host_cores: Option<bool>,
    /// The seconds per call past which this batch's candidates stop at their first
    /// calls.
    slow_cutoff: Option<f64>,
    /// The `tessera` binary the runners run, and the preparing runners, one per build
    /// worker, started with the first batch that is prepared.
    runner_path: PathBuf,
    preparers: Vec<RunnerProcess>,
}

/// The binary this process runs, registered by a `tessera` binary at start-up.
static THIS_BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Says that the running binary is `tessera` (it has the `runner` subcommand), so that
/// measurement re-executes it instead of looking for another binary: one installed
/// binary is a complete tuner.
pub fn use_this_binary_as_runner() {
    if let Ok(exe) = std::env::current_exe() {
        let _ = THIS_BINARY.set(exe);
    }
}

/// Where the `tessera` binary that runs kernels is (see [`MeasureOptions::runner`]).
pub fn find_runner(explicit: Option<&Path>) -> Result<PathBuf, MeasureError> {
    let mut looked = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = explicit {
        candidates.push(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("TESSERA_RUNNER") {
        candidates.push(PathBuf::from(p));
    }
    if let Some(p) = THIS_BINARY.get() {
        candidates.push(p.clone());
    }
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent().map(Path::to_path_buf);
        for _ in 0..2 {
            if let Some(d) = dir {
                candidates.push(d.join("tessera"));
                dir = d.parent().map(Path::to_path_buf);
            }
        }
    }
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
        looked.push(c.display().to_string());
    }
    Err(MeasureError::RunnerNotFound {
        looked: looked.join(", "),
    })
}

impl Measurer {
    /// A measurer for `backend` (its build timeout is set from `opts`).
    pub fn new(
        backend: impl Backend + 'static,
        opts: MeasureOptions,
    ) -> Result<Measurer, MeasureError> {
        Measurer::with_backend(Box::new(backend), opts)
    }

    /// A measurer for any backend, the CPU's or a plugin's (its build timeout is set
    /// from `opts`). Kernels run on the backend's target's device, in runner processes.
    pub fn with_backend(
        mut backend: Box<dyn Backend>,
        opts: MeasureOptions,
    ) -> Result<Measurer, MeasureError> {
        let runner = find_runner(opts.runner.as_deref())?;
        let jobs_per_runner = opts.jobs_per_runner;
        let dir =
            ScratchDir::new("tessera-measure-").map_err(|e| MeasureError::Io(e.to_string()))?;
        backend.set_build_timeout(opts.build_timeout);
        Ok(Measurer {
            backend: Arc::from(backend),
            opts,
            runner: RunnerProcess::new(runner.clone()).with_jobs_per_process(jobs_per_runner),
            runner_path: runner,
            preparers: Vec::new(),
            dir,
            consecutive_errors: 0,
            report: Box::new(|line| eprintln!("{line}")),
            batches: 0,
            profile: MeasureProfile::default(),
            on_host_cores: None,
            slow_cutoff: None,
        })
    }

    /// Where verbose error reports go (default: standard error).
    pub fn with_report(mut self, report: impl FnMut(&str) + Send + 'static) -> Self {
        self.report = Box::new(report);
        self
    }

    /// Makes the next batch run in a new runner process (a re-measurement wants samples
    /// independent of the process the first measurement ran in).
    pub fn restart_runner(&mut self) {
        self.runner.restart();
    }

    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// Where the measurer's time went so far.
    pub fn profile(&self) -> &MeasureProfile {
        &self.profile
    }

    /// Whether this batch is prepared in parallel runners first (see
    /// [`MeasureOptions::prepare_ahead`]): once on, it stays on.
    fn prepare_ahead(&self) -> bool {
        self.opts.prepare_ahead.unwrap_or_else(|| {
            let (t, p) = (&self.profile.timed, &self.profile.prepared);
            p.jobs > 0
                || (self.on_host_cores == Some(true) && t.jobs > 0 && t.load + t.check > t.timing)
        })
    }

    /// Whether this batch's builds overlap its runs (see
    /// [`MeasureOptions::overlap_builds`]).
    fn overlap_builds(&self) -> bool {
        self.opts
            .overlap_builds
            .unwrap_or(self.on_host_cores == Some(false))
    }

    /// Measures a batch: builds in parallel, then runs each built kernel in a runner
    /// process; the runs start as the builds finish when they overlap. `num_outputs`:
    /// how many of the last parameters are outputs. Every candidate is timed fully.
    pub fn measure(
        &mut self,
        candidates: &[Candidate],
        num_outputs: usize,
        reference: Option<&Reference>,
    ) -> Vec<MeasureResult> {
        let inputs = TaskInputs {
            reference,
            sizes: None,
        };
        self.measure_task(candidates, num_outputs, inputs, None)
    }

    /// [`measure`](Self::measure) for a task whose best time so far is `best_known`
    /// (seconds): a candidate far slower is timed by its first calls
    /// ([`MeasureOptions::slow_cutoff`]).
    pub fn measure_task(
        &mut self,
        candidates: &[Candidate],
        num_outputs: usize,
        inputs: TaskInputs<'_>,
        best_known: Option<f64>,
    ) -> Vec<MeasureResult> {
        self.slow_cutoff = best_known
            .zip(self.opts.slow_cutoff)
            .map(|(best, factor)| best * factor)
            .filter(|cut| cut.is_finite() && *cut > 0.0);
        self.batches += 1;
        if self.opts.simulated {
            return candidates.iter().map(simulated_result).collect();
        }
        self.profile.batches += 1;
        self.profile.candidates += candidates.len();
        let out_dir = self.dir.path().join(format!("batch{}", self.batches));
        let started = std::time::Instant::now();
        if let Some(rpc) = self.opts.rpc.clone() {
            let builds = self.build_all(candidates, &out_dir);
            self.profile.build_wait += started.elapsed().as_secs_f64();
            let jobs: Vec<Result<(RunJob, f64), MeasureResult>> = builds
                .into_iter()
                .map(|b| b.map(|(a, build_s)| (self.job(&a, num_outputs, inputs), build_s)))
                .collect();
            let ran = Instant::now();
            let results = crate::remote::measure_batch(&rpc, jobs, self.opts.run_timeout);
            self.profile.run += ran.elapsed().as_secs_f64();
            for r in &results {
                self.note(r);
            }
            return results;
        }
        let overlap = self.overlap_builds();
        if overlap {
            self.profile.overlapped_batches += 1;
        }
        let results = if overlap {
            self.build_while_running(candidates, num_outputs, inputs, &out_dir)
        } else {
            let builds = self.build_all(candidates, &out_dir);
            self.profile.build_wait += started.elapsed().as_secs_f64();
            tracing::debug!(
                batch = self.batches,
                candidates = candidates.len(),
                seconds = started.elapsed().as_secs_f64(),
                "built a measurement batch"
            );
            let prepared = if self.prepare_ahead() {
                self.prepare(&builds, num_outputs, inputs, &out_dir)
            } else {
                vec![None; builds.len()]
            };
            builds
                .into_iter()
                .zip(prepared)
                .enumerate()
                .map(|(i, (built, p))| self.finish(i, built, p, num_outputs, inputs, &out_dir))
                .collect()
        };
        tracing::debug!(
            batch = self.batches,
            ok = results.iter().filter(|r| r.is_ok()).count(),
            overlapped = overlap,
            seconds = started.elapsed().as_secs_f64(),
            "measured a batch"
        );
        results
    }

    /// Runs each candidate as soon as it is built, while the builders go on with the
    /// next ones (a device that does not compute on the host's cores).
    fn build_while_running(
        &mut self,
        candidates: &[Candidate],
        num_outputs: usize,
        inputs: TaskInputs<'_>,
        out_dir: &Path,
    ) -> Vec<MeasureResult> {
        let slots = BuildSlots::new(candidates.len());
        let backend = Arc::clone(&self.backend);
        let (timeout, workers) = (self.opts.build_timeout, self.opts.n_parallel);
        std::thread::scope(|scope| {
            slots.spawn_builders(scope, &backend, candidates, out_dir, timeout, workers);
            (0..candidates.len())
                .map(|i| {
                    let waited = Instant::now();
                    let built = slots.take(i);
                    self.profile.build_wait += waited.elapsed().as_secs_f64();
                    self.finish(i, built, None, num_outputs, inputs, out_dir)
                })
                .collect()
        })
    }

    /// Candidate `i`'s result: its build's failure, its preparation's failure, or its
    /// run (unchecked when its preparation checked it).
    fn finish(
        &mut self,
        i: usize,
        built: Built,
        prepared: Option<MeasureResult>,
        num_outputs: usize,
        inputs: TaskInputs<'_>,
        out_dir: &Path,
    ) -> MeasureResult {
        let r = match (built, prepared) {
            (Err(r), _) => {
                self.profile.build_work += r.all_cost;
                r
            }
            (Ok((_, build_s)), Some(mut failed)) if !failed.is_ok() => {
                self.profile.build_work += build_s;
                failed.all_cost += build_s;
                failed
            }
            (Ok((artifact, build_s)), prepared) => {
                self.profile.build_work += build_s;
                let mut job = self.job(&artifact, num_outputs, inputs);
                if prepared.is_some() {
                    // checked when it was prepared
                    job.check = None;
                }
                self.run_one(&job, i, build_s, out_dir)
            }
        };
        self.note(&r);
        r
    }

    /// Loads and checks every built candidate in parallel runners (see
    /// [`crate::prepare`]): `Some` outcome for each one prepared (an error is its
    /// result; `Ok` means it was checked), `None` for the others.
    fn prepare(
        &mut self,
        builds: &[Built],
        num_outputs: usize,
        inputs: TaskInputs<'_>,
        out_dir: &Path,
    ) -> Vec<Option<MeasureResult>> {
        let jobs: Vec<Option<PathBuf>> = builds
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (artifact, _) = b.as_ref().ok()?;
                let mut job = self.job(artifact, num_outputs, inputs);
                job.prepare_only = true;
                let path = out_dir.join(format!("prepare{i}.json"));
                let bytes = serde_json::to_vec(&job).ok()?;
                std::fs::write(&path, bytes).ok()?;
                Some(path)
            })
            .collect();
        let workers = self.opts.n_parallel.max(1);
        while self.preparers.len() < workers {
            let p = RunnerProcess::new(self.runner_path.clone())
                .with_jobs_per_process(self.opts.jobs_per_runner);
            self.preparers.push(p);
        }
        let started = Instant::now();
        let outcomes =
            crate::prepare::prepare_all(&mut self.preparers, &jobs, self.opts.run_timeout);
        self.profile.prepare += started.elapsed().as_secs_f64();
        outcomes
            .into_iter()
            .map(|o| {
                let (r, profile) = o?;
                if let Some(p) = profile {
                    self.profile.prepared.add(&p);
                }
                Some(r)
            })
            .collect()
    }

    /// Counts consecutive errors; past the threshold, reports each one.
    fn note(&mut self, r: &MeasureResult) {
        if !r.is_ok() {
            tracing::trace!(error = %r.error_no, message = r.error_msg.as_deref().unwrap_or(""), "a measurement failed");
        }
        if r.is_ok() {
            self.consecutive_errors = 0;
            return;
        }
        self.consecutive_errors += 1;
        let n = self.consecutive_errors;
        if n == self.opts.verbose_after {
            (self.report)(&format!(
                "{n} measurements in a row failed; showing each error from now on"
            ));
        }
        if n >= self.opts.verbose_after {
            let msg = r.error_msg.as_deref().unwrap_or("");
            let first: String = msg.lines().take(8).collect::<Vec<_>>().join("\n    ");
            (self.report)(&format!("  {}: {first}", r.error_no));
        }
    }

    /// Builds every candidate (see [`BuildSlots`]) and waits for all of them.
    fn build_all(&self, candidates: &[Candidate], out_dir: &Path) -> Vec<Built> {
        let slots = BuildSlots::new(candidates.len());
        let backend = Arc::clone(&self.backend);
        let (timeout, workers) = (self.opts.build_timeout, self.opts.n_parallel);
        std::thread::scope(|scope| {
            slots.spawn_builders(scope, &backend, candidates, out_dir, timeout, workers);
            (0..candidates.len()).map(|i| slots.take(i)).collect()
        })
    }

    /// The job that runs `artifact`: this measurer's target, timer and check.
    fn job(&self, artifact: &Artifact, num_outputs: usize, inputs: TaskInputs<'_>) -> RunJob {
        RunJob {
            target: self.backend.target().to_string(),
            artifact: artifact.clone(),
            timer: self.opts.timer,
            seed: inputs.reference.map_or(0, |r| r.seed),
            num_outputs,
            check: inputs.reference.map(|r| CheckSpec {
                expected: r.expected.clone(),
                rtol: self.opts.rtol,
                atol: self.opts.atol,
                atol_of_max: r.atol_of_max,
            }),
            slow_cutoff: self.slow_cutoff,
            prepare_only: false,
            sizes: inputs.sizes.cloned(),
        }
    }

    /// Runs candidate `index`'s `job` in the timing runner (its file in `out_dir`);
    /// `build_s` is added to the result's `all_cost`.
    fn run_one(
        &mut self,
        job: &RunJob,
        index: usize,
        build_s: f64,
        out_dir: &Path,
    ) -> MeasureResult {
        let start = Instant::now();
        let total = |start: Instant| build_s + start.elapsed().as_secs_f64();
        let job_path = out_dir.join(format!("job{index}.json"));
        let written = serde_json::to_vec(job)
            .map_err(|e| e.to_string())
            .and_then(|b| std::fs::write(&job_path, b).map_err(|e| e.to_string()));
        if let Err(e) = written {
            return MeasureResult::failed(
                MeasureErrorNo::Unknown,
                format!("writing the job: {e}"),
                total(start),
            );
        }
        let ran = Instant::now();
        let (mut r, profile) = self.runner.run_profiled(&job_path, self.opts.run_timeout);
        self.profile.run += ran.elapsed().as_secs_f64();
        if let Some(p) = profile {
            self.profile.timed.add(&p);
            self.on_host_cores = Some(p.on_host_cores);
        }
        r.all_cost += build_s;
        r
    }
}

/// A batch's builds: each candidate's result in its slot, filled by builder threads and
/// taken, in order, by the thread that runs them.
///
/// Each candidate builds into its own folder of the batch's folder. The folders are
/// made with `create_dir`, never `create_dir_all`: once an interrupt has removed the
/// scratch folder, a builder still running fails its candidate rather than making the
/// folder again (a SIGTERM during a batch had left an empty `batchN` behind).
struct BuildSlots {
    slots: std::sync::Mutex<Vec<Option<Built>>>,
    filled: std::sync::Condvar,
    /// The next candidate a builder takes.
    next: std::sync::atomic::AtomicUsize,
}

impl BuildSlots {
    fn new(n: usize) -> BuildSlots {
        BuildSlots {
            slots: std::sync::Mutex::new((0..n).map(|_| None).collect()),
            filled: std::sync::Condvar::new(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn put(&self, i: usize, built: Built) {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(built);
        self.filled.notify_all();
    }

    /// Starts `workers` builder threads on `scope` (at most one per candidate) that
    /// build the candidates in order into `out_dir`; a folder that cannot be made fails
    /// every candidate.
    fn spawn_builders<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        backend: &'env Arc<dyn Backend>,
        candidates: &'env [Candidate],
        out_dir: &'env Path,
        timeout: Duration,
        workers: usize,
    ) {
        if let Err(e) = std::fs::create_dir(out_dir) {
            let why = format!("creating {}: {e}", out_dir.display());
            for i in 0..candidates.len() {
                let failed = MeasureResult::failed(MeasureErrorNo::CompileHost, why.clone(), 0.0);
                self.put(i, Err(failed));
            }
            return;
        }
        for _ in 0..workers.max(1).min(candidates.len().max(1)) {
            scope.spawn(move || loop {
                let i = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(c) = candidates.get(i) else { break };
                // a folder per candidate: two candidates whose programs (and so their
                // artifacts' names) are the same never build into one file
                let dir = out_dir.join(format!("c{i}"));
                let r = match std::fs::create_dir(&dir) {
                    Ok(()) => build_guarded(backend, c, &dir, timeout),
                    Err(e) => Err(MeasureResult::failed(
                        MeasureErrorNo::CompileHost,
                        format!("creating {}: {e}", dir.display()),
                        0.0,
                    )),
                };
                self.put(i, r);
            });
        }
    }

    /// Waits for slot `i` and takes its build.
    fn take(&self, i: usize) -> Built {
        let guard = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut slots = self
            .filled
            .wait_while(guard, |s| s[i].is_none())
            .unwrap_or_else(|e| e.into_inner());
        slots[i].take().expect("the slot was filled")
    }
}

/// The simulated runner's result for `c`: a cost from a hash of the printed program.
fn simulated_result(c: &Candidate) -> MeasureResult {
    use std::hash::{Hash, Hasher};
    let mut r = match &c.func {
        Ok(f) => {
            // `DefaultHasher::new` has fixed keys: the same program gets the same cost in
            // every run of this binary
            let mut h = std::collections::hash_map::DefaultHasher::new();
            f.to_string().hash(&mut h);
            let unit = (h.finish() % 1_000_000) as f64 / 1e6;
            MeasureResult {
                costs: vec![1e-3 * (1.0 + unit)],
                error_no: MeasureErrorNo::NoError,
                error_msg: None,
                all_cost: 0.0,
                timestamp: 0,
                at_points: None,
            }
        }
        Err(e) => MeasureResult::failed(MeasureErrorNo::Instantiation, e.to_string(), 0.0),
    };
    r.timestamp = 0;
    r
}

/// How long past the build timeout a build may take before the measurer stops waiting
/// for it: the CPU backend kills its compiler at the timeout itself, so this guard only
/// fires for a backend (a plugin's) that cannot stop its own build.
const BUILD_GRACE: Duration = Duration::from_secs(2);

/// Builds one candidate on a thread of its own and waits at most the build timeout (and
/// a grace period) for it: a plugin compiler that hangs costs that candidate a
/// `BuildTimeout` and a thread that finishes (or not) in the background, never the batch.
fn build_guarded(
    backend: &Arc<dyn Backend>,
    c: &Candidate,
    out_dir: &Path,
    timeout: Duration,
) -> Built {
    let (tx, rx) = std::sync::mpsc::channel();
    let (b, c2, dir) = (Arc::clone(backend), c.clone(), out_dir.to_path_buf());
    let start = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("tessera-build".into())
        .spawn(move || {
            let _ = tx.send(build_one(b.as_ref(), &c2, &dir));
        });
    if let Err(e) = spawned {
        return Err(MeasureResult::failed(
            MeasureErrorNo::CompileHost,
            format!("cannot start a build thread: {e}"),
            0.0,
        ));
    }
    match rx.recv_timeout(timeout + BUILD_GRACE) {
        Ok(built) => built,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(MeasureResult::failed(
            MeasureErrorNo::BuildTimeout,
            format!(
                "the {} backend did not finish building within {} s (waited {:.1} s; the \
                 build goes on in the background until it ends)",
                backend.target().kind,
                timeout.as_secs_f64(),
                start.elapsed().as_secs_f64()
            ),
            start.elapsed().as_secs_f64(),
        )),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(MeasureResult::failed(
            MeasureErrorNo::CompileHost,
            "the build thread ended without a result".to_string(),
            start.elapsed().as_secs_f64(),
        )),
    }
}

/// Builds one candidate; every failure is that candidate's result.
fn build_one(backend: &dyn Backend, c: &Candidate, out_dir: &Path) -> Built {
    let start = Instant::now();
    let func = match &c.func {
        Ok(f) => f,
        Err(e) => {
            return Err(MeasureResult::failed(
                MeasureErrorNo::Instantiation,
                e.to_string(),
                0.0,
            ))
        }
    };
    // A panic in code generation is this candidate's error, not the tuner's.
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        backend.build(func, out_dir)
    }));
    let secs = start.elapsed().as_secs_f64();
    match built {
        Ok(Ok(a)) => Ok((a, secs)),
        Ok(Err(e)) => {
            let kind = match e {
                BackendError::CompileTimeout { .. } => MeasureErrorNo::BuildTimeout,
                BackendError::Unsupported { .. } => MeasureErrorNo::Instantiation,
                _ => MeasureErrorNo::CompileHost,
            };
            Err(MeasureResult::failed(kind, e.to_string(), secs))
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(MeasureResult::failed(
                MeasureErrorNo::CompileHost,
                format!("code generation panicked: {msg}"),
                secs,
            ))
        }
    }
}
