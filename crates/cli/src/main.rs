//! `tessera`: the command line of the Tessera tensor compiler.

mod bench;
mod op;
mod plugins;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "tessera", version, about = "Tessera: a tensor-program compiler and auto-tuner", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build one operator for a target, check it against the reference, time it.
    #[command(
        after_help = "Examples:\n  tessera op matmul --shape 1024,1024,1024\n  tessera op conv2d --shape 1,56,56,64,64,3,3 --pad 1 --show source\n  tessera op softmax --shape 1,1000 --schedule naive --json\n  tessera op dense --shape 1,1000,512 --target \"cpu -num-cores=1\""
    )]
    Op(op::OpArgs),
    /// Time the default CPU schedules against the `gemm` crate (matmul 1024³, ResNet
    /// conv2d), single-threaded and with 2 threads, and print the ratios. Needs a build
    /// with `--features bench`.
    Bench(bench::BenchArgs),
    /// Plugins: list what is found, check a file.
    #[command(subcommand)]
    Plugins(plugins::PluginsCmd),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Op(args) => op::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Plugins(cmd) => plugins::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes, no backtrace.
            let msg = format!("{e:#}").replace('\n', " | ");
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
