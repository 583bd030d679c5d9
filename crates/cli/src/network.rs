//! `tessera tasks`, `run` and `compile`: a whole network, from the zoo or an ONNX file —
//! the arguments turned into a `tessera_driver::NetworkSpec`, one call of the pipeline,
//! and what it returns printed.

use crate::plugins::toolchain;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use tessera_backends::Target;
use tessera_driver::records::in_network::{self, StepTime};
use tessera_driver::records::LoadedLog;
use tessera_driver::{BuildReport, GivenInputs, NetworkSource, NetworkSpec};
use tessera_graph::zoo::ZooOptions;
use tessera_graph::{print_tasks, CompiledNetwork, ConvPlan, GraphModule, Layout};
use tessera_runtime::{NDArray, TimeEvaluator};

/// Where the network comes from, and how to prepare it.
#[derive(Args, Clone, Debug)]
pub struct NetworkArgs {
    /// A network of the model zoo (resnet-18, resnet-34, resnet-50, resnet3d-18,
    /// mobilenet, squeezenet_v1.1, inception_v3).
    #[arg(long, conflicts_with = "onnx")]
    network: Option<String>,
    /// An ONNX model file.
    #[arg(long)]
    onnx: Option<PathBuf>,
    /// The data layout to compile in: NHWC (the auto-scheduler's; the default) or NCHW.
    /// A zoo network is generated in it (squeezenet_v1.1, defined in NCHW only, and ONNX
    /// models are converted to it).
    #[arg(long)]
    layout: Option<String>,
    /// Batch size of a zoo network.
    #[arg(long, default_value_t = 1)]
    batch: i64,
    /// Seed of a zoo network's random weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Image height and width of a zoo network (default: the network's own, 224 for
    /// most; smaller sizes give quick builds and tunes).
    #[arg(long, value_name = "PIXELS", conflicts_with = "onnx")]
    image_size: Option<i64>,
    /// Input shape of an ONNX model whose input shape is symbolic: NAME=D0,D1,…
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    shapes: Vec<String>,
    /// The arithmetic of an ONNX model's int8 products where a weight's byte pairs
    /// could overflow int16: `exact` (ONNX's, the default) or `saturating` (adjacent
    /// products summed in int16 with saturation, as onnxruntime and TVM do on x86 CPUs
    /// without VNNI: ~1.4× faster there, and onnxruntime's results on such a CPU).
    #[arg(long, value_name = "exact|saturating", default_value = "exact")]
    int8_products: tessera_graph::onnx::Int8Products,
    /// The values of the `--input` files: an ONNX input with symbolic dimensions takes
    /// its file's shape, one that decides an axis, a size or a bound its value.
    #[arg(skip)]
    input_values: Vec<(String, NDArray)>,
    /// The target: `cpu` (built in; the default) or a kind a loaded backend plugin
    /// provides.
    #[arg(long)]
    target: Option<String>,
    /// Compute every convolution directly: no Winograd for the 3×3 stride-1 NHWC ones
    /// (a CPU build's default where they have at least 32 input channels).
    #[arg(long)]
    no_winograd: bool,
}

impl NetworkArgs {
    fn layout(&self) -> Result<Option<Layout>> {
        self.layout
            .as_deref()
            .map(|l| {
                Layout::parse(l).with_context(|| format!("unknown layout `{l}` (NHWC or NCHW)"))
            })
            .transpose()
    }

    pub(crate) fn target(&self) -> Result<Target> {
        Ok(toolchain().parse_target(self.target.as_deref().unwrap_or("cpu"))?)
    }

    /// Whether a network was named (`--network` or `--onnx`).
    pub(crate) fn given(&self) -> bool {
        self.network.is_some() || self.onnx.is_some()
    }

    /// Whether `--target` was given.
    fn target_given(&self) -> bool {
        self.target.is_some()
    }

    /// The values of the `--input` files that could be read.
    fn take_values(&mut self, inputs: &GivenInputs) {
        self.input_values = inputs
            .values()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
    }

