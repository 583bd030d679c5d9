//! `tessera tune --templates`: AutoTVM-style template tuning of a network's conv2d /
//! dense / matmul tasks (or of one operator), every measurement appended to a record log,
//! then the network built untuned and with the history best, and both timed.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use tessera_autotvm::network::{extract_template_tasks, NetworkTemplateTask};
use tessera_autotvm::templates::{TemplateKind, TemplateTask};
use tessera_autotvm::tune::{progress_line, tune, TuneOptions};
use tessera_autotvm::tuners::{GaOptions, GaTuner, GridSearchTuner, RandomTuner, Tuner};
use tessera_autotvm::xgb::{XgbOptions, XgbTuner};
use tessera_backends::Backend;
use tessera_runtime::runner::TimerConfig;
use tessera_runtime::{NDArray, TimeEvaluator, TimeResult};
use tessera_search::measure::{MeasureOptions, Measurer, Reference};
use tessera_search::record::{Record, RecordWriter};
use tessera_search::ScheduleDesc;

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Tune with schedule templates (AutoTVM) instead of the auto-scheduler.
    #[arg(long)]
    pub(crate) templates: bool,
    #[command(flatten)]
    pub(crate) net: crate::network::NetworkArgs,
    /// One operator instead of a network: `matmul` or `dense` (--op-shape M,N,K),
    /// `batch_matmul` (B,M,N,K), `conv2d` (NHWC), `conv2d_nchw` or `conv2d_nchwc` (the
    /// blocked NCHW{n}c form; N,H,W,C_IN,C_OUT,KH,KW), `depthwise_conv2d` (NHWC,
    /// N,H,W,C,KH,KW); convolutions have stride 1 and same padding.
    #[arg(long, conflicts_with_all = ["network", "onnx"])]
    pub(crate) op: Option<String>,
    #[arg(long, requires = "op")]
    pub(crate) op_shape: Option<String>,
    /// The tuner: xgb (with TVM's variants: xgb_knob, xgb_itervar, xgb_curve, xgb_rank,
    /// xgb_rank_binary_curve, …), ga, random, gridsearch.
    #[arg(long, default_value = "xgb")]
    pub(crate) tuner: String,
    /// Measurements: per task with --templates; in all (over every task, the log's
    /// earlier ones included) for the auto-scheduler.
    #[arg(long, default_value_t = 64)]
    pub(crate) trials: usize,
    /// Stop a task (--templates) or the whole run (the auto-scheduler) when its best
    /// (the estimated network latency) has not improved for this many measurements.
    #[arg(long)]
    pub(crate) early_stopping: Option<usize>,
    /// The record log (appended to).
    #[arg(long)]
    pub(crate) log: PathBuf,
    /// Seed of the tuner.
    #[arg(long, default_value_t = 0)]
    pub(crate) tuner_seed: u64,
    /// Candidates per measurement batch.
    #[arg(long, default_value_t = 8)]
    pub(crate) measure_batch: usize,
    /// Timed runs per measurement.
    #[arg(long, default_value_t = 3)]
    pub(crate) number: usize,
    #[arg(long = "min-repeat-ms", default_value_t = 50.0)]
    pub(crate) min_repeat_ms: f64,
    /// Seconds a candidate may run (all its timed runs together) before it is killed and
    /// recorded as a run timeout.
    #[arg(long = "run-timeout", default_value_t = 10.0)]
    pub(crate) run_timeout: f64,
    /// Skip the correctness check of each candidate against the reference.
    #[arg(long)]
    pub(crate) no_check: bool,
    /// Measure nothing: each candidate's cost is a hash of its program, and its timestamp
    /// 0 (a deterministic runner, for testing that a seed reproduces a search and its log).
    #[arg(long)]
    pub(crate) simulated_runner: bool,
    /// Auto-scheduler: measurements per round of the task scheduler.
    #[arg(long, default_value_t = 64)]
    pub(crate) per_round: usize,
    /// The search strategy, by name, from the plugins (`tessera plugins list`):
    /// `sketch` (the auto-scheduler, the default), a template tuner with --templates
    /// (xgb, ga, random, gridsearch, …), or a third party's.
    #[arg(long)]
    pub(crate) strategy: Option<String>,
    /// How rounds go to tasks (TVM's task scheduler): `gradient` (TVM's) or
    /// `round-robin`.
    #[arg(long, default_value = "gradient")]
    pub(crate) task_scheduler: String,
    /// Auto-scheduler: the cost model, `xgb` (pack-sum XGBoost) or `random`.
    #[arg(long, default_value = "xgb")]
    pub(crate) model: String,
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
    /// Resume from the log (which must exist): its measurements count against
    /// --trials and seed the search and the model. A log given again is read the same
    /// way without this flag; with it, a missing log is an error.
    #[arg(long)]
    pub(crate) resume: bool,
}

