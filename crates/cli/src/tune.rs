//! `tessera tune`'s arguments, its measurement options, and the end of a network's
//! tuning: the in-network check (`search::network_check`), then the network built
//! untuned and with the history best, and both timed. The session itself is built in
//! `autosched.rs`.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tessera_driver::tune::MeasureOptions;
use tessera_runtime::runner::TimerConfig;

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Tune with schedule templates (AutoTVM) instead of the auto-scheduler.
    #[arg(long)]
    pub(crate) templates: bool,
    #[command(flatten)]
    pub(crate) net: crate::network::NetworkArgs,
    /// One operator instead of a network: any name of the operator catalog
    /// (`tessera op --list`), e.g. `matmul` (--op-shape M,N,K), `conv2d` (NHWC,
    /// N,H,W,C_IN,C_OUT,KH,KW), `max_pool2d` (N,H,W,C,KH,KW); convolutions and pools
    /// take --stride, --pad and --dilation as in `tessera op`. Templates fit matmul, dense, batch_matmul,
    /// conv2d, conv2d_nchw, conv2d_nchwc and depthwise_conv2d.
    #[arg(long, conflicts_with_all = ["network", "onnx"])]
    pub(crate) op: Option<String>,
    /// With --op: the operator's sizes, comma-separated, in the order `tessera op
    /// --list` gives (matmul M,N,K; conv2d N,H,W,C_IN,C_OUT,KH,KW; …). `tessera op`
    /// takes the same as --op-shape or --shape.
    #[arg(long, requires = "op", value_name = "DIMS", value_delimiter = ',')]
    pub(crate) op_shape: Vec<i64>,
    /// With --op: stride, padding (default 0, or `same`), dilation, … as `tessera op`.
    #[command(flatten)]
    pub(crate) op_attrs: crate::op::OpAttrArgs,
    /// With --templates, the template tuner (the same as --strategy): xgb (the default,
    /// with TVM's variants: xgb_knob, xgb_itervar, xgb_curve, xgb_rank,
    /// xgb_rank_binary_curve, …), ga, random, gridsearch.
    #[arg(long)]
    pub(crate) tuner: Option<String>,
    /// Measurements in all (over every task, the log's earlier ones included: a log
    /// given again resumes); per task with --task-scheduler sequential.
    #[arg(long, default_value_t = 64)]
    pub(crate) trials: usize,
    /// Stop when the estimated network latency has not improved for this many
    /// measurements (with --task-scheduler sequential: stop a task when its best has
    /// not).
    #[arg(long)]
    pub(crate) early_stopping: Option<usize>,
    /// The record log (appended to).
    #[arg(long)]
    pub(crate) log: PathBuf,
    /// Seed of the tuner.
    #[arg(long, default_value_t = 0)]
    pub(crate) tuner_seed: u64,
    /// Timed runs per measurement.
    #[arg(long, default_value_t = 3)]
    pub(crate) number: usize,
    #[arg(long = "min-repeat-ms", default_value_t = 50.0)]
    pub(crate) min_repeat_ms: f64,
    /// Timed repeats per measurement, each of `--number` runs (grown to last
    /// --min-repeat-ms); the record keeps one cost per repeat.
    #[arg(long, default_value_t = 1)]
    pub(crate) repeat: usize,
    /// Flush the CPU caches before each repeat (TVM's `enable_cpu_cache_flush`), so that
    /// a kernel is timed with its weights out of the caches, as inside a network run,
    /// rather than warm from the run before. With `--number 1 --min-repeat-ms 0` every
    /// timed run starts cold.
    #[arg(long)]
    pub(crate) cache_flush: bool,
    /// Seconds a candidate may run (all its timed runs together) before it is killed and
    /// recorded as a run timeout.
    #[arg(long = "run-timeout", default_value_t = 10.0)]
    pub(crate) run_timeout: f64,
    /// Seconds a candidate's compilation may take before it is stopped and recorded as
    /// a build timeout (TVM's builder `timeout`).
    #[arg(long = "build-timeout", default_value_t = 15.0)]
    pub(crate) build_timeout: f64,
    /// Candidates one runner process measures before it is replaced (one after a crash,
    /// a hang or a device error is replaced at once); 1 starts a process per candidate.
    #[arg(long = "jobs-per-runner", default_value_t = tessera_driver::runner::JOBS_PER_PROCESS)]
    pub(crate) jobs_per_runner: usize,
    /// A candidate whose first timed runs are over this many times slower than its
    /// task's best so far is measured by those runs alone, not to --min-repeat-ms
    /// (0: every candidate is timed fully).
    #[arg(long = "slow-cutoff", default_value_t = tessera_driver::tune::DEFAULT_SLOW_CUTOFF)]
    pub(crate) slow_cutoff: f64,
    /// Whether the next candidates are built while others run: `auto` does so once the
    /// device says it does not compute on the host's cores (a GPU), `on`, `off`.
    #[arg(long = "overlap-builds", value_enum, default_value_t = Overlap::Auto)]
    pub(crate) overlap_builds: Overlap,
    /// Skip the correctness check of each candidate against the reference.
    #[arg(long)]
    pub(crate) no_check: bool,
    /// Measure nothing: each candidate's cost is a hash of its program, and its timestamp
    /// 0 (a deterministic runner, for testing that a seed reproduces a search and its log).
    #[arg(long)]
    pub(crate) simulated_runner: bool,
    #[command(flatten)]
    pub(crate) rpc: crate::rpc::RpcArgs,
    /// Measurements per round of the task scheduler (one batch of one task).
    #[arg(long, default_value_t = 64)]
    pub(crate) per_round: usize,
    /// The search strategy, by name, from the plugins (`tessera plugins list`):
    /// `sketch` (the auto-scheduler, the default), a template tuner with --templates
    /// (xgb, ga, random, gridsearch, …), or a third party's.
    #[arg(long)]
    pub(crate) strategy: Option<String>,
    /// How rounds go to tasks (TVM's task scheduler): `gradient` (TVM's) or
    /// `round-robin`; `sequential` tunes one task after another as AutoTVM's
    /// `tune_tasks` does, each to --trials (at most its configuration space), stopping a
    /// task early with --early-stopping, and prints AutoTVM's `[Task i/n]` line.
    #[arg(long, default_value = "gradient")]
    pub(crate) task_scheduler: String,
    /// Auto-scheduler: the cost model, `xgb` (pack-sum gradient-boosted trees, TVM's XGBModel) or `random`.
    #[arg(long, default_value = "xgb")]
    pub(crate) model: String,
    /// Auto-scheduler: start the cost model from nothing, not from the earlier logs of
    /// this target in the model cache (this run's log still goes into the cache).
    #[arg(long, conflicts_with = "model_from")]
    pub(crate) fresh_model: bool,
    /// Auto-scheduler: start the cost model from these logs only (each indexed in the
    /// model cache by an earlier `tessera tune` with it), not from every other log of
    /// the target. Repeatable.
    #[arg(long, value_name = "LOG")]
    pub(crate) model_from: Vec<PathBuf>,
    /// Auto-scheduler: the model cache, where each log's programs and their measured
    /// speed are kept per target for later runs to learn from (default:
    /// $TESSERA_MODEL_CACHE, `off` for none, else $XDG_CACHE_HOME/tessera/models, else
    /// ~/.cache/tessera/models).
    #[arg(long, value_name = "DIR")]
    pub(crate) model_cache: Option<PathBuf>,
    /// Auto-scheduler: members of each generation of the evolutionary search.
    #[arg(long, default_value_t = 256)]
    pub(crate) population: usize,
    /// Auto-scheduler: the fraction of the model's picks spread evenly over the
    /// sketches, each sketch's best predicted states with tile sizes never measured
    /// (0 picks the best predicted overall only, as TVM does).
    #[arg(long, default_value_t = 0.25)]
    pub(crate) sketch_share: f64,
    /// Auto-scheduler: the largest program proposed, in IR nodes once its unrolled
    /// loops are expanded (0: no limit). Larger ones compile for seconds and run slowly.
    #[arg(long, default_value_t = 4096, value_name = "NODES")]
    pub(crate) max_code_size: u64,
    /// After tuning, measure the fastest N programs of every task again (0: not at all),
    /// so that the history best is the program with the lowest median over all of its
    /// measurements rather than the luckiest single one (auto-scheduler only).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub(crate) remeasure_top: usize,
    /// How many more runs each of those programs gets, each in a fresh process.
    #[arg(long, default_value_t = 3, value_name = "RUNS")]
    pub(crate) remeasure_runs: usize,
    /// After tuning a network, do not time each tuned kernel inside whole runs against
    /// its default schedule. The check (on by default, here and not over RPC or on VTA)
    /// appends its times to the log, and builds with the log then use the default
    /// schedule for a group whose tuned kernel ran slower in the network.
    #[arg(long)]
    pub(crate) no_network_check: bool,
    /// After tuning a network, the rounds of the closing comparison of its untuned and
    /// tuned builds (each round times both, alternating which goes first; a speed-up is
    /// claimed only when every round agrees). 0 skips it: each round runs the network
    /// twice, which on a device where a run takes seconds (a Mali board, PoCL) is long.
    #[arg(long, default_value_t = COMPARE_ROUNDS, value_name = "ROUNDS")]
    pub(crate) compare_rounds: usize,
    /// Resume from the log (which must exist): its measurements count against
    /// --trials and seed the search and the model. A log given again is read the same
    /// way without this flag; with it, a missing log is an error.
    #[arg(long)]
    pub(crate) resume: bool,
    /// A network with runtime sizes (a --shape range): a point of the ranges its kernels
    /// are timed at, one value per size in the order the --shape arguments name them,
    /// `:`-separated (`--sample 8 --sample 32 --sample 128 --sample 384`; `--sample 1:64`
    /// for `seq` and `past`). Each candidate's cost is the points' times, each weighted
    /// by its time per unit of size. Default: the largest values and each quarter of
    /// them, up to four points.
    #[arg(long, value_name = "V[:V…]", value_parser = tessera_driver::range_tune::parse_sample)]
    pub(crate) sample: Vec<Vec<i64>>,
    /// Print a JSON summary on stdout at the end (trials, each task's best, the
    /// estimated latency, untuned and tuned network times); the tables go to stderr.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `--overlap-builds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Overlap {
    Auto,
    On,
    Off,
}