    /// What these arguments ask the pipeline to build.
    pub(crate) fn spec(&self) -> Result<NetworkSpec> {
        let source = match (&self.network, &self.onnx) {
            (Some(name), _) => NetworkSource::Zoo {
                name: name.clone(),
                options: ZooOptions {
                    batch: self.batch,
                    seed: self.seed,
                    image_size: self.image_size,
                    ..ZooOptions::default()
                },
            },
            (None, Some(path)) => {
                let mut options = tessera_graph::onnx::ImportOptions {
                    int8_products: self.int8_products,
                    ..Default::default()
                };
                for s in &self.shapes {
                    let (name, dims) = s
                        .split_once('=')
                        .with_context(|| format!("--shape `{s}`: expected NAME=D0,D1,…"))?;
                    let dims: Vec<i64> = dims
                        .split(',')
                        .map(|d| d.trim().parse::<i64>().ok().filter(|&v| v > 0))
                        .collect::<Option<_>>()
                        .with_context(|| {
                            format!("--shape `{s}`: dimensions must be positive integers")
                        })?;
                    options.input_shapes.insert(name.to_string(), dims);
                }
                options.value_shapes.extend(
                    self.input_values
                        .iter()
                        .map(|(n, v)| (n.clone(), v.shape().iter().map(|&d| d as i64).collect())),
                );
                options
                    .input_values
                    .extend(self.input_values.iter().cloned());
                NetworkSource::Onnx {
                    path: path.clone(),
                    options,
                }
            }
            (None, None) => bail!("give --network NAME or --onnx FILE"),
        };
        Ok(NetworkSpec {
            source,
            target: self.target()?,
            layout: self.layout()?,
            winograd: !self.no_winograd,
        })
    }

    /// The optimized network with its algorithm plan (`Toolchain::plan`).
    pub(crate) fn plan(&self) -> Result<ConvPlan> {
        Ok(toolchain().plan(&self.spec()?)?)
    }
}

#[derive(Args, Debug)]
pub struct TasksArgs {
    #[command(flatten)]
    net: NetworkArgs,
    /// Print only the task table (index, weight, FLOPs, name, workload key).
    #[arg(long)]
    summary: bool,
    /// Print the template tasks instead (conv2d NHWC / dense / matmul) with their
    /// configuration spaces, as `tessera tune --templates` tunes them.
    #[arg(long)]
    templates: bool,
}

