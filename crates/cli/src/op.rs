//! `tessera op`: one operator of the catalog (`tessera_te::catalog`) built, checked and
//! timed by the driver (`Toolchain::operator_program`, `run_operator`), and printed;
//! `tessera op --list` prints the catalog.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::json;
use tessera_backends::Backend;
use tessera_driver::{CheckWith, OperatorSchedule};
use tessera_ir::PrimFunc;
use tessera_runtime::{TimeEvaluator, TimeResult};
use tessera_te::catalog::{self, OpAttrs, OpSpec};
use tessera_te::ComputeDag;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScheduleKind {
    /// No transformation: the loop nest of the definition.
    Naive,
    /// The hand-written default schedule (CPU: tiled, vectorized, parallel; GPU: blocks of
    /// threads over the output).
    Default,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CheckKind {
    /// The interpreter when the operator is small enough, else the naive kernel.
    Auto,
    /// The reference interpreter running the unscheduled definition (slow for big sizes).
    Interp,
    /// The naive schedule compiled for the same target.
    Naive,
    /// No check.
    None,
}

#[derive(Args, Debug)]
pub struct OpArgs {
    /// The operator: a name of the catalog (`tessera op --list`).
    #[arg(required_unless_present = "list")]
    pub op: Option<String>,
    /// Print the catalog (each operator's name, --shape and what it computes) and exit.
    #[arg(long, exclusive = true)]
    pub list: bool,
    /// Comma-separated sizes; their meaning depends on the operator (`--list`).
    /// `--op-shape`, `tune --op`'s spelling, is the same flag.
    #[arg(
        long,
        visible_alias = "op-shape",
        value_delimiter = ',',
        allow_hyphen_values = true,
        required_unless_present = "list"
    )]
    pub shape: Vec<i64>,
    #[command(flatten)]
    pub attrs: OpAttrArgs,
    /// The target, e.g. `cpu` or `cpu -mcpu=native -num-cores=2`.
    #[arg(long, default_value = "cpu")]
    pub target: String,
    /// Which schedule to build.
    #[arg(long, value_enum, default_value_t = ScheduleKind::Default)]
    pub schedule: ScheduleKind,
    /// What to print besides the result: any of dag, ir, source (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub show: Vec<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// What to check the result against.
    #[arg(long, value_enum, default_value_t = CheckKind::Auto)]
    pub check: CheckKind,
    /// Timing: runs per repeat (grown until a repeat lasts --min-repeat-ms).
    #[arg(long, default_value_t = 1)]
    pub number: usize,
    /// Timing: repeats (each gives one mean time).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Timing: the least duration of one repeat, in milliseconds.
    #[arg(long, default_value_t = 100.0)]
    pub min_repeat_ms: f64,
    /// Timing: flush the CPU cache before each repeat.
    #[arg(long)]
    pub cache_flush: bool,
    /// Build the history best of this record log (the step history with the lowest
    /// median for this operator's workload on the target, as `tessera run --log`
    /// chooses) instead of the default schedule; without one, the default, with a
    /// warning that says why.
    #[arg(long, value_name = "FILE", conflicts_with = "schedule")]
    pub log: Option<std::path::PathBuf>,
    /// Build the kernel into this folder and stop: the target's compiler runs (NVRTC
    /// for `cuda`), no device is opened and nothing runs. For a target whose device is
    /// not on this machine.
    #[arg(long, value_name = "DIR")]
    pub emit: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub rpc: crate::rpc::RpcArgs,
}

/// The long help of `tessera op`: examples, then the catalog.
pub fn long_help() -> String {
    format!(
        "Examples:\n  tessera op matmul --shape 1024,1024,1024\n  tessera op conv2d --shape 1,56,56,64,64,3,3 --pad 1 --show source\n  tessera op max_pool2d --shape 1,112,112,64,3,3 --stride 2 --pad 1\n  tessera op softmax --shape 1,1000 --schedule naive --json\n  tessera op dense --shape 1,1000,512 --target \"cpu -num-cores=1\"\n\n\
         Operators (--shape lists sizes in this order whatever the layout; --pad defaults to 0):\n{}",
        catalog::table()
    )
}

