//! `tessera`: the command line of the Tessera tensor compiler.

/// Whether a command prints its `--json` summary: its human text then goes to stderr,
/// so that stdout is the JSON alone.
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Switches [`say!`] to stderr (a command given `--json`).
pub(crate) fn set_json(on: bool) {
    JSON.store(on, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn json_mode() -> bool {
    JSON.load(std::sync::atomic::Ordering::Relaxed)
}

/// The human text of a command: `println!` on stdout, on stderr under `--json`.
macro_rules! say {
    ($($t:tt)*) => {
        if $crate::json_mode() {
            eprintln!($($t)*)
        } else {
            println!($($t)*)
        }
    };
}

/// [`say!`] without the newline.
macro_rules! say_part {
    ($($t:tt)*) => {
        if $crate::json_mode() {
            eprint!($($t)*)
        } else {
            print!($($t)*)
        }
    };
}

/// A library call's events as the command line shows them: lines by [`say!`],
/// warnings on stderr.
pub(crate) struct Printer;

impl tessera_driver::run::Events for Printer {
    fn out(&mut self, text: &str) {
        say_part!("{text}");
    }
    fn warn(&mut self, text: &str) {
        eprintln!("warning: {text}");
    }
}

/// A report as JSON on stdout (`--json`), or as text.
pub(crate) fn print_view(json: bool, value: serde_json::Value, text: &dyn std::fmt::Display) {
    if json {
        println!("{value}");
    } else {
        print!("{text}");
    }
}

mod autosched;
mod bench;
mod generate;
mod interrupt;
mod network;
mod op;
mod plot;
mod plugins;
mod progress;
mod records;
mod rpc;
mod tune;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "tessera", version, about = "Tessera: a tensor-program compiler and auto-tuner", long_about = None)]
struct Cli {
    /// Log what the library does on stderr: -v the main steps (imports, compiles,
    /// tuning rounds), -vv every measurement batch, -vvv every failure and node.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// The `tracing` subscriber of `-v`: nothing without it, so the output stays as it is.
fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => return,
        1 => tracing::Level::INFO,
        2 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_max_level(level)
        .with_target(false)
        .init();
}

#[derive(Subcommand)]
enum Command {
    /// Build one operator for a target, check it against the reference, time it
    /// (`--list`: the operators).
    #[command(
        after_help = "Examples:\n  tessera op --list\n  tessera op matmul --shape 1024,1024,1024\n  tessera op conv2d --shape 1,56,56,64,64,3,3 --pad 1 --show source\n  tessera op softmax --shape 1,1000 --schedule naive --json\n  tessera op dense --shape 1,1000,512 --target \"cpu -num-cores=1\"\n\nThe operators and their --shape: --help or --list.",
        after_long_help = op::long_help()
    )]
    Op(op::OpArgs),
    /// Time the default CPU schedules against the `gemm` crate (matmul 1024³, ResNet
    /// conv2d), single-threaded and with 2 threads, and print the ratios. Needs a build
    /// with `--features bench`.
    Bench(bench::BenchArgs),
    /// List the tuning tasks of a network: one compute DAG per distinct fused group,
    /// with its weight (how many times the network computes it).
    #[command(
        after_help = "Examples:\n  tessera tasks --network resnet-18 --layout NHWC --target cpu\n  tessera tasks --onnx model.onnx --summary"
    )]
    Tasks(network::TasksArgs),
    /// Compile a network with default schedules and run it: output, top-5 classes,
    /// and with --benchmark the execution time summary.
    #[command(
        after_help = "Examples:\n  tessera run --network resnet-18 --benchmark\n  tessera run --module resnet18.tsm --input data=image.npy\n  tessera run --onnx resnet18.onnx --input input=image.npy --benchmark --repeat 20\n  tessera run --network mobilenet --layout NCHW --batch 4 --profile"
    )]
    Run(network::RunArgs),
    /// Compile a network (with --log, its history best) into one module file that
    /// `tessera run --module` runs without compiling (TVM's `tvmc compile`).
    #[command(
        after_help = "Examples:\n  tessera compile --network resnet-18 --out resnet18.tsm\n  tessera compile --onnx model.onnx --log tuned.jsonl --out model.tsm\n  tessera run --module model.tsm --benchmark"
    )]
    Compile(network::CompileArgs),
    /// Greedy decoding from one module of a decoder compiled with its KV cache: the
    /// prompt prefilled on an empty cache, then one token at a time; per-token latency.
    #[command(
        after_help = "Examples:\n  tessera generate --module gpt2_kv.tsm --prompt 464,3290,318 --steps 32\n  tessera generate --module gpt2_kv.tsm --prompt prompt.npy --steps 64 --logits steps.npz --json"
    )]
    Generate(generate::GenerateArgs),
    /// Tune a network's (or one operator's) tasks with a search strategy (the
    /// auto-scheduler `sketch` by default; with --templates a template tuner; any
    /// strategy a plugin provides with --strategy), appending every measurement to a
    /// record log; for a network, then build it untuned and with the history best and
    /// compare their latency.
    #[command(
        after_help = "Examples:\n  tessera tune --network resnet-18 --trials 900 --log r18.jsonl\n  tessera tune --templates --network resnet-18 --tuner ga --trials 320 --log resnet18.jsonl\n  tessera tune --op matmul --op-shape 1024,1024,1024 --trials 256 --log mm.jsonl\n  tessera tune --op matmul --op-shape 256,256,256 --strategy tilewalk --trials 64 --log tw.jsonl"
    )]
    Tune(Box<tune::TuneArgs>),
    /// Plugins: list what is found, check a file.
    #[command(subcommand)]
    Plugins(plugins::PluginsCmd),
    /// Tuning record logs: list records, the best per workload, distill.
    #[command(subcommand)]
    Records(records::RecordsCmd),
    /// Remote devices: the tracker that device servers register with under a key, and
    /// its queue.
    #[command(subcommand)]
    Rpc(rpc::RpcCmd),
    /// Runs measurement jobs (what `tessera tune` starts and reuses for many kernels): reads
    /// one job file's path per line of standard input and answers each with one marked
    /// JSON line on standard output, until its input ends or a job fails on the device.
    #[command(hide = true)]
    Runner,
}

fn main() -> ExitCode {
    // This binary runs its own measurement jobs (`tessera runner`): no second binary.
    tessera_driver::runner::use_this_binary_as_runner();
    let cli = Cli::parse();
    init_logging(cli.verbose);
    // a runner job is its parent's to end
    if !matches!(cli.command, Command::Runner) {
        interrupt::install();
    }
    let result = match cli.command {
        Command::Op(args) => op::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Tasks(args) => network::tasks(args),
        Command::Run(args) => network::run(args),
        Command::Compile(args) => network::compile(args),
        Command::Generate(args) => generate::run(args),
        Command::Tune(args) => autosched::run(*args),
        Command::Plugins(cmd) => plugins::run(cmd),
        Command::Records(cmd) => records::run(cmd),
        Command::Rpc(cmd) => rpc::run(cmd),
        Command::Runner => return plugins::serve_jobs(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, no backtrace: `context: cause: cause`, each
/// cause once (an error whose message already quotes its source's, as `io::Error`
/// wrappers do, would otherwise print it twice).
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string().replace('\n', " | ");
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