pub fn tasks(args: TasksArgs) -> Result<()> {
    let target = args.net.target()?;
    if args.templates {
        let plan = toolchain().plan_for_templates(&args.net.spec()?)?;
        let tasks = toolchain().template_tasks(plan.base(), &target)?;
        for (i, t) in tasks.iter().enumerate() {
            say!(
                "========== Template task {i}  (workload key: {}) ==========",
                t.workload_key
            );
            say!(
                "# {}  weight: {}  FLOPs: {:.0}",
                t.template,
                t.weight,
                t.flop
            );
            say!("{}", t.space);
        }
        say!(
            "{} template tasks of network `{}` for target `{target}`",
            tasks.len(),
            plan.base().name
        );
        return Ok(());
    }
    let plan = args.net.plan()?;
    let (tasks, weights) = plan.tasks(&target)?;
    let g = plan.base();
    let groups = tessera_graph::fuse(plan.rule_graph()).len();
    if args.summary {
        say!(
            "{:>4}  {:>6}  {:>14}  {:<34}  name",
            "ID",
            "weight",
            "FLOPs",
            "workload key"
        );
        for (i, (t, w)) in tasks.iter().zip(&weights).enumerate() {
            let option = t.choice.as_ref().map(|c| format!("  (one option of {c})"));
            say!(
                "{i:>4}  {w:>6}  {:>14.0}  {:<34}  {}{}",
                t.flop_count(),
                t.workload_key,
                t.name,
                option.unwrap_or_default()
            );
        }
    } else {
        say_part!("{}", print_tasks(&tasks, &weights));
    }
    say!(
        "{} tasks from {groups} fused groups of network `{}` for target `{target}`",
        tasks.len(),
        g.name
    );
    if !plan.choices().is_empty() {
        say!(
            "{} of them are options of {} convolutions that can be computed directly or \
             with Winograd: tuning tunes each option, a build with the log takes the faster",
            tasks.iter().filter(|t| t.choice.is_some()).count(),
            plan.choices().len()
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    net: NetworkArgs,
    #[command(flatten)]
    rpc: crate::rpc::RpcArgs,
    /// An input value: NAME=FILE.npy (inputs not given are seeded uniform random in
    /// [-1, 1]).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Write the outputs to this file: a .npz holds every output (`output_0`,
    /// `output_1`, …, as tvmc writes them); a .npy the one output of a network that has one.
    #[arg(long, value_name = "FILE.npz|FILE.npy")]
    output: Option<PathBuf>,
    /// Time whole runs and print the summary.
    #[arg(long)]
    benchmark: bool,
    /// Timed repeats (each of `--number` runs).
    #[arg(long, default_value_t = 10)]
    repeat: usize,
    /// Runs per repeat.
    #[arg(long, default_value_t = 1)]
    number: usize,
    /// Time every fused kernel inside whole runs (`--repeat` runs) and print them,
    /// slowest first.
    #[arg(long)]
    profile: bool,
    /// Launch each kernel on its own rather than replaying the run's recorded launch
    /// sequence (a CUDA graph on a GPU).
    #[arg(long)]
    step_by_step: bool,
    /// Build with the best configurations of this record log (apply-history-best):
    /// tasks without a record keep their default schedule, with one warning each.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Run a module file written by `tessera compile` instead of compiling a network
    /// (no compiler is called).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["network", "onnx", "log"])]
    module: Option<PathBuf>,
    /// Print a JSON summary on stdout (build, output, top-5, profile, time summary);
    /// the text goes to stderr.
    #[arg(long)]
    json: bool,
}

/// `tessera compile`: a network compiled into one module file.
#[derive(Args, Debug)]
pub struct CompileArgs {
    #[command(flatten)]
    net: NetworkArgs,
    /// Compile with the best configurations of this record log (apply-history-best).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The module file to write.
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// The value of an input that decides what the build must know (an ONNX input
    /// holding a reduction's axes, a shape, sizes, pads…): NAME=FILE.npy. The module is
    /// built for it and refuses another value.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
}

/// Compiles the network of `net` for its target, with the history best of `log` when
/// given, printing what the build applied.
fn compile_for(
    net: &NetworkArgs,
    log: Option<&std::path::Path>,
    inputs: &GivenInputs,
) -> Result<CompiledNetwork> {
    let loaded = log.map(|p| toolchain().read_log(p)).transpose()?;
    compile_with(net, log, loaded.as_ref(), inputs)
}

/// [`compile_for`] with the log already read.
fn compile_with(
    net: &NetworkArgs,
    log: Option<&std::path::Path>,
    loaded: Option<&LoadedLog>,
    inputs: &GivenInputs,
) -> Result<CompiledNetwork> {
    let spec = net.spec()?;
    let start = std::time::Instant::now();
    let build = toolchain().compile_network(&spec, loaded, inputs)?;
    print_report(&build.report, log);
    let s = build.network.summary();
    say!(
        "built `{}` for `{}`: {} fused groups, {} kernels generated and built in {:.1} s; \
         intermediate memory {:.1} MiB (without reuse {:.1} MiB)",
        build.network.name(),
        spec.target,
        s.groups,
        s.kernels,
        start.elapsed().as_secs_f64(),
        s.planned_bytes as f64 / (1 << 20) as f64,
        s.unplanned_bytes as f64 / (1 << 20) as f64
    );
    Ok(build.network)
}

/// Prints what a build applied: the convolutions' algorithms, the groups the log's
/// in-network check kept on their default, the hooks' warnings, and with a log how many
/// groups it reached (or why none).
fn print_report(r: &BuildReport, log: Option<&std::path::Path>) {
    if r.with_log && !r.algorithms.is_empty() {
        say!("{}", algorithms_line(&r.algorithms));
    }
    if r.with_log && r.overruled > 0 {
        say!(
            "{} tuned groups keep their default schedule: the log's in-network \
             check timed it faster than their history best",
            r.overruled
        );
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    let Some(log) = log else { return };
    say!(
        "applied the history best of {} to {} distinct fused groups",
        log.display(),
        r.applied
    );
    if let Some(why) = &r.nothing_applied {
        eprintln!(
            "warning: nothing of {} applies to this build, which uses default schedules \
             throughout: {why}",
            log.display()
        );
    }
}

pub fn compile(mut args: CompileArgs) -> Result<()> {
    let inputs = GivenInputs::read(&args.inputs)?;
    args.net.take_values(&inputs);
    let compiled = compile_for(&args.net, args.log.as_deref(), &inputs)?;
    compiled
        .save(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let bytes = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    say!(
        "wrote {} ({:.1} MiB): `tessera run --module {}` runs it without compiling",
        args.out.display(),
        bytes as f64 / (1 << 20) as f64,
        args.out.display()
    );
    Ok(())
}

/// The network to run: the module file of `--module`, or the network compiled now.
fn module_to_run(
    args: &RunArgs,
    inputs: &GivenInputs,
    loaded: Option<&LoadedLog>,
) -> Result<GraphModule> {
    let Some(path) = &args.module else {
        return load_timed(compile_with(
            &args.net,
            args.log.as_deref(),
            loaded,
            inputs,
        )?);
    };
    let asked = args
        .net
        .target_given()
        .then(|| args.net.target())
        .transpose()?;
    let compiled = toolchain().read_module(path, asked.as_ref())?;
    say!(
        "loaded `{}` for `{}` from {} ({} fused groups, {} kernels)",
        compiled.name(),
        compiled.target(),
        path.display(),
        compiled.summary().groups,
        compiled.summary().kernels
    );
    load_timed(compiled)
}

/// [`load`], saying how long it took: a device whose driver compiles the kernels itself
/// (OpenCL) does so here, not in the build before.
fn load_timed(compiled: CompiledNetwork) -> Result<GraphModule> {
    let start = std::time::Instant::now();
    let target = compiled.target().clone();
    let m = toolchain().load(compiled)?;
    say!(
        "loaded onto the device of `{target}` in {:.1} s (a driver that compiles the kernels itself, as OpenCL's, does it here)",
        start.elapsed().as_secs_f64()
    );
    Ok(m)
}

/// What a build with records chose for the convolutions with a choice: how many of
/// each algorithm, and how many by measurement.
fn algorithms_line(picked: &[(tessera_graph::ConvAlgorithm, bool)]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (a, _) in picked {
        let name = a.to_string();
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => counts.push((name, 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(n, c)| format!("{c} {n}")).collect();
    let measured = picked.iter().filter(|(_, m)| *m).count();
    format!(
        "convolution algorithms: {} ({measured} of {} chosen by the log's measurements of \
         every option, the others by the rule)",
        counts.join(", "),
        picked.len()
    )
}

/// Prints the per-kernel profile of `repeat` runs, slowest first; returns it as JSON.
/// With the log the network was built from, each kernel's time alone beside it (see
/// `search::in_network`).
fn print_profile(
    m: &mut GraphModule,
    repeat: usize,
    log: Option<&LoadedLog>,
) -> Result<serde_json::Value> {
    let p = m.profile(repeat)?;
    let total: f64 = p.iter().map(|(_, ms)| ms).sum();
    let target = m.target().to_string();
    let steps = in_network::against_log(&p, &m.step_workload_keys(), &target, log);
    let mut sorted: Vec<&StepTime> = steps.iter().collect();
    sorted.sort_by(|a, b| b.in_network_ms.total_cmp(&a.in_network_ms));
    let alone = |s: &StepTime| match (s.alone_ms, s.ratio()) {
        (Some(a), Some(r)) => format!("  {a:>10.3}  {r:>5.2}×"),
        _ if log.is_some() => format!("  {:>10}  {:>6}", "—", ""),
        _ => String::new(),
    };
    let header = if log.is_some() {
        format!("  {:>10}  {:>6}", "alone (ms)", "ratio")
    } else {
        String::new()
    };
    say!(
        "{:>10}  {:>6}  {:>4}{header}  kernel (step, slowest first)",
        "time (ms)",
        "share",
        "step"
    );
    for s in &sorted {
        say!(
            "{:>10.3}  {:>5.1}%  {:>4}{}  {}",
            s.in_network_ms,
            100.0 * s.in_network_ms / total,
            s.step,
            alone(s),
            s.kernel
        );
    }
    say!("{total:>10.3}  100.0%  (all {} kernels)", steps.len());
    if log.is_some() {
        let (inside, alone) = in_network::totals(&steps);
        if alone > 0.0 {
            say!(
                "the kernels the log knows take {inside:.3} ms inside the network, {alone:.3} ms \
                 alone as the log measured them ({:.2}×)",
                inside / alone
            );
        }
    }
    Ok(serde_json::json!(sorted
        .iter()
        .map(|s| serde_json::json!({
            "step": s.step, "kernel": s.kernel, "ms": s.in_network_ms,
            "alone_ms": s.alone_ms,
        }))
        .collect::<Vec<_>>()))
}

/// Times whole runs and prints TVM's execution time summary (and a simulator's
/// counters of one inference); returns the summary as JSON.
fn print_benchmark(
    m: &mut GraphModule,
    args: &RunArgs,
    counted: &tessera_runtime::DeviceCounters,
) -> Result<serde_json::Value> {
    let target = m.target().clone();
    let ev = TimeEvaluator::new(args.number.max(1), args.repeat.max(1), 0.0);
    if let Some(clock) = toolchain().needs(&target).device_clock {
        say!("(`{target}`: the sum of each kernel's time on the device's clock, {clock})");
    }
    let r = toolchain().benchmark(m, &ev)?;
    say!("Execution time summary:");
    say!(
        " {:>10}  {:>11}  {:>8}  {:>8}  {:>8}",
        "mean (ms)",
        "median (ms)",
        "max (ms)",
        "min (ms)",
        "std (ms)"
    );
    say!(
        " {:>10.4}  {:>11.4}  {:>8.4}  {:>8.4}  {:>8.4}",
        r.mean_ms(),
        r.median_ms(),
        r.max_ms(),
        r.min_ms(),
        r.std_ms()
    );
    // a simulator's counters, as TVM's `simulator.stats()` prints them
    if !counted.is_empty() {
        say!("Execution statistics (one inference):");
        for (name, value) in &counted.0 {
            say!("\t{name:<20}: {value:>16}");
        }
    }
    Ok(serde_json::json!({
        "mean_ms": r.mean_ms(), "median_ms": r.median_ms(), "max_ms": r.max_ms(),
        "min_ms": r.min_ms(), "std_ms": r.std_ms(),
    }))
}

pub fn run(mut args: RunArgs) -> Result<()> {
    crate::set_json(args.json);
    crate::rpc::use_remote(&args.rpc)?;
    let inputs = GivenInputs::read(&args.inputs)?;
    args.net.take_values(&inputs);
    let loaded = args
        .log
        .as_deref()
        .map(|p| toolchain().read_log(p))
        .transpose()?;
    let mut m = module_to_run(&args, &inputs, loaded.as_ref())?;
    if args.step_by_step {
        m.launch_step_by_step()?;
    }
    let s = m.summary();
    say!(
        "weights: {:.1} MiB ({} bytes), on the device from the build on",
        s.weight_bytes as f64 / (1 << 20) as f64,
        s.weight_bytes
    );
    say!("device: {}", m.device().describe());
    say!("launches: {}", m.launch_mode());
    inputs.set_on(&mut m)?;
    let before = m.device_counters()?;
    m.run()?;
    let counted = m.device_counters()?.since(&before);
    let outputs: Vec<NDArray> = (0..m.output_types().count())
        .map(|i| m.get_output(i))
        .collect::<Result<_, _>>()?;
    for (i, o) in outputs.iter().enumerate() {
        say!("output {i}: {:?} {}", o.shape(), o.dtype());
    }
    if let Some(path) = &args.output {
        save_outputs(path, &outputs)?;
    }
    let out = outputs.first().context("the network has no output")?;
    // class scores: one output, a row of at least 5 classes per image
    let top5 = if outputs.len() == 1 && out.ndim() == 2 && out.shape()[1] >= 5 {
        print_top5(out)?
    } else {
        serde_json::Value::Null
    };
    let profile = if args.profile {
        print_profile(&mut m, args.repeat.max(1), loaded.as_ref())?
    } else {
        serde_json::Value::Null
    };
    let bench = if args.benchmark {
        print_benchmark(&mut m, &args, &counted)?
    } else {
        serde_json::Value::Null
    };
    if args.json {
        let summary = serde_json::json!({
            "target": m.target().to_string(),
            "module": args.module.as_ref().map(|p| p.display().to_string()),
            "groups": s.groups, "kernels": s.kernels,
            "planned_bytes": s.planned_bytes, "unplanned_bytes": s.unplanned_bytes,
            "weight_bytes": s.weight_bytes,
            "launch_sequence": *m.launch_mode() == tessera_graph::LaunchMode::Sequence,
            "device": m.device().describe(),
            "output": {"shape": out.shape(), "dtype": out.dtype().to_string()},
            "outputs": outputs.iter().map(|o| serde_json::json!({"shape": o.shape(), "dtype": o.dtype().to_string()})).collect::<Vec<_>>(),
            "top5": top5, "profile": profile, "benchmark": bench,
        });
        println!("{summary}");
    }
    Ok(())
}

/// Writes the outputs to `path`: all of them to a `.npz` (`output_0`, `output_1`, …, as
/// tvmc names them), or the one output to a `.npy`.
fn save_outputs(path: &std::path::Path, outputs: &[NDArray]) -> Result<()> {
    let npz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npz"));
    if npz {
        let names: Vec<String> = (0..outputs.len()).map(|i| format!("output_{i}")).collect();
        let arrays: Vec<(&str, &NDArray)> = names.iter().map(String::as_str).zip(outputs).collect();
        NDArray::save_npz(path, &arrays)?;
        say!(
            "wrote {} ({} outputs: {})",
            path.display(),
            outputs.len(),
            names.join(", ")
        );
        return Ok(());
    }
    if outputs.len() > 1 {
        bail!(
            "--output {}: the network has {} outputs and a .npy file holds one: give a .npz \
             file (all outputs, as output_0, output_1, …)",
            path.display(),
            outputs.len()
        );
    }
    outputs[0].save_npy(path)?;
    say!("wrote {}", path.display());
    Ok(())
}

/// Prints the five largest classes of row 0, as probabilities (a softmax is applied
/// when the row is not one already); returns them as JSON.
fn print_top5(out: &NDArray) -> Result<serde_json::Value> {
    let v = out.to_f64_vec();
    let row = &v[..out.shape()[1]];
    let sum: f64 = row.iter().sum();
    let is_prob = row.iter().all(|&x| (0.0..=1.0).contains(&x)) && (sum - 1.0).abs() < 1e-3;
    let probs: Vec<f64> = if is_prob {
        row.to_vec()
    } else {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|x| (x - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|x| x / s).collect()
    };
    let mut idx: Vec<usize> = (0..probs.len()).collect();
    idx.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    say!(
        "top-5 classes (row 0{}):",
        if is_prob {
            ""
        } else {
            ", softmax of the output"
        }
    );
    for (rank, &c) in idx.iter().take(5).enumerate() {
        say!("  #{}  class {c:>4}  probability {:.6}", rank + 1, probs[c]);
    }
    let top: Vec<serde_json::Value> = idx
        .iter()
        .take(5)
        .map(|&c| serde_json::json!({"class": c, "probability": probs[c]}))
        .collect();
    Ok(serde_json::json!(top))
}
