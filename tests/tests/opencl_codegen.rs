//! The OpenCL kernels the backend generates for GPU schedules the auto-scheduler could
//! propose (the first valid random annotation of a GPU sketch, fixed seeds): matmul
//! with shared-memory tiles, conv2d + bias + relu, softmax with a cross-thread
//! reduction, and Winograd's F(2×2, 3×3). Each is snapshotted and, where an OpenCL
//! device exists, built by the driver and checked against the interpreter.

use tessera_ir::PrimFunc;
use tessera_search::rng::Rng;
use tessera_search::state::State;
use tessera_sketch::annotate::{annotate, AnnotateParams, Factorizations};
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::ops::{bias_add, conv2d_nhwc, relu};
use tessera_te::{lower, placeholder, ComputeDag};
use tessera_tests::opencl::{check_against_interpreter, device_or_skip};

/// The first state (sketch `sketch`, seeds from 0) the annotation accepts, lowered.
fn first_state(
    dag: &ComputeDag,
    target: &SketchTarget,
    sketch: usize,
    name: &str,
) -> (PrimFunc, PrimFunc, usize) {
    let sketches = generate_sketches(dag, target).unwrap();
    let p = AnnotateParams::gpu(target);
    let mut memo = Factorizations::default();
    let args = State::new(dag).args();
    let n_in = args.len() - dag.outputs.len();
    let reference = lower(
        &State::new(dag).replay().unwrap().schedule,
        &args,
        "reference",
    )
    .unwrap();
    for seed in 0..64 {
        let mut rng = Rng::new(seed);
        match annotate(&sketches[sketch], &p, &mut rng, &mut memo) {
            Ok(s) => {
                let f = lower(&s.replay().unwrap().schedule, &args, name).unwrap();
                return (f, reference, n_in);
            }
            Err(e) if seed < 3 && std::env::var_os("SHOW_REFUSED").is_some() => {
                eprintln!("{name}: seed {seed}: {e}")
            }
            Err(_) => {}
        }
    }
    panic!("no valid state of sketch {sketch} in 64 seeds");
}

/// The generic `opencl` target of a device with PoCL's limits capped at 256 threads;
/// `warp` threads reduce across a row (`TESSERA_OPENCL_WARP_SIZE`).
fn opencl(warp: i64) -> SketchTarget {
    SketchTarget::gpu(1, warp, 256, 16384, 1)
}

fn snapshot_and_run(test: &str, dag: &ComputeDag, target: &SketchTarget, sketch: usize) {
    let (f, reference, n_in) = first_state(dag, target, sketch, test);
    let module = tessera_opencl::OpenClPlugin::module(&f).unwrap();
    insta::assert_snapshot!(test, module.source);
    if let Some(device) = device_or_skip(test) {
        let dir = tempfile::tempdir().unwrap();
        check_against_interpreter(&device, &f, &reference, n_in, dir.path()).unwrap();
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
