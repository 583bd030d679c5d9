//! `tessera tune`: a tuning session of the library (the driver's `Toolchain::tune`) over
//! every task of a network (or one operator) with the strategy the registry finds — the
//! auto-scheduler (`sketch`, TVM's Ansor) over fused-group tasks, or with `--templates`
//! a template tuner (AutoTVM: `xgb`, `ga`, …) over the anchor operators. This file turns
//! the arguments into the driver's `TuneRequest`, makes the one call
//! (`Toolchain::tune`) and shows its events on the terminal.

use crate::tune::{measure_options, TuneArgs};
use anyhow::{bail, Context, Result};
use tessera_driver::tune::{
    MemoryUse, PolicyOptions, PrepareProgress, Progress, SchedulerOptions, SessionOptions,
    TaskSelection, TuneEvents, TuneRequest, TuneSubject,
};
use tessera_te::catalog::OpSpec;

/// The catalog operator of `--op OP --op-shape DIMS` with the attributes of `attrs`
/// (the same flags and defaults as `tessera op`).
pub(crate) fn op_spec(op: &str, dims: &[i64], attrs: &crate::op::OpAttrArgs) -> Result<OpSpec> {
    if dims.is_empty() {
        bail!("--op needs --op-shape (the operator's sizes, as `tessera op --list` gives them)");
    }
    Ok(OpSpec::new(op, dims, attrs.attrs()?)?)
}

/// The strategy's name: `--strategy`, else `--tuner` (the familiar spelling with
/// `--templates`, `xgb` by default), else the auto-scheduler's `sketch`.
fn strategy_name(args: &TuneArgs) -> Result<String> {
    Ok(match (&args.strategy, &args.tuner) {
        (Some(s), Some(t)) if s != t => {
            bail!("--strategy `{s}` and --tuner `{t}` disagree: give one")
        }
        (Some(s), _) => s.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) if args.templates => "xgb".into(),
        (None, None) => "sketch".into(),
    })
}

/// The session's text on the terminal: tables to stdout, warnings to stderr, and the
/// progress after each round — a bar with the time left (indicatif) on a terminal, a
/// plain line on stderr otherwise (a log file, a pipe, CI).
#[derive(Default)]
struct Terminal {
    bar: Option<indicatif::ProgressBar>,
    /// The phase under way (baselines, re-measuring), if any.
    phase: Option<crate::progress::Phase>,
}

impl Terminal {
    /// Runs `f` with the bars (if any) hidden, so that text does not tear them.
    fn print(&self, f: impl FnOnce()) {
        match (&self.bar, &self.phase) {
            (Some(bar), _) => bar.suspend(f),
            (None, Some(phase)) => phase.suspend(f),
            (None, None) => f(),
        }
    }
}

impl TuneEvents for Terminal {
    fn out(&mut self, text: &str) {
        use std::io::Write;
        self.print(|| {
            say_part!("{text}");
            let _ = std::io::stdout().flush();
        });
    }
    fn warn(&mut self, text: &str) {
        self.print(|| eprintln!("warning: {text}"));
    }
    fn phase(&mut self, name: &str, done: usize, total: usize, _elapsed: f64) {
        if self.phase.as_ref().is_none_or(|p| p.name() != name) {
            self.phase = Some(crate::progress::Phase::new(name, total));
        }
        if let Some(p) = &mut self.phase {
            p.set(done);
        }
        if done >= total {
            self.phase = None;
        }
    }
    fn progress(&mut self, p: &Progress) {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            // each round's line already said where the search ended
            if !p.done {
                eprintln!("progress: {p}");
            }
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new(p.budget as u64);
            let style = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} trials, {elapsed} elapsed, ETA {eta} {msg}",
            )
            .expect("a valid template");
            bar.set_style(style);
            bar
        });
        bar.set_position(p.trials as u64);
        if let Some(l) = p.estimated_latency {
            bar.set_message(format!("estimated latency {:.3} ms", l * 1e3));
        }
        if p.done {
            bar.finish_and_clear();
            self.bar = None;
            eprintln!("progress: {p}");
        }
    }
}

