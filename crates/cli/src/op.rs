//! `tessera op`: build one operator, check it, time it.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::json;
use tessera_backends::{builtin_backend, Backend, HardwareParams, Target};
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::{DataType, PrimFunc};
use tessera_plugin::{LoadedPlugin, Registry, TimeConfig};
use tessera_runtime::{Module, NDArray, TimeEvaluator, TimeResult};
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{compute, lower, ops, placeholder, ComputeDag, Schedule, Tensor};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OpKind {
    /// C[M, N] = A[M, K] · B[K, N]; --shape M,N,K
    Matmul,
    /// out[M, N] = data[M, K] · weight[N, K]ᵀ (TVM's dense); --shape M,N,K
    Dense,
    /// NHWC data ⊛ HWIO kernel; --shape N,H,W,C_IN,C_OUT,KH,KW with --stride/--pad/--dilation
    Conv2d,
    /// softmax over the last axis of a 2-D tensor; --shape ROWS,COLS
    Softmax,
    /// max(x, 0) elementwise; --shape D0,D1,…
    Relu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScheduleKind {
    /// No transformation: the loop nest of the definition.
    Naive,
    /// The hand-written default CPU schedule (tiled, vectorized, parallel).
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
    /// The operator.
    #[arg(value_enum)]
    pub op: OpKind,
    /// Comma-separated sizes; their meaning depends on the operator (see above).
    #[arg(long, value_delimiter = ',', required = true)]
    pub shape: Vec<i64>,
    /// conv2d stride (both spatial axes).
    #[arg(long, default_value_t = 1)]
    pub stride: i64,
    /// conv2d zero padding (both sides of both spatial axes).
    #[arg(long, default_value_t = 0)]
    pub pad: i64,
    /// conv2d dilation (both spatial axes).
    #[arg(long, default_value_t = 1)]
    pub dilation: i64,
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
}

/// Interpreter checks above this many FLOPs take too long; `auto` uses the naive kernel.
const INTERP_FLOP_LIMIT: f64 = 5e7;

/// The operator's tensors: `(inputs, output)`.
fn build_op(a: &OpArgs) -> Result<(Vec<Tensor>, Tensor)> {
    let f32 = DataType::float32();
    let want = |n: usize, what: &str| -> Result<()> {
        if a.shape.len() != n {
            bail!(
                "{:?} takes --shape {what} ({n} numbers), got {} number(s)",
                a.op,
                a.shape.len()
            );
        }
        if let Some(d) = a.shape.iter().find(|d| **d <= 0) {
            bail!("--shape: every size must be positive, got {d}");
        }
        Ok(())
    };
    Ok(match a.op {
        OpKind::Matmul => {
            want(3, "M,N,K")?;
            let (m, n, k) = (a.shape[0], a.shape[1], a.shape[2]);
            let x = placeholder(&[m, k], f32, "A")?;
            let y = placeholder(&[k, n], f32, "B")?;
            let c = ops::matmul(&x, &y)?;
            (vec![x, y], c)
        }
        OpKind::Dense => {
            want(3, "M,N,K")?;
            let (m, n, k) = (a.shape[0], a.shape[1], a.shape[2]);
            let x = placeholder(&[m, k], f32, "data")?;
            let w = placeholder(&[n, k], f32, "weight")?;
            let c = ops::dense(&x, &w, None)?;
            (vec![x, w], c)
        }
        OpKind::Conv2d => {
            want(7, "N,H,W,C_IN,C_OUT,KH,KW")?;
            let s = &a.shape;
            let d = placeholder(&[s[0], s[1], s[2], s[3]], f32, "data")?;
            let w = placeholder(&[s[5], s[6], s[3], s[4]], f32, "kernel")?;
            let c = ops::conv2d_nhwc(
                &d,
                &w,
                (a.stride, a.stride),
                (a.pad, a.pad),
                (a.dilation, a.dilation),
            )?;
            (vec![d, w], c)
        }
        OpKind::Softmax => {
            want(2, "ROWS,COLS")?;
            let x = placeholder(&a.shape, f32, "X")?;
            let y = ops::softmax(&x)?;
            (vec![x], y)
        }
        OpKind::Relu => {
            if a.shape.is_empty() || a.shape.iter().any(|d| *d <= 0) {
                bail!("relu takes --shape D0,D1,… with positive sizes");
            }
            let x = placeholder(&a.shape, f32, "X")?;
            let y = compute(&a.shape, "T_relu", &[], |ix| {
                tessera_ir::Expr::max(x.at(ix), tessera_ir::Expr::float(0.0))
            })?;
            (vec![x], y)
        }
    })
}

fn make_schedule(out: &Tensor, kind: ScheduleKind, hw: &HardwareParams) -> Result<Schedule> {
    if kind == ScheduleKind::Naive {
        return Ok(Schedule::create(&[out.clone()])?);
    }
    let p = CpuParams {
        vector_lanes: (hw.vector_unit_bytes / 4).max(1) as i64,
        num_cores: hw.num_cores,
        vectorize: true,
    };
    Ok(default_schedule(&[out.clone()], p)?)
}

/// Where kernels are built and run: the built-in CPU backend, or a plugin's backend and
/// device.
enum Device {
    Builtin(Box<dyn Backend>),
    Plugin {
        plugin: LoadedPlugin,
        target: String,
    },
}

/// A built kernel, ready to run.
enum Kernel {
    Native(Module),
    Plugin {
        plugin: LoadedPlugin,
        target: String,
        artifact: Vec<u8>,
        func: PrimFunc,
    },
}

impl Device {
    fn select(target: &Target, registry: &Registry) -> Result<Device> {
        if let Ok(b) = builtin_backend(target) {
            return Ok(Device::Builtin(b));
        }
        let kind = target
            .plugin
            .clone()
            .unwrap_or_else(|| target.kind.name().to_string());
        match registry.backend(&kind) {
            Some(p) => Ok(Device::Plugin {
                plugin: p.clone(),
                target: target.to_string(),
            }),
            None => Ok(Device::Builtin(builtin_backend(target)?)),
        }
    }
    fn hardware_params(&self) -> Result<HardwareParams> {
        Ok(match self {
            Device::Builtin(b) => b.hardware_params().clone(),
            Device::Plugin { plugin, target } => plugin.hardware_params(target)?,
        })
    }
    fn codegen(&self, func: &PrimFunc) -> Result<String> {
        Ok(match self {
            Device::Builtin(b) => b.codegen(func)?,
            Device::Plugin { plugin, target } => plugin.codegen(target, func)?,
        })
    }
    fn build(&self, func: &PrimFunc, dir: &std::path::Path) -> Result<Kernel> {
        Ok(match self {
            Device::Builtin(b) => Kernel::Native(Module::load(&b.build(func, dir)?)?),
            Device::Plugin { plugin, target } => {
                let artifact = plugin.build(target, func)?;
                Kernel::Plugin {
                    plugin: plugin.clone(),
                    target: target.clone(),
                    artifact,
                    func: func.clone(),
                }
            }
        })
    }
}

impl Kernel {
    fn call(&self, arrays: &mut [NDArray]) -> Result<()> {
        match self {
            Kernel::Native(m) => {
                let mut refs: Vec<&mut NDArray> = arrays.iter_mut().collect();
                m.call(&mut refs)?;
            }
            Kernel::Plugin {
                plugin,
                target,
                artifact,
                func,
            } => {
                let mut bytes: Vec<Vec<u8>> =
                    arrays.iter().map(|a| a.as_bytes().to_vec()).collect();
                plugin.run(target, artifact, func, &mut bytes)?;
                for (a, b) in arrays.iter_mut().zip(bytes) {
                    a.as_bytes_mut().copy_from_slice(&b);
                }
            }
        }
        Ok(())
    }
    fn time(&self, ev: &TimeEvaluator, arrays: &mut [NDArray]) -> Result<TimeResult> {
        Ok(match self {
            Kernel::Native(m) => {
                let mut refs: Vec<&mut NDArray> = arrays.iter_mut().collect();
                m.time_with(ev, &mut refs)?
            }
            Kernel::Plugin {
                plugin,
                target,
                artifact,
                func,
            } => {
                let bytes: Vec<Vec<u8>> = arrays.iter().map(|a| a.as_bytes().to_vec()).collect();
                let config = TimeConfig {
                    number: ev.number as u32,
                    repeat: ev.repeat as u32,
                    min_repeat_ms: ev.min_repeat_ms,
                };
                let results = plugin.time(target, artifact, func, &bytes, config)?;
                TimeResult {
                    results,
                    number: ev.number,
                }
            }
        })
    }
}

pub fn run(a: OpArgs) -> Result<()> {
    for s in &a.show {
        if !["dag", "ir", "source"].contains(&s.as_str()) {
            bail!("--show: unknown item `{s}` (known: dag, ir, source)");
        }
    }
    let registry = crate::plugins::registry();
    let target = Target::parse_with(&a.target, &registry.backend_kinds())?;
    let device = Device::select(&target, &registry)?;
    let hw = device.hardware_params()?;
    let (inputs, out) = build_op(&a)?;
    let dag = ComputeDag::new(&[out.clone()])?;
    let mut args: Vec<Tensor> = inputs.clone();
    args.push(out.clone());
    let sched = make_schedule(&out, a.schedule, &hw)?;
    let func = lower(&sched, &args, &format!("{:?}", a.op).to_lowercase())?;
    let source = device.codegen(&func)?;
    let dir = tempfile::tempdir().context("creating a build directory")?;
    let kernel = device.build(&func, dir.path())?;

    // Inputs, the kernel's output, and the reference output.
    let mut arrays: Vec<NDArray> = Vec::new();
    for (i, t) in args.iter().enumerate() {
        let shape: Vec<usize> = t.shape().iter().map(|d| *d as usize).collect();
        arrays.push(if i < inputs.len() {
            NDArray::random_uniform(t.dtype(), &shape, 42 + i as u64, -1.0, 1.0)?
        } else {
            NDArray::zeros(t.dtype(), &shape)?
        });
    }
    kernel.call(&mut arrays)?;
    let check = match a.check {
        CheckKind::Auto if dag.flop_count() <= INTERP_FLOP_LIMIT => CheckKind::Interp,
        CheckKind::Auto => CheckKind::Naive,
        c => c,
    };
    let reference: Option<NDArray> = match check {
        CheckKind::Interp => {
            let naive = lower(&Schedule::create(&[out.clone()])?, &args, "reference")?;
            let mut host: Vec<HostBuffer> = arrays.iter().map(|x| x.to_host_buffer()).collect();
            let last = host.len() - 1;
            host[last] = HostBuffer::zeros(out.dtype(), arrays[last].shape());
            interp::run(&naive, &mut host).map_err(|e| anyhow!("reference interpreter: {e}"))?;
            Some(NDArray::from_host_buffer(&host[last])?)
        }
        CheckKind::Naive => {
            let naive = lower(&Schedule::create(&[out.clone()])?, &args, "reference")?;
            let m = device.build(&naive, dir.path())?;
            let mut copy: Vec<NDArray> = arrays.clone();
            let last = copy.len() - 1;
            copy[last] = NDArray::zeros(out.dtype(), copy[last].shape())?;
            m.call(&mut copy)?;
            Some(copy.pop().expect("the output"))
        }
        _ => None,
    };
    let correct = reference
        .as_ref()
        .map(|r| arrays.last().expect("the output").allclose(r, 1e-3, 1e-4));

    let evaluator = TimeEvaluator {
        number: a.number.max(1),
        repeat: a.repeat.max(1),
        min_repeat_ms: a.min_repeat_ms,
        cache_flush: a.cache_flush,
    };
    let timing = kernel.time(&evaluator, &mut arrays)?;
    let stats = timing.stats_ms();
    let gflops = dag.flop_count() / (stats.median * 1e-3) / 1e9;
    let checked_against = match check {
        CheckKind::Interp => "interpreter",
        CheckKind::Naive => "naive kernel",
        _ => "nothing",
    };
    let shows = |k: &str| a.show.iter().any(|s| s == k);

    if a.json {
        let mut obj = json!({
            "op": format!("{:?}", a.op).to_lowercase(),
            "shape": a.shape,
            "target": target.to_string(),
            "schedule": format!("{:?}", a.schedule).to_lowercase(),
            "workload_key": dag.workload_key(),
            "flops": dag.flop_count(),
            "correct": correct.as_ref().map(|c| c.is_ok()),
            "checked_against": checked_against,
            "median_ms": stats.median,
            "mean_ms": stats.mean,
            "min_ms": stats.min,
            "max_ms": stats.max,
            "std_ms": stats.std,
            "number": timing.number,
            "repeat": timing.results.len(),
            "gflops": gflops,
        });
        if let Some(Err(e)) = &correct {
            obj["mismatch"] = json!(e.to_string());
        }
        if shows("dag") {
            obj["dag"] = json!(dag.to_string());
        }
        if shows("ir") {
            obj["ir"] = json!(func.to_string());
        }
        if shows("source") {
            obj["source"] = json!(source);
        }
        println!("{obj}");
    } else {
        if shows("dag") {
            println!("== compute DAG ==\n{dag}");
        }
        if shows("ir") {
            println!("== lowered IR ==\n{func}");
        }
        if shows("source") {
            println!("== {} source ==\n{source}", target.kind.name());
        }
        let shape: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
        println!(
            "{:?} {} on `{target}`, {:?} schedule",
            a.op,
            shape.join("x"),
            a.schedule
        );
        match &correct {
            Some(Ok(())) => println!("correct: yes (checked against the {checked_against})"),
            Some(Err(e)) => println!("correct: NO (checked against the {checked_against}): {e}"),
            None => println!("correct: not checked"),
        }
        println!(
            "time: {:.4} ms median ({} repeats of {} runs)  {:.2} GFLOPS",
            stats.median,
            timing.results.len(),
            timing.number,
            gflops
        );
        println!("{timing}");
    }
    if let Some(Err(e)) = correct {
        bail!("the kernel's output differs from the {checked_against}: {e}");
    }
    Ok(())
}
