//! `tessera tune` without `--templates`: the auto-scheduler (TVM's Ansor) over every
//! task of a network (or one operator). Prints each task's compute DAG, measures each
//! task's default schedule once as its baseline, runs the task scheduler with the
//! sketch policy and the shared cost model, prints TVM's table after every round, and
//! appends every measurement to the log. A log given again (or `--resume`) is read
//! back first: its measurements count against `--trials`, seed the search and train
//! the model, so a killed run goes on where its log ends.

use crate::tune::{measure_options, parse_dims, TuneArgs};
use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::io::Write;
use tessera_backends::Backend;
use tessera_costmodel::{PackSumParams, PackSumXgb, ProgramCostModel, RandomProgramModel};
use tessera_graph::{extract_tasks, fuse, group_compute, Graph};
use tessera_search::measure::{Candidate, Measurer};
use tessera_search::record::{Record, RecordWriter};
use tessera_search::scheduler::{SchedTask, SchedulerOptions, Strategy, TaskScheduler};
use tessera_search::ScheduleDesc;
use tessera_sketch::search::SearchParams;
use tessera_sketch::tune::{AutoTask, AutoTuneOptions, AutoTuner};
use tessera_te::ComputeDag;

/// A task with what the driver and the baseline need.
struct Job {
    task: AutoTask,
    weight: usize,
    /// The default schedule's function (the untuned build's), if it lowers.
    default: Option<Result<tessera_ir::PrimFunc, String>>,
}

/// The compute DAG of `--op OP --op-shape DIMS` (stride 1, "same" padding).
pub(crate) fn op_dag(op: &str, dims: &[i64]) -> Result<ComputeDag> {
    use tessera_ir::DataType;
    use tessera_te::{ops, placeholder};
    let f32 = DataType::float32();
    let out = match (op, dims) {
        ("matmul", [m, n, k]) => ops::matmul(
            &placeholder(&[*m, *k], f32, "A")?,
            &placeholder(&[*k, *n], f32, "B")?,
        )?,
        ("dense", [m, n, k]) => ops::dense(
            &placeholder(&[*m, *k], f32, "A")?,
            &placeholder(&[*n, *k], f32, "B")?,
            None,
        )?,
        ("conv2d" | "conv2d_nhwc", [n, h, w, ci, co, kh, kw]) => ops::conv2d_nhwc(
            &placeholder(&[*n, *h, *w, *ci], f32, "data")?,
            &placeholder(&[*kh, *kw, *ci, *co], f32, "kernel")?,
            (1, 1),
            (kh / 2, kw / 2),
            (1, 1),
        )?,
        _ => bail!(
            "--op {op} --op-shape {dims:?}: the auto-scheduler takes matmul and dense M,N,K, \
             conv2d (NHWC) N,H,W,C_IN,C_OUT,KH,KW (or a whole network)"
        ),
    };
    Ok(ComputeDag::new(&[out])?)
}

/// The tasks of the network with each one's default-schedule function (from its first
/// fused group).
fn network_jobs(
    g: &Graph,
    target: &tessera_backends::Target,
    backend: &dyn Backend,
) -> Result<Vec<Job>> {
    let (tasks, weights) = extract_tasks(g, target)?;
    let p = tessera_graph::executor::cpu_params(backend);
    let mut jobs: Vec<Job> = tasks
        .into_iter()
        .zip(weights)
        .map(|(t, weight)| Job {
            task: AutoTask {
                name: t.name,
                dag: t.dag,
                workload_key: t.workload_key,
            },
            weight,
            default: None,
        })
        .collect();
    for group in fuse(g) {
        let gc = group_compute(g, &group)?;
        let key = gc.dag()?.workload_key();
        if let Some(j) = jobs
            .iter_mut()
            .find(|j| j.task.workload_key == key && j.default.is_none())
        {
            j.default = Some(
                tessera_graph::executor::lower_group(&gc, "default_schedule", p)
                    .map_err(|e| e.to_string()),
            );
        }
    }
    Ok(jobs)
}

fn op_job(dag: ComputeDag, backend: &dyn Backend, op: &str) -> Job {
    let p = tessera_graph::executor::cpu_params(backend);
    let default = tessera_te::schedules::default_schedule(&dag.outputs, p)
        .map_err(|e| e.to_string())
        .and_then(|s| {
            let mut args = dag.inputs();
            args.extend(dag.outputs.iter().cloned());
            tessera_te::lower(&s, &args, "default_schedule").map_err(|e| e.to_string())
        });
    Job {
        task: AutoTask {
            name: op.to_string(),
            workload_key: dag.workload_key(),
            dag,
        },
        weight: 1,
        default: Some(default),
    }
}