/// `words` as one shell command line (words with spaces or quotes quoted).
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=.,/:@+".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The progress of preparing the tasks (the policies, and with the check each task's
/// reference outputs), before the first table.
fn prepare_progress(check: bool) -> PrepareProgress {
    let name = if check {
        "preparing the tasks (each one's reference outputs for the correctness check)"
    } else {
        "preparing the tasks"
    };
    let phase = std::sync::Mutex::new(None::<crate::progress::Phase>);
    PrepareProgress(std::sync::Arc::new(move |done, total| {
        let mut p = phase.lock().unwrap_or_else(|e| e.into_inner());
        p.get_or_insert_with(|| crate::progress::Phase::new(name, total))
            .set(done);
    }))
}

/// The session's options from the arguments.
fn session_options(args: &TuneArgs) -> Result<(SessionOptions, PolicyOptions)> {
    let name = &args.task_scheduler;
    let selection = TaskSelection::named(name, args.trials).with_context(|| {
        format!("unknown --task-scheduler `{name}` (gradient, round-robin or sequential)")
    })?;
    // AutoTVM's loop stops each task early, not the session
    let sequential = matches!(selection, TaskSelection::Sequential { .. });
    if args.per_round == 0 || args.population == 0 {
        bail!("--per-round and --population must be positive");
    }
    if !(0.0..=1.0).contains(&args.sketch_share) {
        bail!("--sketch-share must be between 0 and 1");
    }
    let session = SessionOptions {
        scheduler: SchedulerOptions {
            selection,
            per_round: args.per_round,
            early_stopping: args.early_stopping.filter(|_| !sequential),
            early_stopping_per_task: args.early_stopping.filter(|_| sequential),
            seed: args.tuner_seed,
            ..SchedulerOptions::default()
        },
        trials: args.trials,
        warmup: args.per_round.min(100),
        check: !args.no_check,
        remeasure_top: args.remeasure_top,
        remeasure_runs: args.remeasure_runs,
        on_prepare: Some(prepare_progress(!args.no_check)),
        memory: model_memory(args)?,
    };
    let params = [
        ("population", args.population.to_string()),
        ("sketch_share", args.sketch_share.to_string()),
        ("max_code_size", args.max_code_size.to_string()),
    ];
    let policy = PolicyOptions {
        seed: args.tuner_seed,
        params: params
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    };
    Ok((session, policy))
}

/// The cost model's memory of `--model-cache` (or the default cache) for the target,
/// read as `--fresh-model` / `--model-from` say; none without a cache folder (said).
fn model_memory(args: &TuneArgs) -> Result<Option<MemoryUse>> {
    let m = MemoryUse::resolve(args.model_cache.clone(), args.fresh_model, &args.model_from)?;
    if m.is_none() {
        say!(
            "the cost model neither starts from nor keeps earlier runs: no model cache \
             ($TESSERA_MODEL_CACHE is off, or no home folder; --model-cache DIR sets one)"
        );
    }
    Ok(m)
}

/// The request of `tessera tune`'s arguments.
fn request(args: &TuneArgs) -> Result<TuneRequest> {
    if !args.templates && args.tuner.is_some() {
        bail!(
            "--tuner picks a template tuner: give --templates, or --model for the auto-scheduler"
        );
    }
    let (session, policy) = session_options(args)?;
    let target = args.net.target()?;
    let subject = match &args.op {
        Some(op) => TuneSubject::Operator {
            op: op_spec(op, &args.op_shape, &args.op_attrs)?,
            target,
        },
        None => TuneSubject::Network(args.net.spec()?),
    };
    Ok(TuneRequest {
        subject,
        templates: args.templates,
        strategy: strategy_name(args)?,
        cost_model: args.model.parse()?,
        log: args.log.clone(),
        resume: args.resume,
        session,
        policy,
        measure: measure_options(args)?,
        network_check: !args.no_network_check,
        compare_rounds: args.compare_rounds,
        sample: args.sample.clone(),
    })
}

pub fn run(args: TuneArgs) -> Result<()> {
    crate::set_json(args.json);
    let req = request(&args)?;
    let rerun: Vec<String> = std::env::args().collect();
    crate::interrupt::set_hint(format!(
        "every measurement so far is in {}; run the same command again to resume from it:\n  {}",
        args.log.display(),
        shell_words(&rerun)
    ));
    let report = crate::plugins::toolchain().tune(&req, &mut Terminal::default())?;
    say_part!("{}", report.closing_text());
    if args.json {
        println!("{}", report.to_json(&args.log));
    }
    Ok(())
}