/// The measurement options of `tessera tune` (both modes): builds on every core, one
/// timed repeat of `--number` runs, the run timeout.
pub(crate) fn measure_options(args: &TuneArgs, backend: &dyn Backend) -> Result<MeasureOptions> {
    Ok(MeasureOptions {
        n_parallel: backend.hardware_params().num_cores.max(1),
        run_timeout: Duration::try_from_secs_f64(args.run_timeout)
            .ok()
            .filter(|d| !d.is_zero())
            .context("--run-timeout: a positive number of seconds")?,
        timer: TimerConfig {
            number: args.number.max(1),
            repeat: 1,
            min_repeat_ms: args.min_repeat_ms,
            cache_flush: false,
        },
        simulated: args.simulated_runner,
        ..MeasureOptions::default()
    })
}

pub(crate) fn parse_dims(s: &str) -> Result<Vec<i64>> {
    s.split(',')
        .map(|d| d.trim().parse::<i64>().ok().filter(|&v| v > 0))
        .collect::<Option<Vec<i64>>>()
        .with_context(|| format!("--op-shape `{s}`: positive integers separated by commas"))
}

/// The template kind of `--op OP --op-shape DIMS`; convolutions have stride 1 and "same"
/// padding.
fn op_kind(op: &str, dims: &[i64], lanes: i64) -> Result<TemplateKind> {
    let same =
        |kh: i64, kw: i64| tessera_te::ops::Conv2dAttrs::new((1, 1), (kh / 2, kw / 2), (1, 1));
    Ok(match (op, dims) {
        ("matmul", [m, n, k]) => TemplateKind::Matmul {
            m: *m,
            n: *n,
            k: *k,
        },
        ("dense", [m, n, k]) => TemplateKind::Dense {
            m: *m,
            n: *n,
            k: *k,
        },
        ("batch_matmul", [b, m, n, k]) => TemplateKind::BatchMatmul {
            b: *b,
            m: *m,
            n: *n,
            k: *k,
        },
        ("conv2d" | "conv2d_nhwc", [n, h, w, ci, co, kh, kw]) => TemplateKind::Conv2dNhwc {
            n: *n,
            h: *h,
            w: *w,
            ci: *ci,
            co: *co,
            kh: *kh,
            kw: *kw,
            attrs: same(*kh, *kw),
        },
        ("conv2d_nchw", [n, h, w, ci, co, kh, kw]) => TemplateKind::Conv2dNchw {
            n: *n,
            h: *h,
            w: *w,
            ci: *ci,
            co: *co,
            kh: *kh,
            kw: *kw,
            attrs: same(*kh, *kw),
        },
        ("conv2d_nchwc", [n, h, w, ci, co, kh, kw]) => {
            let (ib, ob) = TemplateKind::nchwc_blocks(*ci, *co, lanes);
            TemplateKind::Conv2dNchwc {
                n: *n,
                h: *h,
                w: *w,
                ci: *ci,
                co: *co,
                kh: *kh,
                kw: *kw,
                ib,
                ob,
                attrs: same(*kh, *kw),
            }
        }
        ("depthwise_conv2d", [n, h, w, c, kh, kw]) => TemplateKind::DepthwiseNhwc {
            n: *n,
            h: *h,
            w: *w,
            c: *c,
            kh: *kh,
            kw: *kw,
            attrs: same(*kh, *kw),
        },
        _ => bail!(
            "--op {op} --op-shape {dims:?}: matmul and dense take M,N,K; batch_matmul B,M,N,K; \
             conv2d (NHWC), conv2d_nchw and conv2d_nchwc N,H,W,C_IN,C_OUT,KH,KW; \
             depthwise_conv2d (NHWC) N,H,W,C,KH,KW"
        ),
    })
}

