//! `tessera op`: one operator of the catalog (`tessera_te::catalog`) built, checked and
//! timed by the driver (`Toolchain::operator_program`, `run_operator`), and its report
//! (`driver::operator_report`) printed;
//! `tessera op --list` prints the catalog.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use tessera_driver::operator_report::{OperatorReport, Shown};
use tessera_driver::{CheckWith, OperatorSchedule};
use tessera_runtime::TimeEvaluator;
use tessera_te::catalog::{self, OpAttrs, OpSpec};

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
    /// Build the history best of this record log instead of the default schedule: the
    /// record with the lowest median for this operator's workload on the target, a step
    /// history or a template configuration, applied as `tessera run --log` applies it to
    /// a network that computes the operator; without one, the default, with a warning
    /// that says why.
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

pub fn run(a: OpArgs) -> Result<()> {
    if a.list {
        print!("{}", catalog::table());
        return Ok(());
    }
    let shown = Shown::parse(&a.show)?;
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
        let emitted = toolchain.emit_operator(&program.func, &target, dir, shown.source)?;
        crate::print_view(a.json, emitted.to_json(), &emitted);
        return Ok(());
    }
    let device_tc = toolchain.with_remote(crate::rpc::remote_options(&a.rpc)?);
    let evaluator = TimeEvaluator {
        number: a.number.max(1),
        repeat: a.repeat.max(1),
        min_repeat_ms: a.min_repeat_ms,
        cache_flush: a.cache_flush,
        slow_cutoff: None,
    };
    let run = device_tc.run_operator(&spec, &target, &program.func, a.check.into(), &evaluator)?;
    let dag = spec.dag()?;
    let report = OperatorReport {
        spec: &spec,
        target: &target,
        schedule: &program.schedule,
        dag: &dag,
        func: &program.func,
        run: &run,
        shown,
    };
    crate::print_view(a.json, report.to_json(), &report);
    if let Some(Err(e)) = &run.correct {
        bail!(
            "the kernel's output differs from the {}: {e}",
            run.checked_against.name()
        );
    }
    Ok(())
}
