//! `tessera bench`: the peer benchmark of `tessera_peerbench` (our default CPU schedules,
//! or a log's best for one operator, against the `gemm` crate in one run), printed as
//! tables with the ratios.

use clap::Args;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Timing: repeats per measurement.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Timing: the least duration of one repeat, in milliseconds.
    #[arg(long, default_value_t = 200.0)]
    pub min_repeat_ms: f64,
    /// Instead of the default schedules: time the best step history an auto-scheduler
    /// log (--log) holds for one operator, `matmul` (--op-shape M,N,K) or `conv2d`
    /// (NHWC, N=1,H,W,C_IN,C_OUT,KH,KW, with --stride/--pad), against its default
    /// schedule and the gemm crate (im2col + gemm for conv2d) in the same run.
    #[arg(long, requires_all = ["op_shape", "log"])]
    pub op: Option<String>,
    /// With --op: the operator's sizes, comma-separated (as `tessera op --list`).
    #[arg(long, value_name = "DIMS", value_delimiter = ',')]
    pub op_shape: Vec<i64>,
    /// With --op: stride, padding (default 0, or `same`), dilation, … as `tessera op`.
    #[command(flatten)]
    pub op_attrs: crate::op::OpAttrArgs,
    #[arg(long)]
    pub log: Option<std::path::PathBuf>,
    /// Threads of the --op comparison (both sides).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

#[cfg(not(feature = "bench"))]
pub fn run(_: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("this binary was built without the `bench` feature: run `cargo run --release -p tessera-cli --features bench -- bench`")
}

#[cfg(feature = "bench")]
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    use tessera_peerbench::{compare_tuned, kernel_rows, Timing};
    // OpenMP worker threads that spin after a parallel region steal the core the peer's
    // threads need (and the reverse); both sides yield when idle instead. Read by the
    // OpenMP runtime when the first kernel loads, which is later.
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        std::env::set_var("OMP_WAIT_POLICY", "PASSIVE");
    }
    let timing = Timing {
        repeat: a.repeat,
        min_repeat_ms: a.min_repeat_ms,
    };
    if let (Some(op), Some(log)) = (&a.op, &a.log) {
        // the workload `tessera tune --op` tunes with the same flags
        let spec = crate::autosched::op_spec(op, &a.op_shape, &a.op_attrs)?;
        let shape = a
            .op_shape
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let loaded = crate::records::load_warn(log)?;
        let c = compare_tuned(&spec, &loaded.records, a.threads, &timing)?;
        println!(
            "{op} {shape}, {} threads; best of {} (record measured at {:.3} ms)",
            a.threads.max(1),
            log.display(),
            c.record_ms
        );
        println!("| schedule | ms | GFLOPS | speed / {} |", c.peer);
        println!("|---|---|---|---|");
        for (what, ms) in [
            ("auto-scheduler best", c.tuned_ms),
            ("default schedule", c.default_ms),
            (c.peer, c.peer_ms),
        ] {
            let gflops = c.flop / (ms * 1e-3) / 1e9;
            println!("| {what} | {ms:.3} | {gflops:.1} | {:.2} |", c.peer_ms / ms);
        }
        return Ok(());
    }
    println!("| workload | threads | tessera (ms) | tessera GFLOPS | peer | peer (ms) | peer GFLOPS | tessera speed / peer speed |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in kernel_rows(&timing)? {
        let g = |ms: f64| r.flops / (ms * 1e-3) / 1e9;
        println!(
            "| {} | {} | {:.3} | {:.1} | {} | {:.3} | {:.1} | {:.2} |",
            r.what,
            r.threads,
            r.ours_ms,
            g(r.ours_ms),
            r.peer,
            r.peer_ms,
            g(r.peer_ms),
            r.peer_ms / r.ours_ms
        );
    }
    Ok(())
}
