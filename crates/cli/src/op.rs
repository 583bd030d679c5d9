//! `tessera op`: build one operator, check it, time it.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::json;
use std::sync::Arc;
use tessera_backends::{Backend, HardwareParams, LaunchDims};
use tessera_ir::interp::{self, HostBuffer};
use tessera_ir::{DataType, PrimFunc};
use tessera_runtime::{Device, DeviceArray, FunctionId, NDArray, TimeEvaluator, TimeResult};
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
        vector_lanes: hw.f32_lanes(),
        num_cores: hw.num_cores,
        vectorize: true,
    };
    Ok(default_schedule(&[out.clone()], p)?)
}

/// A kernel built by the target's backend and loaded on its device (the CPU's, or a
/// plugin's).
struct Kernel {
    device: Arc<dyn Device>,
    function: FunctionId,
    launch: Option<LaunchDims>,
}

impl Kernel {
    fn build(
        backend: &dyn Backend,
        device: &Arc<dyn Device>,
        func: &PrimFunc,
        dir: &std::path::Path,
    ) -> Result<Kernel> {
        let artifact = backend.build(func, dir)?;
        let module = device.load_module(&artifact)?;
        Ok(Kernel {
            device: Arc::clone(device),
            function: device.get_function(module, &artifact.entry)?,
            launch: artifact.launch,
        })
    }

    /// The arrays, copied to the device.
    fn upload(&self, arrays: &[NDArray]) -> Result<Vec<DeviceArray>> {
        Ok(arrays
            .iter()
            .map(|a| DeviceArray::from_host(&self.device, a))
            .collect::<Result<_, _>>()?)
    }

    /// Runs the kernel on `arrays` (the last one is the output, copied back).
    fn call(&self, arrays: &mut [NDArray]) -> Result<()> {
        let on_device = self.upload(arrays)?;
        let buffers: Vec<_> = on_device.iter().map(DeviceArray::buffer).collect();
        self.device
            .launch(self.function, &buffers, self.launch.as_ref())?;
        self.device.synchronize()?;
        if let (Some(out), Some(dev)) = (arrays.last_mut(), on_device.last()) {
            *out = dev.to_host()?;
        }
        Ok(())
    }

    fn time(&self, ev: &TimeEvaluator, arrays: &[NDArray]) -> Result<TimeResult> {
        let on_device = self.upload(arrays)?;
        let buffers: Vec<_> = on_device.iter().map(DeviceArray::buffer).collect();
        Ok(self
            .device
            .time(self.function, &buffers, self.launch.as_ref(), ev)?)
    }
}

pub fn run(a: OpArgs) -> Result<()> {
    for s in &a.show {
        if !["dag", "ir", "source"].contains(&s.as_str()) {
            bail!("--show: unknown item `{s}` (known: dag, ir, source)");
        }
    }
    let registry = crate::plugins::registry();
    let target = registry.parse_target(&a.target)?;
    let backend = registry.backend_for(&target)?;
    let device = registry.device_for(&target)?;
    let hw = backend.hardware_params().clone();
    let (inputs, out) = build_op(&a)?;
    let dag = ComputeDag::new(&[out.clone()])?;
    let mut args: Vec<Tensor> = inputs.clone();
    args.push(out.clone());
    let sched = make_schedule(&out, a.schedule, &hw)?;
    let func = lower(&sched, &args, &format!("{:?}", a.op).to_lowercase())?;
    let source = backend.codegen(&func)?;
    let dir = tempfile::tempdir().context("creating a build directory")?;
    let kernel = Kernel::build(backend.as_ref(), &device, &func, dir.path())?;

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
            let m = Kernel::build(backend.as_ref(), &device, &naive, dir.path())?;
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
    let timing = kernel.time(&evaluator, &arrays)?;
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
