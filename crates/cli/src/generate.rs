//! `tessera generate`: greedy decoding from one module of a decoder compiled with its
//! KV cache ([`tessera_driver::generate`]): parses the arguments, calls
//! [`Toolchain::generate`](tessera_driver::Toolchain::generate), prints.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use tessera_driver::generate::GenerateRequest;
use tessera_runtime::NDArray;

/// `tessera generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// A module file of a decoder with its cache (`tessera compile` with the ranges of
    /// the cache's length and the new tokens, e.g. `--shape input_ids=1,seq:1..64
    /// --shape past_key_values.0.key=1,12,past:0..192,64 … --shape
    /// attention_mask=1,past+seq`).
    #[arg(long, value_name = "FILE")]
    module: PathBuf,
    /// The prompt's token ids: comma-separated, or a .npy file of integers.
    #[arg(long, value_name = "IDS|FILE.npy")]
    prompt: String,
    /// Tokens decoded one at a time after the prompt's.
    #[arg(long, default_value_t = 16)]
    steps: usize,
    /// Write every step's logits to this .npz (`step000` the prompt's).
    #[arg(long, value_name = "FILE.npz")]
    logits: Option<PathBuf>,
    /// Print a JSON summary on stdout (tokens, prefill and per-step milliseconds).
    #[arg(long)]
    json: bool,
}

fn prompt_ids(arg: &str) -> Result<Vec<i64>> {
    if arg.ends_with(".npy") {
        let a = NDArray::load_npy(arg).with_context(|| format!("--prompt {arg}"))?;
        if !a.dtype().is_integer() {
            anyhow::bail!("--prompt {arg}: token ids are integers, not {}", a.dtype());
        }
        return Ok(a.to_f64_vec().into_iter().map(|v| v as i64).collect());
    }
    arg.split(',')
        .map(|t| {
            t.trim()
                .parse::<i64>()
                .with_context(|| format!("--prompt: `{t}` is no token id"))
        })
        .collect()
}

pub fn run(args: GenerateArgs) -> Result<()> {
    crate::set_json(args.json);
    let req = GenerateRequest {
        module: args.module.clone(),
        prompt: prompt_ids(&args.prompt)?,
        steps: args.steps,
        save_logits: args.logits.clone(),
    };
    let report = crate::plugins::toolchain().generate(&req, &mut crate::Printer)?;
    let ms = |d: &std::time::Duration| d.as_secs_f64() * 1e3;
    say!("tokens: {:?}", report.tokens);
    say!(
        "prefill of {} tokens: {:.3} ms",
        req.prompt.len(),
        ms(&report.prefill)
    );
    if let (Some(min), Some(max)) = (report.steps.iter().min(), report.steps.iter().max()) {
        say!(
            "decode: median {:.3} ms/token (min {:.3}, max {:.3}) over {} steps",
            report.median_ms(),
            ms(min),
            ms(max),
            report.steps.len()
        );
    }
    if args.json {
        println!("{}", report.to_json());
    }
    Ok(())
}