fn make_tuner(name: &str, task: &TemplateTask, seed: u64) -> Result<Box<dyn Tuner>> {
    Ok(match name {
        "random" => Box::new(RandomTuner::new(seed)),
        "gridsearch" => Box::new(GridSearchTuner::new()),
        "ga" => Box::new(GaTuner::new(GaOptions::default(), seed)),
        other => match XgbOptions::parse(other) {
            Some(o) => Box::new(XgbTuner::new(task, o, seed)),
            None => bail!(
                "unknown tuner `{other}` (xgb, xgb_knob, xgb_itervar, xgb_curve, xgb_rank, xgb_rank_knob, \
                 xgb_rank_binary, …, ga, random, gridsearch)"
            ),
        },
    })
}

/// The measurements of `task` on `target` already in the log, as observations.
fn history_of(
    log: &std::path::Path,
    task: &TemplateTask,
    target: &str,
) -> Vec<tessera_autotvm::tuners::Observation> {
    let loaded = match crate::records::load_warn(log) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("warning: the earlier measurements are not used: {e:#}");
            return Vec::new();
        }
    };
    loaded
        .records
        .iter()
        .filter(|r| r.workload_key == task.workload_key && r.target == target)
        .filter_map(|r| match &r.schedule {
            ScheduleDesc::Config {
                template, entity, ..
            } if *template == task.template => {
                let c = task.space.from_entity(entity).ok()?;
                Some(tessera_autotvm::tuners::Observation {
                    index: c.index,
                    gflops: tessera_autotvm::tune::gflops_of(task.flop, &r.result),
                })
            }
            _ => None,
        })
        .collect()
}

fn time_network(m: &mut tessera_graph::GraphModule) -> Result<TimeResult> {
    let inputs: Vec<(String, tessera_graph::TensorType)> = m
        .inputs()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    for (k, (name, ty)) in inputs.iter().enumerate() {
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        m.set_input(
            name,
            &NDArray::random_uniform(ty.dtype, &shape, 42 + k as u64, -1.0, 1.0)?,
        )?;
    }
    m.run()?;
    Ok(m.benchmark(&TimeEvaluator::new(1, 20, 0.0))?)
}