/// The attributes of one operator, the same flags and defaults for `tessera op` and
/// `tessera tune --op` (so that both name the same workload).
#[derive(Args, Debug, Clone)]
pub struct OpAttrArgs {
    /// Stride of every spatial axis (convolutions, pooling).
    #[arg(long, default_value_t = 1)]
    pub stride: i64,
    /// Zero padding on both sides of every spatial axis (convolutions, pooling, pad): a
    /// number, or `same` (kernel / 2).
    #[arg(long, default_value = "0", allow_hyphen_values = true, value_parser = parse_pad)]
    pub pad: Pad,
    /// Dilation of every spatial axis (convolutions, pooling).
    #[arg(long, default_value_t = 1)]
    pub dilation: i64,
    /// Pooling: round the output size up.
    #[arg(long)]
    pub ceil_mode: bool,
    /// conv2d_nchwc: the input and output channel blocks, IB,OB.
    #[arg(long, value_delimiter = ',')]
    pub block: Option<Vec<i64>>,
    /// conv2d, conv2d_nchw: channel groups (the kernel's input channels are C_IN / groups).
    #[arg(long, default_value_t = 1)]
    pub groups: i64,
}

/// `--pad`: a number of elements, or "same".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pad {
    Same,
    Elements(i64),
}

fn parse_pad(s: &str) -> std::result::Result<Pad, String> {
    if s.eq_ignore_ascii_case("same") {
        return Ok(Pad::Same);
    }
    s.trim()
        .parse()
        .map(Pad::Elements)
        .map_err(|_| format!("`{s}`: a whole number of elements, or `same`"))
}

impl OpAttrArgs {
    /// The catalog's attributes.
    pub fn attrs(&self) -> Result<OpAttrs> {
        let block = match self.block.as_deref() {
            None => None,
            Some(&[ib, ob]) => Some((ib, ob)),
            Some(v) => bail!("--block takes IB,OB (2 numbers), got {}", v.len()),
        };
        Ok(OpAttrs {
            stride: self.stride,
            pad: match self.pad {
                Pad::Same => None,
                Pad::Elements(p) => Some(p),
            },
            dilation: self.dilation,
            ceil_mode: self.ceil_mode,
            block,
            groups: self.groups,
        })
    }
}

/// The operator the arguments ask for.
fn spec_of(a: &OpArgs) -> Result<OpSpec> {
    let name = a.op.as_deref().context("no operator given (see --list)")?;
    Ok(OpSpec::new(name, &a.shape, a.attrs.attrs()?)?)
}

impl From<CheckKind> for CheckWith {
    fn from(k: CheckKind) -> Self {
        match k {
            CheckKind::Auto => CheckWith::Auto,
            CheckKind::Interp => CheckWith::Interpreter,
            CheckKind::Naive => CheckWith::NaiveKernel,
            CheckKind::None => CheckWith::Nothing,
        }
    }
}

/// `--emit DIR`: builds `func` into `dir` and says what was written.
fn emit(a: &OpArgs, backend: &dyn Backend, func: &PrimFunc, dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let artifact = backend.build(func, dir)?;
    let bytes = std::fs::metadata(&artifact.path)
        .map(|m| m.len())
        .unwrap_or(0);
    if a.json {
        let mut obj = json!({
            "op": func.name,
            "target": a.target,
            "artifact": artifact.path,
            "artifact_bytes": bytes,
            "launch": artifact.launch.map(|l| json!({"grid": l.grid, "block": l.block})),
        });
        if a.show.iter().any(|s| s == "source") {
            obj["source"] =
                json!(std::fs::read_to_string(&artifact.source_path).unwrap_or_default());
        }
        println!("{obj}");
    } else {
        if a.show.iter().any(|s| s == "source") {
            let src = std::fs::read_to_string(&artifact.source_path).unwrap_or_default();
            println!("== {} source ==\n{src}", artifact.device.name());
        }
        println!(
            "{}: built for `{}` into {} ({bytes} bytes); not run (--emit)",
            func.name,
            a.target,
            artifact.path.display()
        );
    }
    Ok(())
}

/// What `tessera op` found: printed as text or JSON.
struct Report<'a> {
    a: &'a OpArgs,
    spec: &'a OpSpec,
    target: String,
    target_kind: String,
    /// Which schedule was built: `default`, `naive`, or the history best of a log.
    schedule: String,
    dag: &'a ComputeDag,
    func: &'a PrimFunc,
    source: &'a str,
    correct: Option<Result<(), String>>,
    checked_against: &'static str,
    timing: TimeResult,
    device: String,
}

