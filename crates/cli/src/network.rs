//! `tessera tasks`, `run` and `compile`: a whole network, from the zoo or an ONNX file —
//! the arguments turned into a `tessera_driver::NetworkSpec`, one call of the pipeline,
//! and what it returns printed.

use crate::plugins::toolchain;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use tessera_backends::Target;
use tessera_driver::run::{RunRequest, RunSource};
use tessera_driver::{GivenInputs, NetworkSource, NetworkSpec};
use tessera_graph::zoo::ZooOptions;
use tessera_graph::Layout;
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
    /// Input shape of an ONNX model whose input shape is symbolic: NAME=D0,D1,…; a
    /// dimension given as a range MIN..MAX (one range per module, wherever it is
    /// written) is known only when the module runs: one module runs every size of it
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
        let mut runtime_size = None;
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
                let given = tessera_driver::runtime_size::shapes_of(&self.shapes)?;
                options.input_shapes.extend(given.shapes);
                runtime_size = given.runtime_size;
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
            runtime_size,
        })
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
    let listing = toolchain().task_listing(&args.net.spec()?, args.templates)?;
    if args.summary {
        say_part!("{}", listing.summary());
    } else {
        say_part!("{listing}");
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

pub fn compile(mut args: CompileArgs) -> Result<()> {
    let inputs = GivenInputs::read(&args.inputs)?;
    args.net.take_values(&inputs);
    toolchain().compile_module(
        &args.net.spec()?,
        args.log.as_deref(),
        &inputs,
        &args.out,
        &mut crate::Printer,
    )?;
    Ok(())
}

pub fn run(mut args: RunArgs) -> Result<()> {
    crate::set_json(args.json);
    let tc = crate::rpc::toolchain_for(&args.rpc)?;
    let inputs = GivenInputs::read(&args.inputs)?;
    args.net.take_values(&inputs);
    let source = match &args.module {
        Some(path) => RunSource::Module {
            path: path.clone(),
            target: args
                .net
                .target_given()
                .then(|| args.net.target())
                .transpose()?,
            log: None,
        },
        None => RunSource::Network {
            spec: Box::new(args.net.spec()?),
            log: args.log.clone(),
        },
    };
    let req = RunRequest {
        inputs,
        step_by_step: args.step_by_step,
        save_outputs: args.output.clone(),
        profile: args.profile.then_some(args.repeat.max(1)),
        benchmark: args
            .benchmark
            .then(|| TimeEvaluator::new(args.number.max(1), args.repeat.max(1), 0.0)),
        ..RunRequest::new(source)
    };
    let outcome = tc.run(&req, &mut crate::Printer)?;
    if outcome.outputs.is_empty() {
        bail!("the network has no output");
    }
    if let Some(t) = &outcome.top5 {
        say_part!("{t}");
    }
    if let Some(p) = &outcome.profile {
        say_part!("{p}");
    }
    if let Some(b) = &outcome.benchmark {
        say_part!("{b}");
    }
    if args.json {
        println!("{}", outcome.to_json());
    }
    Ok(())
}