pub fn run(args: TuneArgs) -> Result<()> {
    let strategy = match args.strategy.as_str() {
        "gradient" => Strategy::Gradient,
        "round-robin" | "round_robin" => Strategy::RoundRobin,
        s => bail!("unknown --strategy `{s}` (gradient or round-robin)"),
    };
    let model: Box<dyn ProgramCostModel> = match args.model.as_str() {
        "xgb" => Box::new(PackSumXgb::new(PackSumParams::default())),
        "random" => Box::new(RandomProgramModel::new(args.tuner_seed)),
        m => bail!("unknown --model `{m}` (xgb or random)"),
    };
    if args.tuner != "xgb" {
        bail!(
            "--tuner picks a template tuner: give --templates, or --model for the auto-scheduler"
        );
    }
    if args.resume && !args.log.exists() {
        bail!("--resume: the log {} does not exist", args.log.display());
    }
    if args.per_round == 0 || args.population == 0 {
        bail!("--per-round and --population must be positive");
    }
    if !(0.0..=1.0).contains(&args.sketch_share) {
        bail!("--sketch-share must be between 0 and 1");
    }
    let net = &args.net;
    let target = net.target()?;
    let backend = crate::plugins::registry().backend_for(&target)?;
    let num_cores = backend.hardware_params().num_cores.max(1) as i64;
    let (graph, jobs) = match &args.op {
        Some(op) => {
            let dims = parse_dims(args.op_shape.as_deref().context("--op needs --op-shape")?)?;
            let dag = op_dag(op, &dims)?;
            (None, vec![op_job(dag, backend.as_ref(), op)])
        }
        None => {
            let g = net.load()?;
            let jobs = network_jobs(&g, &target, backend.as_ref())?;
            (Some(g), jobs)
        }
    };
    if jobs.is_empty() {
        bail!("the network has no task to tune");
    }
    let target_str = target.to_string();
    for (i, j) in jobs.iter().enumerate() {
        println!(
            "========== Task {i}  (workload key: {}) ==========",
            j.task.workload_key
        );
        println!(
            "# {}  weight: {}  FLOPs: {:.0}",
            j.task.name,
            j.weight,
            j.task.dag.flop_count()
        );
        println!("{}", j.task.dag);
    }

    // the log so far
    let earlier = if args.log.exists() {
        crate::records::load_warn(&args.log)?.records
    } else {
        Vec::new()
    };
    let mut writer = RecordWriter::open(&args.log)?;
    let opts = measure_options(&args, backend.as_ref())?;
    let mut measurer = Measurer::with_backend(backend, opts)?;

    // each task's default schedule, measured once per log: the baseline of the history best
    let has_default: HashSet<&str> = earlier
        .iter()
        .filter(|r| matches!(r.schedule, ScheduleDesc::Default) && r.target == target_str)
        .map(|r| r.workload_key.as_str())
        .collect();
    let mut baselines: Vec<Record> = Vec::new();
    for j in &jobs {
        if has_default.contains(j.task.workload_key.as_str()) {
            continue;
        }
        let Some(func) = j.default.clone() else {
            continue;
        };
        let r = measurer.measure(&[Candidate { func }], j.task.dag.outputs.len(), None);
        if let Some(r) = r.into_iter().next() {
            baselines.push(Record::new(
                &j.task.workload_key,
                &target_str,
                &j.task.name,
                ScheduleDesc::Default,
                r,
            ));
        }
    }
    writer.append_batch(&baselines)?;

    let sched_tasks: Vec<SchedTask> = jobs
        .iter()
        .map(|j| SchedTask {
            weight: j.weight as f64,
            flop: j.task.dag.flop_count(),
            group: None,
        })
        .collect();
    let weights: Vec<usize> = jobs.iter().map(|j| j.weight).collect();
    let names: Vec<String> = jobs.iter().map(|j| j.task.name.clone()).collect();
    let mut scheduler = TaskScheduler::new(
        sched_tasks,
        SchedulerOptions {
            strategy,
            per_round: args.per_round,
            early_stopping: args.early_stopping,
            seed: args.tuner_seed,
            ..SchedulerOptions::default()
        },
    );
    let auto_opts = AutoTuneOptions {
        num_cores,
        search: SearchParams {
            population: args.population,
            sketch_share: args.sketch_share,
            max_code_size: args.max_code_size,
            ..SearchParams::default()
        },
        warmup: args.per_round.min(100),
        check: !args.no_check,
        seed: args.tuner_seed,
        target: target_str.clone(),
    };
    let workload_keys: Vec<String> = jobs.iter().map(|j| j.task.workload_key.clone()).collect();
    let tasks: Vec<AutoTask> = jobs.into_iter().map(|j| j.task).collect();
    let mut tuner = AutoTuner::new(tasks, &mut measurer, &mut writer, model, auto_opts)?;
    tuner.report = Box::new(|line| println!("    {line}"));
    // Each task's default schedule (this run's baseline or the log's) stands in for it
    // in the estimate until it has a tuned latency.
    for (i, key) in workload_keys.iter().enumerate() {
        let costs: Vec<f64> = earlier
            .iter()
            .chain(&baselines)
            .filter(|r| {
                matches!(r.schedule, ScheduleDesc::Default)
                    && r.target == target_str
                    && &r.workload_key == key
            })
            .map(|r| r.result.mean_cost())
            .collect();
        if !costs.is_empty() {
            scheduler.set_baseline(i, tessera_search::record::stable_cost(costs));
        }
    }
    let (taken, bad) = tuner.restore(&earlier);
    for b in &bad {
        eprintln!("warning: {}: {b}", args.log.display());
    }
    if taken > 0 {
        println!(
            "resumed from {}: {taken} earlier measurements of these tasks",
            args.log.display()
        );
        for (i, (n, best)) in tuner.progress().into_iter().enumerate() {
            scheduler.restore(i, n, best);
        }
    }
    let start = std::time::Instant::now();
    let reason = scheduler.tune(args.trials, &mut tuner, &mut |s, next| {
        print!("{}", s.table(start.elapsed().as_secs_f64(), next));
        let _ = std::io::stdout().flush();
    });
    if let Some(e) = tuner.log_error.take() {
        return Err(anyhow::Error::from(e).context(format!("writing {}", args.log.display())));
    }
    println!(
        "tuning ended ({reason:?}) after {} trials in {:.0} s; dead tasks: {:?}",
        scheduler.total_trials(),
        start.elapsed().as_secs_f64(),
        scheduler.dead()
    );
    let again_start = std::time::Instant::now();
    let again = tuner
        .remeasure(args.remeasure_top, args.remeasure_runs)
        .with_context(|| format!("re-measuring into {}", args.log.display()))?;
    drop(tuner);
    if !again.is_empty() {
        print!(
            "{}",
            remeasure_table(&again, &names, again_start.elapsed().as_secs_f64())
        );
    }
    for (i, ((name, w), c)) in names
        .iter()
        .zip(&weights)
        .zip(scheduler.best_costs())
        .enumerate()
    {
        if *c < tessera_search::scheduler::NO_COST {
            continue;
        }
        match scheduler.trials()[i] {
            0 => println!(
                "    task {i} `{name}` (weight {w}): not reached by the budget (it keeps its default schedule)"
            ),
            n => println!("    task {i} `{name}` (weight {w}): no valid schedule in {n} trials"),
        }
    }
    if let Some(g) = graph {
        crate::tune::compare_untuned_and_tuned(&g, &target, &args.log)?;
    }
    Ok(())
}