pub fn run(args: TuneArgs) -> Result<()> {
    if !args.templates {
        return crate::autosched::run(args);
    }
    if !matches!(args.tuner.as_str(), "random" | "gridsearch" | "ga")
        && XgbOptions::parse(&args.tuner).is_none()
    {
        bail!(
            "unknown tuner `{}` (xgb, xgb_knob, xgb_itervar, xgb_curve, xgb_rank, xgb_rank_knob, \
             xgb_rank_binary, …, ga, random, gridsearch)",
            args.tuner
        );
    }
    let net = &args.net;
    let target = net.target()?;
    let backend = crate::plugins::registry().backend_for(&target)?;
    let lanes = backend.hardware_params().f32_lanes();
    let (graph, tasks): (Option<tessera_graph::Graph>, Vec<NetworkTemplateTask>) = match &args.op {
        Some(op) => {
            let dims = parse_dims(args.op_shape.as_deref().context("--op needs --op-shape")?)?;
            let kind = op_kind(op, &dims, lanes)?;
            (
                None,
                vec![NetworkTemplateTask {
                    task: TemplateTask::new(kind, lanes)?,
                    weight: 1,
                }],
            )
        }
        None => {
            let g = net.load()?;
            let tasks = extract_template_tasks(&g, lanes);
            (Some(g), tasks)
        }
    };
    if tasks.is_empty() {
        bail!("no task fits a template (conv2d NHWC/NCHW with one group, depthwise conv2d NHWC, dense, matmul)");
    }
    let opts = measure_options(&args, backend.as_ref())?;
    let mut writer = RecordWriter::open(&args.log)?;
    let mut measurer = Measurer::with_backend(backend, opts)?;
    let target_str = target.to_string();
    let n_tasks = tasks.len();
    for (i, t) in tasks.iter().enumerate() {
        let task = &t.task;
        let reference = if args.no_check {
            None
        } else {
            let naive = task.naive("reference").map_err(anyhow::Error::msg)?;
            Some(Reference::compute(measurer.backend(), &naive, 1, 1)?)
        };
        // The default schedule is measured and logged too: the history best of a task is
        // then never worse than what an untuned build would use.
        let default_record = {
            let p = tessera_graph::executor::cpu_params(measurer.backend());
            let out = task.args.last().expect("an output").clone();
            let func = tessera_te::schedules::default_schedule(&[out], p)
                .map_err(|e| e.to_string())
                .and_then(|s| {
                    tessera_te::lower(&s, &task.args, "default_schedule").map_err(|e| e.to_string())
                });
            let r = measurer.measure(
                &[tessera_search::measure::Candidate { func }],
                1,
                reference.as_ref(),
            );
            let r = r.into_iter().next().expect("one result");
            let rec = Record::new(
                &task.workload_key,
                &target_str,
                &task.template,
                ScheduleDesc::Default,
                r,
            );
            writer.append_batch(std::slice::from_ref(&rec))?;
            rec
        };
        let mut tuner = make_tuner(&args.tuner, task, args.tuner_seed)?;
        // Transfer learning: earlier measurements of this task in the log.
        let history = history_of(&args.log, task, &target_str);
        if !history.is_empty() {
            println!(
                "    {} earlier measurements of this task in the log: the tuner starts from them",
                history.len()
            );
            tuner.load_history(&task.space, &history);
        }
        let topts = TuneOptions {
            n_trial: args.trials,
            early_stopping: args.early_stopping,
            batch: args.measure_batch,
        };
        let mut log_err: Option<anyhow::Error> = None;
        let summary = tune(
            task,
            tuner.as_mut(),
            &mut measurer,
            reference.as_ref(),
            &topts,
            &mut |trials| {
                let recs: Vec<Record> = trials
                    .iter()
                    .map(|t| {
                        Record::new(
                            &task.workload_key,
                            &target_str,
                            &task.template,
                            t.schedule.clone(),
                            t.result.clone(),
                        )
                    })
                    .collect();
                if let Err(e) = writer.append_batch(&recs) {
                    log_err.get_or_insert(e.into());
                }
            },
            &mut |cur, best, done, total, secs| {
                print!(
                    "\r{}",
                    progress_line(i + 1, n_tasks, cur, best, done, total, secs)
                );
                let _ = std::io::stdout().flush();
            },
        );
        println!(" Done.");
        if let Some(e) = log_err {
            return Err(e.context(format!("writing {}", args.log.display())));
        }
        let default_gflops = tessera_autotvm::tune::gflops_of(task.flop, &default_record.result);
        match &summary.best {
            Some(b) => println!(
                "    {} (weight {}): best {:.2} GFLOPS ({:.4} ms, config {}) after {} trials; default schedule {:.2} GFLOPS",
                task.template,
                t.weight,
                b.gflops,
                b.result.mean_cost() * 1e3,
                b.index,
                summary.trials,
                default_gflops
            ),
            None => println!(
                "    {}: no valid configuration in {} trials; default schedule {:.2} GFLOPS",
                task.template, summary.trials, default_gflops
            ),
        }
    }
    if let Some(g) = graph {
        compare_untuned_and_tuned(&g, &target, &args.log)?;
    }
    Ok(())
}

/// Builds `g` untuned and with the history best of `log`, times both and prints the
/// comparison (the end of both tuning modes).
pub(crate) fn compare_untuned_and_tuned(
    g: &tessera_graph::Graph,
    target: &tessera_backends::Target,
    log: &std::path::Path,
) -> Result<()> {
    let mut untuned = crate::network::build_network(g, target, None)?;
    let (mut tuned, applied) = crate::network::build_tuned(g, target, log)?;
    let a = time_network(&mut untuned)?;
    let b = time_network(&mut tuned)?;
    println!(
        "network `{}`: {applied} distinct fused groups built with tuned schedules (the others: their default schedule, measured faster or untuned)",
        g.name
    );
    println!(
        "{:>8}  {:>10}  {:>11}  {:>8}",
        "", "mean (ms)", "median (ms)", "std (ms)"
    );
    for (name, r) in [("untuned", &a), ("tuned", &b)] {
        println!(
            "{name:>8}  {:>10.4}  {:>11.4}  {:>8.4}",
            r.mean_ms(),
            r.median_ms(),
            r.std_ms()
        );
    }
    Ok(())
}