/// The measurement options of `tessera tune` (both modes): builds on every host core,
/// `--repeat` timed repeats of `--number` runs (caches flushed before each with
/// `--cache-flush`), the run timeout.
pub(crate) fn measure_options(args: &TuneArgs) -> Result<MeasureOptions> {
    if !(args.slow_cutoff >= 0.0 && args.slow_cutoff.is_finite()) {
        anyhow::bail!("--slow-cutoff: a factor of 0 or more (0: no cutoff)");
    }
    // `n_parallel` stays the default, the host's cores: builds run on the host, whatever
    // the device's cores are (a GPU's SMs, 132 on an H200)
    Ok(MeasureOptions {
        run_timeout: Duration::try_from_secs_f64(args.run_timeout)
            .ok()
            .filter(|d| !d.is_zero())
            .context("--run-timeout: a positive number of seconds")?,
        build_timeout: Duration::try_from_secs_f64(args.build_timeout)
            .ok()
            .filter(|d| !d.is_zero())
            .context("--build-timeout: a positive number of seconds")?,
        timer: TimerConfig {
            number: args.number.max(1),
            repeat: args.repeat.max(1),
            min_repeat_ms: args.min_repeat_ms,
            cache_flush: args.cache_flush,
        },
        simulated: args.simulated_runner,
        jobs_per_runner: args.jobs_per_runner.max(1),
        rpc: crate::rpc::remote_options(&args.rpc)?,
        slow_cutoff: (args.slow_cutoff > 0.0).then_some(args.slow_cutoff),
        overlap_builds: match args.overlap_builds {
            Overlap::Auto => None,
            Overlap::On => Some(true),
            Overlap::Off => Some(false),
        },
        ..MeasureOptions::default()
    })
}

/// Rounds of the closing comparison, each timing both builds (alternating which goes
/// first).
const COMPARE_ROUNDS: usize = 5;
