//! The OpenCL kernels the backend generates for GPU schedules the auto-scheduler could
//! propose (the first valid random annotation of a GPU sketch, fixed seeds): matmul
//! with shared-memory tiles, conv2d + bias + relu, softmax with a cross-thread
//! reduction, and Winograd's F(2×2, 3×3). Each is snapshotted and, where an OpenCL
//! device exists, built by the driver and checked against the interpreter.

use tessera_sketch::sketch::SketchTarget;
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::ops::{bias_add, conv2d_nhwc, relu};
use tessera_te::{placeholder, ComputeDag};
use tessera_tests::first_gpu_state;
use tessera_tests::gpu::{check_against_interpreter, Gpu};

/// The generic `opencl` target of a device with PoCL's limits capped at 256 threads;
/// `warp` threads reduce across a row (`TESSERA_OPENCL_WARP_SIZE`).
fn opencl(warp: i64) -> SketchTarget {
    SketchTarget::gpu(1, warp, 256, 16384, 1)
}

fn snapshot_and_run(test: &str, dag: &ComputeDag, target: &SketchTarget, sketch: usize) {
    let (f, reference, n_in) = first_gpu_state(dag, target, sketch, test);
    let module = tessera_opencl::OpenClPlugin::module(&f).unwrap();
    insta::assert_snapshot!(test, module.source);
    if let Some(gpu) = Gpu::opencl_or_skip(test) {
        let dir = tempfile::tempdir().unwrap();
        check_against_interpreter(&gpu, &f, &reference, n_in, dir.path()).unwrap();
    }
}

fn catalog(name: &str, shape: &[i64]) -> ComputeDag {
    OpSpec::new(name, shape, OpAttrs::default())
        .unwrap()
        .dag()
        .unwrap()
}

#[test]
fn opencl_matmul_shared_memory() {
    snapshot_and_run(
        "opencl_matmul",
        &catalog("matmul", &[64, 64, 64]),
        &opencl(1),
        0,
    );
}

#[test]
fn opencl_conv2d_bias_relu() {
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
    snapshot_and_run(
        "opencl_conv2d_bias_relu",
        &ComputeDag::new(&[out]).unwrap(),
        &opencl(1),
        0,
    );
}

#[test]
fn opencl_softmax_cross_thread_reduction() {
    let dag = catalog("softmax", &[4, 100]);
    // 32 threads reduce each row: the shared-memory tree of the allreduce
    snapshot_and_run("opencl_softmax", &dag, &opencl(32), 0);
}

#[test]
fn opencl_winograd() {
    let dag = catalog("conv2d_winograd", &[1, 8, 8, 16, 16, 3, 3]);
    snapshot_and_run("opencl_winograd", &dag, &opencl(1), 0);
}
