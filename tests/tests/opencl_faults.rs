//! Faults on the OpenCL device: each bad candidate is its own typed error and the batch
//! goes on. A module whose OpenCL source does not build is `COMPILE_DEVICE` with the
//! compiler's build log; a kernel that never finishes is `RUN_TIMEOUT`; one that reads
//! far out of bounds (the runner process faults) is `RUNTIME_DEVICE`; a kernel that
//! computes a wrong answer is `WRONG_ANSWER`; the good ones around them are timed.
//! Kernels run in runner processes (the `tessera` binary of this build).

use std::time::Duration;
use tessera_ir::{DataType, Expr, PrimFunc};
use tessera_runtime::runner::{execute, RunJob, RunReply, TimerConfig};
use tessera_search::measure::{Candidate, MeasureOptions, Measurer, Reference};
use tessera_search::MeasureErrorNo;
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{compute, lower, ops, placeholder, reduce_axis, sum, Schedule, Tensor};
use tessera_tests::gpu::{build, Gpu};

const N: i64 = 32;

fn matmul() -> (Tensor, Tensor, Tensor) {
    let a = placeholder(&[N, N], DataType::float32(), "A").unwrap();
    let b = placeholder(&[N, N], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    (a, b, c)
}

const GPU: CpuParams = CpuParams {
    vector_lanes: 4,
    num_cores: 1,
    vectorize: true,
    gpu_threads: 256,
};

/// The GPU default schedule of `outs` computed from `a`, `b`.
fn gpu(a: Tensor, b: Tensor, out: Tensor, name: &str) -> PrimFunc {
    let s = default_schedule(&[out.clone()], GPU).unwrap();
    lower(&s, &[a, b, out], name).unwrap()
}

fn good(name: &str) -> PrimFunc {
    let (a, b, c) = matmul();
    gpu(a, b, c, name)
}

/// Same signature, C + 1.
fn wrong(name: &str) -> PrimFunc {
    let (a, b, c) = matmul();
    let d = compute(&[N, N], "D", &["i", "j"], |ix| {
        c.at(ix) + Expr::float_of(DataType::float32(), 1.0)
    })
    .unwrap();
    gpu(a, b, d, name)
}

/// Same signature, 2^40 dependent additions per element: it never finishes in time.
fn hang(name: &str) -> PrimFunc {
    let (a, b, _) = matmul();
    let k = reduce_axis(1 << 30, "k");
    let k2 = reduce_axis(1 << 10, "k2");
    let d = compute(&[N, N], "D", &["i", "j"], |ix| {
        sum(
            a.at(ix) * b.at(ix) + Expr::cast(DataType::float32(), k.expr() + k2.expr()),
            &[k.clone(), k2.clone()],
        )
    })
    .unwrap();
    gpu(a, b, d, name)
}

/// Same signature, reads gigabytes past A: an out-of-bounds access the device faults on.
fn out_of_bounds(name: &str) -> PrimFunc {
    let (a, b, _) = matmul();
    let d = compute(&[N, N], "D", &["i", "j"], |ix| {
        a.at(&[
            ix[0].clone() * Expr::int(1 << 24) + Expr::int(1 << 28),
            ix[1].clone(),
        ]) + b.at(ix)
    })
    .unwrap();
    gpu(a, b, d, name)
}

fn opencl_backend() -> Box<dyn tessera_backends::Backend> {
    let reg = tessera_plugin::discover(&[tessera_opencl::tessera_plugin_root()], &[]);
    reg.backend_for(&reg.parse_target("opencl").unwrap())
        .unwrap()
}

#[test]
fn hanging_crashing_and_wrong_kernels_are_their_candidates_errors_and_tuning_goes_on() {
    if Gpu::opencl_or_skip("opencl faults").is_none() {
        return;
    }
    let (a, b, c) = matmul();
    let naive = lower(&Schedule::create(&[c.clone()]).unwrap(), &[a, b, c], "ref").unwrap();
    let cpu = tessera_backends::CpuBackend::new(tessera_backends::Target::cpu());
    let reference = Reference::compute(&cpu, &naive, 1, 7).unwrap();
    let opts = MeasureOptions {
        // A good kernel's run (a runner process started, the OpenCL platform opened, the
        // kernel compiled by the driver, run and checked) must not reach the timeout on
        // a fully loaded machine; the hanging kernel (2^40 dependent additions per
        // element) still does.
        run_timeout: Duration::from_secs(20),
        timer: TimerConfig {
            number: 2,
            repeat: 2,
            min_repeat_ms: 0.0,
            cache_flush: false,
        },
        ..MeasureOptions::default()
    };
    let mut m = Measurer::with_backend(opencl_backend(), opts).unwrap();
    let cands: Vec<Candidate> = [
        good("good1"),
        hang("hang"),
        out_of_bounds("oob"),
        wrong("wrong"),
        good("good2"),
    ]
    .into_iter()
    .map(|f| Candidate { func: Ok(f) })
    .collect();
    let rs = m.measure(&cands, 1, Some(&reference));
    let kinds: Vec<MeasureErrorNo> = rs.iter().map(|r| r.error_no).collect();
    assert_eq!(
        kinds,
        vec![
            MeasureErrorNo::NoError,
            MeasureErrorNo::RunTimeout,
            MeasureErrorNo::RuntimeDevice,
            MeasureErrorNo::WrongAnswer,
            MeasureErrorNo::NoError,
        ],
        "{rs:#?}"
    );
    for g in [&rs[0], &rs[4]] {
        assert!(
            !g.costs.is_empty() && g.costs.iter().all(|&c| c.is_finite() && c > 0.0),
            "{g:?}"
        );
    }
}

#[test]
fn a_module_that_does_not_build_is_a_load_failure_with_the_build_log() {
    let Some(gpu) = Gpu::opencl_or_skip("opencl build failure") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (artifact, _) = build(&gpu, &good("broken"), dir.path()).unwrap();
    break_source(&artifact.path);
    let err = gpu.device.load_module(&artifact).unwrap_err().to_string();
    assert!(err.contains("OpenCL build log"), "{err}");
    assert!(
        err.contains("not_a_type"),
        "the compiler's message names it: {err}"
    );
    // in a runner, the same is a load failure, which measurement records as
    // COMPILE_DEVICE (crates/search measure.rs)
    let job = RunJob {
        target: "opencl".into(),
        artifact,
        timer: TimerConfig {
            number: 1,
            repeat: 1,
            min_repeat_ms: 0.0,
            cache_flush: false,
        },
        seed: 1,
        num_outputs: 1,
        check: None,
        slow_cutoff: None,
        prepare_only: false,
        sizes: None,
    };
    match execute(&gpu.device, &job) {
        RunReply::LoadFailed { message } => assert!(message.contains("build log"), "{message}"),
        other => panic!("{other:?}"),
    }
}

/// Rewrites the OpenCL module at `path` so that its source no longer compiles: what a
/// driver's compiler refuses.
fn break_source(path: &std::path::Path) {
    let mut module = tessera_opencl::module::DeviceModule::read(path).unwrap();
    module.source = module.source.replace("__kernel", "__kernel not_a_type");
    std::fs::write(path, module.to_bytes()).unwrap();
}

/// The OpenCL backend, but every module it writes carries source the device's compiler
/// refuses: what a driver that rejects a generated kernel does to a candidate.
struct BrokenSource(Box<dyn tessera_backends::Backend>);

impl tessera_backends::Backend for BrokenSource {
    fn target(&self) -> &tessera_backends::Target {
        self.0.target()
    }
    fn hardware_params(&self) -> &tessera_target::HardwareParams {
        self.0.hardware_params()
    }
    fn codegen(&self, func: &PrimFunc) -> Result<String, tessera_backends::BackendError> {
        self.0.codegen(func)
    }
    fn build(
        &self,
        func: &PrimFunc,
        out_dir: &std::path::Path,
    ) -> Result<tessera_backends::Artifact, tessera_backends::BackendError> {
        let artifact = self.0.build(func, out_dir)?;
        break_source(&artifact.path);
        Ok(artifact)
    }
}

#[test]
fn a_candidate_whose_kernel_does_not_build_is_compile_device_with_the_log() {
    if Gpu::opencl_or_skip("opencl compile_device").is_none() {
        return;
    }
    let opts = MeasureOptions {
        timer: TimerConfig {
            number: 1,
            repeat: 1,
            min_repeat_ms: 0.0,
            cache_flush: false,
        },
        ..MeasureOptions::default()
    };
    let mut m = Measurer::with_backend(Box::new(BrokenSource(opencl_backend())), opts).unwrap();
    let cands = vec![Candidate {
        func: Ok(good("refused")),
    }];
    let rs = m.measure(&cands, 1, None);
    assert_eq!(rs[0].error_no, MeasureErrorNo::CompileDevice, "{rs:#?}");
    let msg = rs[0].error_msg.as_deref().unwrap_or("");
    assert!(
        msg.contains("OpenCL build log") && msg.contains("not_a_type"),
        "{msg}"
    );
}