impl Report<'_> {
    fn shows(&self, k: &str) -> bool {
        self.a.show.iter().any(|s| s == k)
    }

    fn gflops(&self) -> f64 {
        self.dag.flop_count() / (self.timing.stats_ms().median * 1e-3) / 1e9
    }

    fn print_json(&self) {
        let stats = self.timing.stats_ms();
        let mut obj = json!({
            "op": self.spec.name,
            "shape": self.spec.shape,
            "target": self.target,
            "device": self.device,
            "schedule": self.schedule,
            "workload_key": self.dag.workload_key(),
            "flops": self.dag.flop_count(),
            "correct": self.correct.as_ref().map(|c| c.is_ok()),
            "checked_against": self.checked_against,
            "median_ms": stats.median,
            "mean_ms": stats.mean,
            "min_ms": stats.min,
            "max_ms": stats.max,
            "std_ms": stats.std,
            "number": self.timing.number,
            "repeat": self.timing.results.len(),
            "gflops": self.gflops(),
        });
        if let Some(Err(e)) = &self.correct {
            obj["mismatch"] = json!(e);
        }
        if self.shows("dag") {
            obj["dag"] = json!(self.dag.to_string());
        }
        if self.shows("ir") {
            obj["ir"] = json!(self.func.to_string());
        }
        if self.shows("source") {
            obj["source"] = json!(self.source);
        }
        println!("{obj}");
    }

    fn print_text(&self) {
        if self.shows("dag") {
            println!("== compute DAG ==\n{}", self.dag);
        }
        if self.shows("ir") {
            println!("== lowered IR ==\n{}", self.func);
        }
        if self.shows("source") {
            println!("== {} source ==\n{}", self.target_kind, self.source);
        }
        let shape: Vec<String> = self.spec.shape.iter().map(|d| d.to_string()).collect();
        println!(
            "{} {} on `{}` ({}), {} schedule",
            self.spec.name,
            shape.join("x"),
            self.target,
            self.device,
            self.schedule
        );
        let against = self.checked_against;
        match &self.correct {
            Some(Ok(())) => println!("correct: yes (checked against the {against})"),
            Some(Err(e)) => println!("correct: NO (checked against the {against}): {e}"),
            None => println!("correct: not checked"),
        }
        println!(
            "time: {:.4} ms median ({} repeats of {} runs)  {:.2} GFLOPS",
            self.timing.stats_ms().median,
            self.timing.results.len(),
            self.timing.number,
            self.gflops()
        );
        println!("{}", self.timing);
    }
}

pub fn run(a: OpArgs) -> Result<()> {
    if a.list {
        print!("{}", catalog::table());
        return Ok(());
    }
    for s in &a.show {
        if !["dag", "ir", "source"].contains(&s.as_str()) {
            bail!("--show: unknown item `{s}` (known: dag, ir, source)");
        }
    }
    let spec = spec_of(&a)?;
    let toolchain = crate::plugins::toolchain();
    let target = toolchain.parse_target(&a.target)?;
    let loaded = a
        .log
        .as_deref()
        .map(crate::records::load_warn)
        .transpose()?;
    let schedule = match (&loaded, &a.log) {
        (Some(log), Some(path)) => OperatorSchedule::HistoryBest(log, path),
        _ if a.schedule == ScheduleKind::Naive => OperatorSchedule::Naive,
        _ => OperatorSchedule::Default,
    };
    let program = toolchain.operator_program(&spec, &target, schedule)?;
    if let (Some(why), Some(log)) = (&program.fallback, &a.log) {
        eprintln!(
            "warning: nothing of {} applies to {} {:?}: {why}; the default schedule is built",
            log.display(),
            spec.name,
            spec.shape
        );
    }
    if let Some(dir) = &a.emit {
        let backend = toolchain.registry().backend_for(&target)?;
        return emit(&a, backend.as_ref(), &program.func, dir);
    }
    crate::rpc::use_remote(&a.rpc)?;
    let evaluator = TimeEvaluator {
        number: a.number.max(1),
        repeat: a.repeat.max(1),
        min_repeat_ms: a.min_repeat_ms,
        cache_flush: a.cache_flush,
        slow_cutoff: None,
    };
    let ran = toolchain.run_operator(&spec, &target, &program.func, a.check.into(), &evaluator)?;
    let dag = spec.dag()?;
    let report = Report {
        a: &a,
        spec: &spec,
        target: target.to_string(),
        target_kind: target.kind.name().to_string(),
        schedule: program.schedule,
        dag: &dag,
        func: &program.func,
        source: &ran.source,
        correct: ran.correct.map(|c| c.map_err(|e| e.to_string())),
        checked_against: ran.checked_against.name(),
        timing: ran.timing,
        device: ran.device,
    };
    if a.json {
        report.print_json();
    } else {
        report.print_text();
    }
    if let Some(Err(e)) = report.correct {
        bail!(
            "the kernel's output differs from the {}: {e}",
            report.checked_against
        );
    }
    Ok(())
}
