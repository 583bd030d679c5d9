//! The CUDA backend on GPU states of the workloads TVM's CUDA tutorials tune (matmul
//! with shared tiles, conv2d + bias + relu, softmax's allreduce as warp shuffles,
//! depthwise conv2d, Winograd): insta snapshots of the CUDA C, each compiled to PTX by
//! NVRTC for `sm_80` and `sm_90` and assembled by `ptxas`, whose report must list every
//! kernel of the launch list with the shared memory the launch list says. Where a GPU
//! is present the same programs run and are checked against the interpreter.
//!
//! NVRTC and ptxas come from a toolkit or NVIDIA's wheels (`.ci/run` installs
//! `nvidia-cuda-nvrtc-cu12` and `nvidia-cuda-nvcc-cu12`). Without them the checks are
//! skipped with the reason printed, except under CI, where that fails.

use tessera_cuda::target::Arch;
use tessera_cuda::{nvrtc, ptxas, CudaError, CudaPlugin};
use tessera_ir::{DataType, Expr, PrimFunc, ThreadAxis};
use tessera_sketch::sketch::SketchTarget;
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::ops::{bias_add, conv2d_nhwc, relu};
use tessera_te::{compute, lower, placeholder, ComputeDag, Schedule};
use tessera_tests::first_gpu_state;
use tessera_tests::gpu::{check_against_interpreter, Gpu};

/// `Ok(None)`: the tool is missing outside CI (skip, reason printed).
fn or_skip<T>(test: &str, r: Result<T, CudaError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e @ (CudaError::NvrtcMissing { .. } | CudaError::PtxasMissing { .. }))
            if std::env::var_os("CI").is_none() =>
        {
            eprintln!("{test}: skipped: {e}");
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

fn snapshot_and_compile(test: &str, dag: &ComputeDag, target: &SketchTarget) {
    let (f, reference, n_in) = first_gpu_state(dag, target, 0, test);
    check_function(test, &f, &reference, n_in);
}

/// Snapshots `f`'s CUDA, compiles and assembles it for sm_80 and sm_90, and runs it
/// against `reference` where a GPU is present.
fn check_function(test: &str, f: &PrimFunc, reference: &PrimFunc, n_in: usize) {
    let src = CudaPlugin::source(f).unwrap();
    insta::assert_snapshot!(test, src.source);
    for arch in ["sm_80", "sm_90"] {
        let arch = Arch::parse(arch).unwrap();
        let Some(ptx) = or_skip(test, nvrtc::compile(&src.source, test, &arch)) else {
            return;
        };
        let Some(report) = or_skip(test, ptxas::assemble(&ptx, &arch)) else {
            return;
        };
        for k in &src.kernels {
            let r = report
                .iter()
                .find(|r| r.name == k.name)
                .unwrap_or_else(|| panic!("{test} {arch}: ptxas did not see `{}`", k.name));
            assert_eq!(r.shared_bytes, k.shared_bytes, "{test} {arch}: {}", k.name);
            assert!(
                r.registers > 0 && r.registers <= 255,
                "{test} {arch}: {r:?}"
            );
            eprintln!(
                "{test} {arch}: {} uses {} registers, {} bytes of shared memory",
                k.name, r.registers, r.shared_bytes
            );
        }
    }
    if let Some(gpu) = Gpu::cuda_or_skip(test) {
        let dir = tempfile::tempdir().unwrap();
        check_against_interpreter(&gpu, f, reference, n_in, dir.path()).unwrap();
    }
}

fn catalog(name: &str, shape: &[i64]) -> ComputeDag {
    OpSpec::new(name, shape, OpAttrs::default())
        .unwrap()
        .dag()
        .unwrap()
}

fn cuda() -> SketchTarget {
    SketchTarget::cuda(132)
}

#[test]
fn cuda_matmul_shared_memory() {
    snapshot_and_compile("cuda_matmul", &catalog("matmul", &[64, 64, 64]), &cuda());
}

#[test]
fn cuda_conv2d_bias_relu() {
    let f = |s: &[i64], n: &str| placeholder(s, tessera_ir::DataType::float32(), n).unwrap();
    let conv = conv2d_nhwc(
        &f(&[1, 8, 8, 16], "data"),
        &f(&[3, 3, 16, 32], "kernel"),
        (1, 1),
        (1, 1),
        (1, 1),
    )
    .unwrap();
    let out = relu(&bias_add(&conv, &f(&[32], "bias"), 3).unwrap()).unwrap();
    snapshot_and_compile(
        "cuda_conv2d_bias_relu",
        &ComputeDag::new(&[out]).unwrap(),
        &cuda(),
    );
}

#[test]
fn cuda_softmax_allreduce() {
    snapshot_and_compile("cuda_softmax", &catalog("softmax", &[4, 100]), &cuda());
}

#[test]
fn cuda_depthwise_conv2d() {
    let dag = catalog("depthwise_conv2d", &[1, 14, 14, 32, 3, 3]);
    snapshot_and_compile("cuda_depthwise_conv2d", &dag, &cuda());
}

#[test]
fn cuda_winograd() {
    let dag = catalog("conv2d_winograd", &[1, 8, 8, 16, 16, 3, 3]);
    snapshot_and_compile("cuda_winograd", &dag, &cuda());
}

/// `B[i] = A[i + shift]` over 256 elements: blocks of 16 threads, each copying 4
/// elements in a vectorized loop.
fn copy_kernel(test: &str, shift: i64) -> (PrimFunc, PrimFunc) {
    let a = placeholder(&[260], DataType::float32(), "A").unwrap();
    let b = compute(&[256], "B", &[], |ix| {
        a.at(&[ix[0].clone() + Expr::int(shift)])
    })
    .unwrap();
    let reference = lower(
        &Schedule::create(&[b.clone()]).unwrap(),
        &[a.clone(), b.clone()],
        "reference",
    )
    .unwrap();
    let mut s = Schedule::create(&[b.clone()]).unwrap();
    let i = s.axis(&b).unwrap()[0].clone();
    let (bo, bi) = s.split(&b, &i, 64).unwrap();
    let (t, v) = s.split(&b, &bi, 4).unwrap();
    s.bind(&b, &bo, ThreadAxis::BlockIdxX).unwrap();
    s.bind(&b, &t, ThreadAxis::ThreadIdxX).unwrap();
    s.vectorize(&b, &v).unwrap();
    (lower(&s, &[a, b], test).unwrap(), reference)
}

#[test]
fn cuda_aligned_copies_are_float4() {
    let (f, reference) = copy_kernel("cuda_float4_copy", 0);
    let src = CudaPlugin::source(&f).unwrap().source;
    assert!(src.contains("typedef float4 v_"), "{src}");
    check_function("cuda_float4_copy", &f, &reference, 1);
    // One element off: the offsets are not multiples of 4, the loop stays a loop.
    let (f, reference) = copy_kernel("cuda_unaligned_copy", 1);
    let src = CudaPlugin::source(&f).unwrap().source;
    assert!(!src.contains("float4"), "{src}");
    check_function("cuda_unaligned_copy", &f, &reference, 1);
}