/// The re-measurements of each task's fastest programs, and which one is now the best.
fn remeasure_table(
    rows: &[tessera_sketch::tune::Remeasured],
    names: &[String],
    seconds: f64,
) -> String {
    let runs = rows.first().map_or(0, |r| r.again.len());
    let mut out = format!(
        "re-measured the fastest programs of each task, {runs} more runs each in fresh processes ({:.0} s):\n",
        seconds
    );
    out.push_str("| ID | Rank | First (ms) | Again (ms) | Median (ms) |\n");
    out.push_str("|---|---|---|---|---|\n");
    // four significant digits at least, for microsecond kernels too
    let ms = |c: f64| {
        let v = c * 1e3;
        let decimals = if v > 0.0 && v < 1.0 {
            (3 - v.log10().floor() as i32).clamp(3, 9) as usize
        } else {
            3
        };
        format!("{v:.decimals$}")
    };
    for r in rows {
        let again: Vec<String> = r
            .again
            .iter()
            .map(|c| c.map_or_else(|| "failed".to_string(), ms))
            .collect();
        let median = r.median();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.task,
            r.rank + 1,
            ms(r.first),
            again.join(" "),
            if median.is_finite() {
                ms(median)
            } else {
                "failed".into()
            }
        ));
    }
    for (task, name) in names.iter().enumerate() {
        let of_task: Vec<&tessera_sketch::tune::Remeasured> =
            rows.iter().filter(|r| r.task == task).collect();
        let Some(best) = of_task
            .iter()
            .filter(|r| r.median().is_finite())
            .min_by(|a, b| a.median().total_cmp(&b.median()))
        else {
            continue;
        };
        if best.rank != 0 {
            out.push_str(&format!(
                "task {task} `{name}`: rank {} is the steadier best ({} ms median against rank 1's {})\n",
                best.rank + 1,
                ms(best.median()),
                of_task
                    .first()
                    .map(|r| r.median())
                    .filter(|m| m.is_finite())
                    .map_or_else(|| "failed".to_string(), ms)
            ));
        }
    }
    out
}
